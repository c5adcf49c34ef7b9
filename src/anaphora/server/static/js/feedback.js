// Under each stored answer: "Helpful? Yes / No", a thumbs up or down (pressing the chosen one again withdraws it), an optional comment,
// and the operator's "contact support" link when the answer was refused or weakly supported.

import * as api from "./api.js";
import { el, show } from "./dom.js";

const LABELS = { up: "Helpful", down: "Not helpful" };

function path(conversationId, index) {
  return `v1/conversations/${encodeURIComponent(conversationId)}/turns/${index}/feedback`;
}

/** The vote bar of turn `index`; `feedback` is the stored vote (or null), `onError` shows an API error. */
export function feedbackBar(conversationId, index, feedback, onError) {
  let current = feedback?.vote || null;
  const status = el("span", { class: "feedback-status muted", "aria-live": "polite" });
  const comment = el("textarea", { rows: 2, maxlength: 2000, "aria-label": "Comment on this answer (optional)", placeholder: "What was wrong or missing? (optional)" });
  comment.value = feedback?.comment || "";
  const save = el("button", { type: "submit", text: "Send comment" });
  const form = el("form", { class: "feedback-comment", hidden: true }, comment, save);
  const buttons = {};
  const press = () => {
    for (const [vote, button] of Object.entries(buttons)) button.setAttribute("aria-pressed", String(vote === current));
  };
  const cast = async (vote) => {
    try {
      if (vote === null) await api.request("DELETE", path(conversationId, index));
      else await api.request("PUT", path(conversationId, index), { vote, comment: comment.value.trim() });
      current = vote;
      press();
      status.textContent = vote === null ? "Vote withdrawn." : "Thanks for the feedback.";
      show(form, vote !== null);
    } catch (error) {
      if (error.status !== 401) onError(error);
    }
  };
  for (const vote of ["up", "down"]) {
    buttons[vote] = el("button", {
      type: "button", class: `vote vote-${vote}`, "aria-label": LABELS[vote], title: LABELS[vote],
      text: vote === "up" ? "Yes" : "No", onclick: () => cast(current === vote ? null : vote),
    });
  }
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (current) cast(current);
  });
  press();
  show(form, current === "down" || Boolean(feedback?.comment));
  return el("div", { class: "feedback", role: "group", "aria-label": "Was this answer helpful?" },
    el("div", { class: "feedback-votes" }, el("span", { class: "muted", text: "Helpful?", "aria-hidden": "true" }),
      buttons.up, buttons.down, status), form);
}

/** The operator's support link, offered with a gap (refused or weakly supported answer). */
export function handoffNode(handoff) {
  if (!handoff?.url) return null;
  const why = handoff.reason === "refused" ? "The documents did not answer this." : "This answer has little support in the documents.";
  return el("p", { class: "handoff" }, `${why} `,
    el("a", { href: handoff.url, target: "_blank", rel: "noopener noreferrer", text: "Contact support" }));
}
