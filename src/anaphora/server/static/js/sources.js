// The sources an administrator ingested (folders and sites) with where they are published and their last sync,
// from GET /v1/sources; and the link that opens a citation's published page in a new tab.

import * as api from "./api.js";
import { $, el, show } from "./dom.js";

/** A URL safe to put in an href: http(s) only, so no javascript: or data: URL from a crawled page runs here. */
export function publishedUrl(url) {
  try {
    const parsed = new URL(url);
    return parsed.protocol === "https:" || parsed.protocol === "http:" ? parsed.href : null;
  } catch {
    return null;
  }
}

/** "open page ↗", opening the cited page of the published site in a new tab (none when the source has no URL). */
export function pageLink(citation) {
  const href = citation && publishedUrl(citation.url);
  if (!href) return null;
  return el("a", {
    class: "source-link", href, target: "_blank", rel: "noopener noreferrer",
    title: href, text: "open page ↗",
  });
}

function when(seconds) {
  return seconds ? new Date(seconds * 1000).toISOString().slice(0, 16).replace("T", " ") + " UTC" : "never";
}

export async function refresh() {
  const sources = await api.request("GET", "v1/sources");
  const items = sources.data.map((s) =>
    el("li", { class: "source-row" },
      el("span", { class: "doc-name", text: s.root }),
      s.kind === "folder" && s.base_url ? el("span", { class: "muted", text: ` → ${s.base_url}` }) : null,
      el("span", { class: "muted", text: ` · ${s.kind} · ${s.pages} pages · last sync ${when(s.synced_at)}` }),
    ),
  );
  $("source-list").replaceChildren(...items);
  $("source-count").textContent = `${items.length} ${items.length === 1 ? "source" : "sources"}`;
  show($("source-box"), items.length > 0);
}
