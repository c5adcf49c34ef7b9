// The "why this answer" panel, built from a turn's trace: the query actually used for retrieval and how it came
// about, whether retrieval was skipped, the passages with their scores, the token budget, the time per stage.
// Fields this page does not know yet (support verdicts, recalled memories, ...) are shown generically.

import { el } from "./dom.js";

const KNOWN = new Set([
  "question", "query", "query_source", "alternate_queries", "route", "route_reason", "retrieval_skipped",
  "abstained", "retrieved", "stages", "model_calls", "prompt_tokens", "budget",
]);
const QUERY_SOURCES = {
  question: "the question as typed",
  rewrite: "a rewrite by the model (accepted by the guard)",
  analysis: "the model's analysis of the turn",
  expansion: "history expansion (no model call)",
};

const number = (value, digits = 3) =>
  typeof value === "number" ? (Number.isInteger(value) ? String(value) : value.toFixed(digits)) : value ?? "–";
const humanize = (key) => key.replace(/_/g, " ").replace(/^./, (c) => c.toUpperCase());

function section(title, ...children) {
  return el("section", { class: "why-section" }, el("h4", { text: title }), ...children);
}

function facts(pairs) {
  return el(
    "dl",
    { class: "facts" },
    pairs.filter(([, value]) => value !== undefined && value !== null && value !== "").map(([term, value]) => [
      el("dt", { text: term }),
      el("dd", {}, value instanceof Node ? value : String(value)),
    ]),
  );
}

function table(columns, rows) {
  return el(
    "div",
    { class: "table-scroll" },
    el(
      "table",
      {},
      el("thead", {}, el("tr", {}, columns.map((c) => el("th", { scope: "col", text: c })))),
      el("tbody", {}, rows.map((cells) => el("tr", {}, cells.map((cell) => el("td", {}, cell instanceof Node ? cell : String(cell)))))),
    ),
  );
}

function querySection(trace) {
  const stage = (trace.stages || []).find((s) => s.name === "query");
  const verdict = stage ? `${stage.status}${stage.detail ? `: ${stage.detail}` : ""}` : "";
  const alternates = trace.alternate_queries || [];
  return section(
    "Query used for retrieval",
    trace.retrieval_skipped
      ? el("p", { class: "query skipped", text: "Retrieval was skipped for this turn." })
      : el("p", { class: "query", "data-testid": "retrieval-query" }, el("q", { text: trace.query || trace.question })),
    facts([
      ["Your words", trace.question],
      ["Where the query came from", QUERY_SOURCES[trace.query_source] || trace.query_source],
      ["Rewrite verdict", verdict],
      ["Also searched", alternates.length ? alternates.join(" · ") : ""],
    ]),
  );
}

function routeSection(trace) {
  return section(
    "Route",
    facts([
      ["Kind", trace.route || "–"],
      ["Reason", trace.route_reason],
      ["Retrieval", trace.retrieval_skipped ? `skipped${trace.route_reason ? ` (${trace.route_reason})` : ""}` : "done"],
      ["Abstained", trace.abstained ? "yes: the documents do not cover the question" : ""],
      ["Model calls", trace.model_calls],
      ["Prompt tokens", trace.prompt_tokens],
    ]),
  );
}

function passagesSection(trace, citedIds, openPassage) {
  const passages = trace.retrieved || [];
  if (!passages.length) return section("Passages", el("p", { class: "muted", text: "No passages were retrieved." }));
  const rows = passages.map((p, i) => [
    String(i + 1),
    el("button", { type: "button", class: "link", text: p.id, onclick: () => openPassage(p) }),
    [p.source, p.heading].filter(Boolean).join(" — "),
    number(p.score, 4),
    number(p.bm25_score),
    number(p.dense_score),
    number(p.rerank_score),
    citedIds.has(p.id) ? "cited" : "",
  ]);
  return section("Passages", table(["#", "id", "source — heading", "score", "BM25", "dense", "rerank", ""], rows));
}

function budgetSection(budget) {
  if (!budget) return null;
  const meter = el("meter", { min: 0, max: budget.budget, value: budget.used, title: `${budget.used} of ${budget.budget}` });
  return section(
    "Token budget",
    el("p", {}, meter, ` ${budget.used} of ${budget.budget} tokens`),
    facts(Object.entries(budget).filter(([k]) => k !== "budget" && k !== "used").map(([k, v]) => [humanize(k), String(v)])),
  );
}

function stagesSection(stages) {
  if (!stages || !stages.length) return null;
  const total = stages.reduce((sum, s) => sum + (s.ms || 0), 0) || 1;
  const rows = stages.map((s) => [
    s.name,
    el("span", { class: `status status-${s.status}`, text: s.status }),
    el("span", { class: "ms" }, el("span", { class: "bar", style: null, "data-share": (s.ms / total).toFixed(3) }), number(s.ms, 1)),
    s.detail || "",
  ]);
  const node = section("Time per stage (ms)", table(["stage", "status", "ms", "detail"], rows));
  for (const bar of node.querySelectorAll(".bar")) bar.style.width = `${Math.max(2, Number(bar.dataset.share) * 100)}%`;
  return node;
}

/** Any JSON value as nodes: arrays of objects as tables, objects as term lists, the rest as text. */
export function generic(value) {
  if (Array.isArray(value)) {
    if (!value.length) return el("p", { class: "muted", text: "(none)" });
    if (value.every((v) => v && typeof v === "object" && !Array.isArray(v))) {
      const columns = [...new Set(value.flatMap((v) => Object.keys(v)))];
      return table(columns, value.map((v) => columns.map((c) => scalar(v[c]))));
    }
    return el("ul", {}, value.map((v) => el("li", {}, generic(v))));
  }
  if (value && typeof value === "object") return facts(Object.entries(value).map(([k, v]) => [humanize(k), generic(v)]));
  return document.createTextNode(scalar(value));
}

function scalar(value) {
  if (value === null || value === undefined) return "–";
  if (Array.isArray(value) && value.every((v) => v === null || typeof v !== "object")) return value.map(scalar).join(", ");
  if (typeof value === "object") return JSON.stringify(value);
  return String(number(value));
}

/** A collapsible panel for one turn. */
export function whyPanel(trace, citations, openPassage) {
  const details = el("details", { class: "why" }, el("summary", { text: "Why this answer" }));
  if (!trace) {
    details.append(el("p", { class: "muted", text: "No trace was stored for this turn." }));
    return details;
  }
  const cited = new Set((citations || []).map((c) => c.id));
  const sections = [
    querySection(trace),
    routeSection(trace),
    passagesSection(trace, cited, openPassage),
    ...Object.entries(trace)
      .filter(([key]) => !KNOWN.has(key))
      .map(([key, value]) => section(humanize(key), generic(value))),
    budgetSection(trace.budget),
    stagesSection(trace.stages),
  ];
  details.append(...sections.filter(Boolean));
  return details;
}
