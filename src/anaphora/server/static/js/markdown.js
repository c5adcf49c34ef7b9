// A small Markdown renderer that builds DOM nodes: paragraphs, headings, lists, quotes, tables, fenced and inline
// code, emphasis, links and citation markers. Every piece of text becomes a text node, so markup inside an answer or a
// passage (<script>, <img onerror>, SVG) is shown as written; a link is kept only for http(s) and mailto URLs.

import { el } from "./dom.js";

const FENCE = /^\s{0,3}(```|~~~)(.*)$/;
const HEADING = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const BULLET = /^\s{0,3}[-*+]\s+(.*)$/;
const NUMBERED = /^\s{0,3}(\d{1,9})[.)]\s+(.*)$/;
const QUOTE = /^\s{0,3}>\s?(.*)$/;
const RULE = /^\s{0,3}([-*_])(\s*\1){2,}\s*$/;
const ROW = /^\s{0,3}\|.*\|\s*$/;
const DELIMITER_ROW = /^\s{0,3}\|(\s*:?-+:?\s*\|)+\s*$/;
const INLINE = /(`+)([^`][\s\S]*?)\1|\[([^\]\n]+)\]\(([^()\s]*(?:\([^()\s]*\)[^()\s]*)*)\)|\[([^\]\n]+)\]|\*\*(.+?)\*\*|__(.+?)__|\*([^*\s][^*]*?)\*|(?<!\w)_([^_\s][^_]*?)_(?!\w)/g;
const SAFE_PROTOCOLS = new Set(["http:", "https:", "mailto:"]);

/** The URL if it is safe to link (http, https, mailto), otherwise null. */
export function safeUrl(raw) {
  try {
    const url = new URL(raw, document.baseURI);
    return SAFE_PROTOCOLS.has(url.protocol) ? url.href : null;
  } catch {
    return null;
  }
}

/**
 * Inline Markdown as nodes. `cite(id)` may return a node for a citation marker `[id]`, or null to leave it as text.
 */
export function inline(text, cite = () => null) {
  const nodes = [];
  let last = 0;
  for (const match of text.matchAll(INLINE)) {
    if (match.index > last) nodes.push(text.slice(last, match.index));
    last = match.index + match[0].length;
    const [whole, ticks, code, label, href, marker, strong1, strong2, em1, em2] = match;
    if (ticks) nodes.push(el("code", { text: code.replace(/^ (.*) $/s, "$1") }));
    else if (label !== undefined) {
      const url = safeUrl(href);
      nodes.push(url ? el("a", { href: url, rel: "noopener noreferrer nofollow", target: "_blank" }, inline(label, cite)) : whole);
    } else if (marker !== undefined) nodes.push(cite(marker) || whole);
    else if (strong1 !== undefined || strong2 !== undefined) nodes.push(el("strong", {}, inline(strong1 ?? strong2, cite)));
    else nodes.push(el("em", {}, inline(em1 ?? em2, cite)));
  }
  if (last < text.length) nodes.push(text.slice(last));
  return nodes;
}

/** A table row's cells: split at the pipes that are not escaped (`\|`), without the outer ones. */
function cells(line) {
  return line.trim().slice(1, -1).split(/(?<!\\)\|/).map((cell) => cell.trim().replaceAll("\\|", "|"));
}

/** A GitHub-style table (header row, delimiter row, body rows), in a box that scrolls when it is too wide. */
function table(rows, cite) {
  const [head, , ...body] = rows.map(cells);
  const row = (values, tag) => el("tr", {}, values.map((value) => el(tag, {}, inline(value, cite))));
  return el("div", { class: "table" }, el("table", {}, [el("thead", {}, row(head, "th")), el("tbody", {}, body.map((r) => row(r, "td")))]));
}

function paragraph(lines, cite) {
  const children = [];
  lines.forEach((line, i) => {
    if (i) children.push(el("br"));
    children.push(inline(line.trim(), cite));
  });
  return el("p", {}, children);
}

/** Block Markdown into `target` (its old children are replaced). */
export function render(target, text, cite) {
  const lines = String(text).replace(/\r\n?/g, "\n").split("\n");
  const blocks = [];
  let para = [];
  const flush = () => {
    if (para.length) blocks.push(paragraph(para, cite));
    para = [];
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = line.match(FENCE);
    if (fence) {
      flush();
      const body = [];
      for (i++; i < lines.length && !lines[i].trimStart().startsWith(fence[1]); i++) body.push(lines[i]);
      const language = fence[2].trim().split(/\s/)[0];
      const code = el("code", { text: body.join("\n") });
      if (language) code.dataset.language = language;
      blocks.push(el("pre", {}, code));
      continue;
    }
    if (!line.trim()) {
      flush();
      continue;
    }
    const heading = line.match(HEADING);
    if (heading) {
      flush();
      const level = Math.min(6, heading[1].length + 2); // the page has h1 and h2 of its own
      blocks.push(el(`h${level}`, {}, inline(heading[2], cite)));
      continue;
    }
    if (RULE.test(line)) {
      flush();
      blocks.push(el("hr"));
      continue;
    }
    if (ROW.test(line) && DELIMITER_ROW.test(lines[i + 1] ?? "")) {
      flush();
      const rows = [];
      for (; i < lines.length && ROW.test(lines[i]); i++) rows.push(lines[i]);
      i--;
      blocks.push(table(rows, cite));
      continue;
    }
    const bullet = line.match(BULLET);
    const numbered = line.match(NUMBERED);
    if (bullet || numbered) {
      flush();
      const ordered = Boolean(numbered);
      const list = el(ordered ? "ol" : "ul");
      if (ordered && numbered[1] !== "1") list.setAttribute("start", String(Number(numbered[1])));
      for (; i < lines.length; i++) {
        const item = ordered ? lines[i].match(NUMBERED) : lines[i].match(BULLET);
        if (item) list.append(el("li", {}, inline(ordered ? item[2] : item[1], cite)));
        else if (/^\s{2,}\S/.test(lines[i]) && list.lastChild) list.lastChild.append(" ", ...inline(lines[i].trim(), cite));
        else break;
      }
      i--;
      blocks.push(list);
      continue;
    }
    if (QUOTE.test(line)) {
      flush();
      const quoted = [];
      for (; i < lines.length && QUOTE.test(lines[i]); i++) quoted.push(lines[i].match(QUOTE)[1]);
      i--;
      const quote = el("blockquote");
      render(quote, quoted.join("\n"), cite);
      blocks.push(quote);
      continue;
    }
    para.push(line);
  }
  flush();
  target.replaceChildren(...blocks);
  return target;
}
