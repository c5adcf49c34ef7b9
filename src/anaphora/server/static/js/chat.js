// One conversation on screen: its stored turns, a streamed new turn with a stop button, citation markers that
// open the passage, and a "why" panel per turn.

import * as api from "./api.js";
import { $, el, show } from "./dom.js";
import { feedbackBar, handoffNode } from "./feedback.js";
import { render, safeUrl } from "./markdown.js";
import { whyPanel } from "./why.js";

/** What a page shows of each turn: the widget may leave the "why this answer" panel out. */
export const options = { why: true };

const dialog = () => $("passage");

/** The published page a citation opens (a page URL its source carries), or null: then the passage opens. */
export function publishedUrl(citation, passage) {
  const raw = citation?.url || passage?.url || passage?.metadata?.url || "";
  const url = raw ? safeUrl(raw) : null;
  return url && /^https?:/.test(url) ? url : null;
}

function sourceLink(url, props, ...children) {
  return el("a", { href: url, target: "_blank", rel: "noopener noreferrer nofollow", ...props }, ...children);
}

/** Show a passage (untrusted text, rendered inert) with its source and heading. */
export function openPassage(passage, citation = {}) {
  const source = passage?.source || citation.source || "";
  const heading = passage?.heading || citation.heading || "";
  $("passage-title").textContent = source || citation.id || passage?.id || "Passage";
  const meta = [heading, `id ${passage?.id || citation.id}`];
  if (typeof passage?.score === "number") meta.push(`score ${passage.score.toFixed(4)}`);
  if (citation.how === "attributed") meta.push("attributed by word overlap (the model cited nothing)");
  $("passage-meta").textContent = meta.filter(Boolean).join(" · ");
  if (passage?.text) render($("passage-text"), passage.text);
  else $("passage-text").replaceChildren(el("p", { class: "muted", text: "This turn's trace does not hold the passage's text." }));
  if (!dialog().open) dialog().showModal();
}

/** A turn's answer with citation markers as buttons, and a numbered source list under it. */
function renderAnswer(node, answer, citations, trace) {
  const passages = new Map((trace?.retrieved || []).map((p) => [p.id, p]));
  const numbers = new Map((citations || []).map((c, i) => [c.id, i + 1]));
  const open = (citation) => () => openPassage(passages.get(citation.id), citation);
  const urlOf = (citation) => publishedUrl(citation, passages.get(citation.id));
  const cite = (id) => {
    if (!numbers.has(id)) return null;
    const citation = citations[numbers.get(id) - 1];
    const props = {
      class: "cite", title: `${citation.source}${citation.heading ? ` — ${citation.heading}` : ""}`,
      "aria-label": `source ${numbers.get(id)}: ${citation.source}`, text: String(numbers.get(id)),
    };
    const url = urlOf(citation);
    return url ? sourceLink(url, props) : el("button", { type: "button", onclick: open(citation), ...props });
  };
  const entry = (c, i) => {
    const parts = [
      el("span", { class: "cite-number", text: String(i + 1) }),
      el("span", { class: "source-name", text: c.source || c.id }),
      c.heading ? el("span", { class: "source-heading", text: ` — ${c.heading}` }) : null,
    ];
    const url = urlOf(c);
    return url ? sourceLink(url, { class: "source source-link" }, ...parts) : el("button", { type: "button", class: "source", onclick: open(c) }, ...parts);
  };
  render(node.querySelector(".answer"), answer, cite);
  const sources = node.querySelector(".sources");
  sources.replaceChildren(...(citations || []).map((c, i) => el("li", {}, entry(c, i))));
  show(sources, Boolean(citations && citations.length));
  node.querySelector(".why")?.remove();
  if (trace && options.why) node.querySelector(".reply").append(whyPanel(trace, citations, (p) => openPassage(p)));
}

function turnNode(question) {
  return el("li", { class: "turn" },
    el("div", { class: "question" }, el("span", { class: "visually-hidden", text: "You: " }), el("p", { text: question })),
    el("div", { class: "reply" },
      el("div", { class: "answer markdown", "aria-live": "polite" }),
      el("div", { class: "turn-error banner", role: "alert", hidden: true }),
      el("ol", { class: "sources", "aria-label": "Sources", hidden: true }),
    ),
  );
}

/** The vote bar and the support link under a stored turn's answer (replacing any from before). */
function decorate(node, conversationId, index, feedback, handoff, onError) {
  node.querySelector(".feedback")?.remove();
  node.querySelector(".handoff")?.remove();
  const reply = node.querySelector(".reply");
  const link = handoffNode(handoff);
  if (link) reply.append(link);
  reply.append(feedbackBar(conversationId, index, feedback, onError));
}

export function errorNodes(error) {
  return [el("strong", { text: error.message || String(error) }), error.hint ? el("span", { class: "hint", text: ` ${error.hint}` }) : null];
}

/** The page's error banner (#error) with the API's message and hint, and a button that dismisses it. */
export function showError(error) {
  const banner = $("error");
  const close = el("button", { type: "button", class: "icon", "aria-label": "Dismiss", text: "✕", onclick: () => show(banner, false) });
  banner.replaceChildren(el("div", {}, errorNodes(error)), close);
  show(banner, true);
}

function turnError(node) {
  return (error) => {
    const box = node.querySelector(".turn-error");
    box.replaceChildren(...errorNodes(error));
    show(box, true);
  };
}

export function showTurns(turns, conversationId = null) {
  const list = $("turns");
  list.replaceChildren();
  for (const turn of turns) {
    const node = turnNode(turn.question);
    node.dataset.index = String(turn.index);
    renderAnswer(node, turn.answer, turn.citations, turn.trace);
    if (conversationId) decorate(node, conversationId, turn.index, turn.feedback, turn.handoff, turnError(node));
    list.append(node);
  }
  show($("empty"), !turns.length);
  list.lastElementChild?.scrollIntoView({ block: "end" });
}

/**
 * Ask `question` in `conversationId`, streaming the answer into a new turn. Resolves when the turn ended,
 * was stopped, or failed (the failure is shown in the turn, as the API's message and hint).
 */
export async function ask(conversationId, question) {
  const node = turnNode(question);
  node.classList.add("streaming");
  $("turns").append(node);
  show($("empty"), false);
  const answer = node.querySelector(".answer");
  const controller = new AbortController();
  const stop = $("stop");
  stop.onclick = () => controller.abort();
  show(stop, true);
  show($("send"), false);
  let text = "";
  let received = false;
  try {
    const path = `v1/conversations/${encodeURIComponent(conversationId)}/messages`;
    for await (const event of api.stream(path, { content: question }, controller.signal)) {
      const delta = event.choices?.[0]?.delta?.content;
      if (delta) {
        if (!received) {
          received = true;
          performance.mark("anaphora:first-delta");
        }
        text += delta;
        answer.textContent = text; // plain text while streaming: cheap, and Markdown arrives whole at the end
        node.scrollIntoView({ block: "end" });
      }
      if (event.anaphora) {
        node.dataset.index = String(event.anaphora.turn_index);
        renderAnswer(node, text, event.anaphora.citations, event.anaphora.trace);
        decorate(node, conversationId, event.anaphora.turn_index, null, event.anaphora.handoff, turnError(node));
      }
    }
  } catch (error) {
    if (error.name === "AbortError") {
      node.classList.add("stopped");
      const note = node.querySelector(".turn-error");
      note.replaceChildren(el("span", { text: "Stopped. The server still finishes this turn and stores it: open the conversation again to see the whole answer." }));
      show(note, true);
    } else {
      turnError(node)(error);
    }
  } finally {
    node.classList.remove("streaming");
    show(stop, false);
    show($("send"), true);
  }
}

/** The composer (#composer, #question): its button and Enter call `send`; Shift+Enter adds a line. */
export function wireComposer(send) {
  $("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    send();
  });
  $("question").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      send();
    }
  });
}
