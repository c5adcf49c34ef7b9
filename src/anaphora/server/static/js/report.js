// The operator's report (administrators only): what readers asked most, by what was searched, and what they did
// not get, over a chosen range, from GET /v1/admin/report. Every text in it is a reader's: shown as text, inert.

import * as api from "./api.js";
import { $, el, show } from "./dom.js";
import { errorNodes } from "./chat.js";

const query = () => `since=${encodeURIComponent($("report-range").value)}`;

function table(caption, headers, rows) {
  if (!rows.length) return el("section", {}, el("h3", { text: caption }), el("p", { class: "muted", text: "None." }));
  return el("section", {},
    el("h3", { text: caption }),
    el("div", { class: "report-scroll" }, el("table", { class: "report-table" },
      el("thead", {}, el("tr", {}, headers.map((h) => el("th", { scope: "col", text: h })))),
      el("tbody", {}, rows.map((cells) => el("tr", {}, cells.map((c) => el("td", { text: c ?? "" }))))),
    )));
}

function summary(report) {
  const s = report.shares;
  const percent = (x) => `${Math.round(x * 100)}%`;
  return el("p", { class: "muted" },
    `${report.turns} turns in ${report.conversations} conversations by ${report.users} users. ` +
    `Chit-chat ${s.chit_chat} (${percent(s.chit_chat_share)}), about the conversation ${s.meta} (${percent(s.meta_share)}). ` +
    `Votes: ${report.votes.up} up, ${report.votes.down} down. Grouping: ${report.grouping}.` +
    (report.truncated ? " The range held more turns than were read: narrow it." : ""));
}

function render(report) {
  const topics = (list) => list.map((t) => [t.topic, String(t.turns), String(t.follow_ups), String(t.refused), String(t.low_support), t.questions.join(" · ")]);
  $("report-body").replaceChildren(
    summary(report),
    table("Asked most (by what was searched)", ["Topic", "Turns", "Follow-ups", "Refused", "Low support", "As asked"], topics(report.top_topics)),
    table("Documentation gaps", ["Topic", "Turns", "Follow-ups", "Refused", "Low support", "As asked"], topics(report.gap_topics)),
    table("Thumbs down", ["Searched", "Comment", "Cited pages"], report.thumbs_down.map((d) => [d.searched, d.comment, d.cited.join(", ")])),
    table("Pages cited most", ["Page", "Citations"], report.pages_cited_most.map((p) => [p.source, String(p.citations)])),
    table("Pages never cited", ["Page"], report.pages_never_cited.map((p) => [p])),
  );
}

async function load() {
  const body = $("report-body");
  body.replaceChildren(el("p", { class: "muted", text: "Reading the turns…" }));
  try {
    render(await api.request("GET", `v1/admin/report?${query()}`));
  } catch (error) {
    if (error.status !== 401) body.replaceChildren(el("p", { class: "error-text" }, errorNodes(error)));
  }
}

async function download() {
  try {
    const response = await api.fetchRaw(`v1/admin/report?${query()}&format=csv`);
    const link = el("a", { href: URL.createObjectURL(await response.blob()), download: "anaphora-report.csv" });
    link.click();
    URL.revokeObjectURL(link.href);
  } catch (error) {
    if (error.status !== 401) $("report-body").prepend(el("p", { class: "error-text" }, errorNodes(error)));
  }
}

/** Offer the report to an administrator (`admin` from GET /v1/session). */
export function init(admin) {
  show($("open-report"), admin);
  if (!admin) return;
  $("open-report").onclick = () => {
    $("report").showModal();
    load();
  };
  $("report-range").onchange = load;
  $("report-csv").onclick = download;
}
