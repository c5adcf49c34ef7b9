// Document upload for administrators: send the files, then follow the ingestion job until it is done, showing its
// status and progress (embedded chunks) and the report's file names (untrusted: shown as text).

import * as api from "./api.js";
import { $, el, show } from "./dom.js";
import * as sources from "./sources.js";

const POLL_MS = 250;
let reportError = () => {};
let wired = false;

/** Show the panel if this user may manage documents (an admin, or dev mode). */
export async function init(onError) {
  reportError = onError;
  try {
    await refresh();
  } catch (error) {
    if (error.status === 403) return; // not an administrator: no panel
    throw error;
  }
  show($("documents"), true);
  if (wired) return;
  wired = true;
  $("document-filter").addEventListener("input", filter);
  $("document-box").querySelector("summary").addEventListener("click", () => { userToggled = true; });
  $("upload-form").addEventListener("submit", (event) => {
    event.preventDefault();
    upload().catch(reportError);
  });
}

const OPEN_UP_TO = 8; // a longer list starts collapsed, with its count, and gets a filter
let userToggled = false;

async function refresh() {
  const documents = await api.request("GET", "v1/documents");
  const items = documents.data.map((d) =>
    el("li", { "data-name": d.source.toLowerCase() }, el("span", { class: "doc-name", text: d.source }), el("span", { class: "muted", text: ` ${d.chunks} chunks` })),
  );
  $("document-list").replaceChildren(...items);
  await sources.refresh().catch(() => show($("source-box"), false)); // an older server: no sources API
  const n = items.length;
  $("document-count").textContent = `${n.toLocaleString("en")} ${n === 1 ? "document" : "documents"}`;
  show($("document-filter"), n > OPEN_UP_TO);
  if (!userToggled) $("document-box").open = n <= OPEN_UP_TO;
  filter();
}

function filter() {
  const wanted = $("document-filter").value.trim().toLowerCase();
  const items = [...$("document-list").children];
  let shown = 0;
  for (const item of items) {
    const match = !wanted || item.dataset.name.includes(wanted);
    item.hidden = !match;
    shown += match ? 1 : 0;
  }
  $("document-shown").textContent = wanted ? `${shown} of ${items.length} match` : "";
  show($("document-shown"), Boolean(wanted));
}

function status(job) {
  const box = $("upload-status");
  const progress = el("progress", { max: Math.max(1, job.progress?.total || 0), value: job.progress?.done || 0 });
  const line = el("p", { class: `job job-${job.status}`, "data-status": job.status });
  line.append(`${job.status}`, job.progress?.total ? ` · ${job.progress.done} of ${job.progress.total} chunks` : "");
  const parts = [line, progress];
  if (job.error) parts.push(el("p", { class: "error-text", text: job.error }));
  const report = job.report;
  if (report) {
    const named = (label, names) => (names.length ? el("p", {}, `${label}: `, el("span", { class: "doc-name", text: names.join(", ") })) : null);
    parts.push(named("Added", report.added), named("Updated", report.updated), named("Unchanged", report.unchanged));
    for (const skipped of report.skipped) parts.push(el("p", { class: "muted" }, "Skipped ", el("span", { class: "doc-name", text: skipped.path }), `: ${skipped.reason}`));
  }
  box.replaceChildren(...parts.filter(Boolean));
}

async function upload() {
  const files = $("upload-files").files;
  if (!files.length) return;
  const form = new FormData();
  for (const file of files) form.append("files", file, file.name);
  const button = $("upload-form").querySelector("button");
  button.disabled = true;
  try {
    const started = await api.request("POST", "v1/documents", form);
    status({ status: started.status, progress: { done: 0, total: 0 } });
    for (;;) {
      const job = await api.request("GET", `v1/jobs/${encodeURIComponent(started.job_id)}`);
      status(job);
      if (job.status === "done" || job.status === "failed") break;
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
    $("upload-files").value = "";
    await refresh();
  } finally {
    button.disabled = false;
  }
}
