// The "why this answer" panel, built from a turn's trace: the query actually used for retrieval and how it came
// about, whether retrieval was skipped, the passages with their scores, how the answer was made and checked, the
// memories recalled, the model calls, the token budget, the time per stage: with labels, dates and units, never raw
// field names. Fields this page does not know yet are shown generically.

import { el } from "./dom.js";

const KNOWN = new Set([
  "question", "query", "query_source", "alternate_queries", "query_weights", "route", "route_reason",
  "retrieval_skipped",
  "abstained", "retrieved", "stages", "model_calls", "prompt_tokens", "budget", "calls", "memory", "support",
  "answer_source",
]);
const ANSWER_SOURCES = {
  model: "written by the chat model",
  extractive: "quoted from the passages (no model wrote it)",
  abstain: "no answer: the documents do not cover the question",
  none: "no answer",
};
const CALL_PURPOSES = { answer: "Answer", rewrite: "Query rewrite", analysis: "Turn analysis", summary: "Summary" };
const VERDICTS = { supported: "supported", unsupported: "not found in the sources", filler: "no claim to check" };
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
  // with several queries searched, how much each one's ranking counted in their fusion (0: left out)
  const weights = trace.query_weights || {};
  const weight = (query) =>
    Object.keys(weights).length < 2 || !(query in weights)
      ? ""
      : weights[query] > 0 ? `weight ${weights[query].toFixed(2)}` : "left out";
  const alternates = (trace.alternate_queries || []).map((q) => (weight(q) ? `${q} (${weight(q)})` : q));
  return section(
    "Query used for retrieval",
    trace.retrieval_skipped
      ? el("p", { class: "query skipped", text: "Retrieval was skipped for this turn." })
      : el("p", { class: "query", "data-testid": "retrieval-query" }, el("q", { text: trace.query || trace.question })),
    facts([
      ["Your words", trace.question],
      ["Where the query came from", QUERY_SOURCES[trace.query_source] || trace.query_source],
      ["Rewrite verdict", verdict],
      ["Its weight in the fusion", weight(trace.query)],
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

const count = (n, unit) => (typeof n === "number" ? `${n.toLocaleString("en")} ${unit}` : "–");
const whenText = (seconds) =>
  typeof seconds === "number"
    ? new Date(seconds * 1000).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" })
    : "–";
const gist = (text, limit = 160) => {
  const line = String(text || "").trim().split("\n", 1)[0];
  return line.length > limit ? `${line.slice(0, limit).replace(/\s+\S*$/, "")} …` : line;
};

function answerSection(trace) {
  if (!trace.answer_source) return null;
  return section("Answer", facts([["How it was made", ANSWER_SOURCES[trace.answer_source] || trace.answer_source]]));
}

function supportSection(units) {
  if (!units || !units.length) return null;
  const rows = units.map((u) => [
    u.text ? el("span", { class: "unit-text", text: u.text }) : el("em", { text: "(left out: not shown)" }),
    u.verdict in VERDICTS ? VERDICTS[u.verdict] : u.verdict,
    typeof u.precision === "number" ? `${Math.round(u.precision * 100)} %` : "–",
    u.passage_id || (u.verdict === "supported" ? "the conversation" : ""),
    [u.kept === false ? "left out of the answer" : "", u.reason, (u.missing || []).length ? `not in any source: ${u.missing.join(", ")}` : ""]
      .filter(Boolean).join("; "),
  ]);
  return section("Answer check", table(["part of the answer", "verdict", "words found in the source", "source", "note"], rows));
}

function callsSection(calls) {
  if (!calls || !calls.length) return null;
  const rows = calls.map((c) => [
    CALL_PURPOSES[c.purpose] || humanize(c.purpose || ""),
    count(c.prompt_tokens, "tokens"),
    count(c.cached_tokens, "tokens"),
    c.cache_write_tokens ? count(c.cache_write_tokens, "tokens") : "–",
    count(c.completion_tokens, "tokens"),
    typeof c.first_token_ms === "number" ? `${Math.round(c.first_token_ms).toLocaleString("en")} ms` : "–",
  ]);
  return section(
    "Model calls",
    table(["call", "prompt", "of it from a cache", "written to a cache", "generated", "first word after"], rows),
  );
}

function memorySection(memories) {
  if (!memories || !memories.length) return null;
  const rows = memories.map((m) => {
    const turns = (m.turns || []).map((t) => t + 1).join(", "); // counted from 1, as a person counts them
    const kind = m.kind === "fact" ? (m.current === false ? "fact (since replaced)" : "fact (current)") : "your message";
    return [
      gist(m.text),
      kind,
      `${(m.turns || []).length === 1 ? "turn" : "turns"} ${turns} of conversation ${m.conversation_id}, ${whenText(m.time)}`,
      m.injected ? "yes" : "no",
      typeof m.similarity === "number" ? `${Math.round(m.similarity * 100)} %` : "–",
      m.why || "",
    ];
  });
  return section(
    "Recalled from memory",
    table(["what you said", "kind", "where and when", "in the prompt", "similarity", "why recalled"], rows),
  );
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
    answerSection(trace),
    supportSection(trace.support),
    memorySection(trace.memory),
    callsSection(trace.calls),
    ...Object.entries(trace)
      .filter(([key]) => !KNOWN.has(key))
      .map(([key, value]) => section(humanize(key), generic(value))),
    budgetSection(trace.budget),
    stagesSection(trace.stages),
  ];
  details.append(...sections.filter(Boolean));
  return details;
}
