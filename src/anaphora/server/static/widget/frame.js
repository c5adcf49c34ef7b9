// The widget's chat panel, inside the iframe that /widget.js adds to a docs page. It runs on the assistant's origin:
// an anonymous visitor session (POST v1/visitor/session, renewed while the panel is open; the token stays in this
// frame's session storage and the Authorization header, never in a URL), one conversation at a time (kept across
// the docs site's pages in this tab), streamed answers with citations from the page's own modules, and the keyboard:
// Tab stays in the panel, Esc closes it.

import * as api from "../js/api.js";
import { ask, options, showError, showTurns, wireComposer } from "../js/chat.js";
import { $, show } from "../js/dom.js";

api.token.key = "anaphora.visitor";
const CONVERSATION_KEY = "anaphora.visitor.conversation";
const VISITOR_KEY = "anaphora.visitor.id";
const RENEW_AT = 0.8; // renew a session when this share of its lifetime has passed
const params = new URLSearchParams(location.search);
const embedded = window.parent !== window;
// the page that embeds the frame, as the browser reports it (a page cannot forge it), else as the loader said
const site = (location.ancestorOrigins?.length ? location.ancestorOrigins[0] : params.get("site")) || location.origin;
const parentOrigin = embedded ? site : null;

let conversationId = null;
let busy = false;
let renewal = null;

function ready(on) {
  $("question").disabled = !on;
  $("send").disabled = !on;
}

/** A visitor session: the one held renewed (same visitor), or a new one for this site. */
async function startSession() {
  const session = await api.request("POST", "v1/visitor/session", { site });
  api.token.set(session.token);
  if (sessionStorage.getItem(VISITOR_KEY) !== session.visitor_id) {
    sessionStorage.setItem(VISITOR_KEY, session.visitor_id); // a new visitor: the old conversation is not theirs
    sessionStorage.removeItem(CONVERSATION_KEY);
  }
  clearTimeout(renewal);
  const lifetimeMs = session.expires_at * 1000 - Date.now();
  renewal = setTimeout(() => startSession().catch(showError), Math.max(10_000, lifetimeMs * RENEW_AT));
  return session;
}

async function open(id) {
  conversationId = id;
  if (id) sessionStorage.setItem(CONVERSATION_KEY, id);
  else sessionStorage.removeItem(CONVERSATION_KEY);
  show($("error"), false);
  if (id) {
    ready(false);
    try {
      const conversation = await api.request("GET", `v1/conversations/${encodeURIComponent(id)}`);
      showTurns(conversation.turns);
    } catch (error) {
      if (error.status !== 404) showError(error);
      return open(null); // expired or deleted: start afresh
    }
  } else showTurns([]);
  ready(true);
  $("question").focus();
}

async function send() {
  const box = $("question");
  const question = box.value.trim();
  if (!question || busy) return;
  busy = true;
  show($("error"), false);
  try {
    if (!conversationId) {
      const created = await api.request("POST", "v1/conversations", {});
      conversationId = created.id;
      sessionStorage.setItem(CONVERSATION_KEY, created.id);
    }
    box.value = "";
    await ask(conversationId, question);
    // Thumbs up/down go here once the service stores feedback (issue 49, item 3, another branch): the turn's node
    // ($("turns").lastElementChild) carries its data-index, so a vote is posted for (conversationId, index).
  } catch (error) {
    showError(error);
  } finally {
    busy = false;
    box.focus();
  }
}

function close() {
  if (parentOrigin) window.parent.postMessage({ type: "anaphora:close" }, parentOrigin);
}

/** Tab and Shift+Tab cycle through the panel's controls (and the open passage's), never out of the frame. */
function trapFocus(event) {
  const scope = $("passage").open ? $("passage") : $("panel");
  const focusable = [...scope.querySelectorAll("a[href], button, textarea, input, summary, [tabindex]")].filter(
    (node) => !node.disabled && !node.closest("[hidden]") && node.getClientRects().length && node.tabIndex >= 0,
  );
  if (!focusable.length) return;
  const first = focusable[0];
  const last = focusable[focusable.length - 1];
  if (event.shiftKey && (document.activeElement === first || !scope.contains(document.activeElement))) {
    event.preventDefault();
    last.focus();
  } else if (!event.shiftKey && (document.activeElement === last || !scope.contains(document.activeElement))) {
    event.preventDefault();
    first.focus();
  }
}

function wire() {
  const title = params.get("title");
  if (title) {
    $("widget-title").textContent = title.slice(0, 80);
    document.title = title.slice(0, 80);
  }
  options.why = params.get("why") === "1";
  show($("close"), embedded);
  wireComposer(send);
  $("new-conversation").addEventListener("click", () => !busy && open(null));
  $("close").addEventListener("click", close);
  document.addEventListener("keydown", (event) => {
    if (event.key === "Tab") trapFocus(event);
    else if (event.key === "Escape" && !$("passage").open) close(); // an open passage closes first, by itself
  });
  window.addEventListener("message", (event) => {
    if (event.source === window.parent && event.origin === parentOrigin && event.data?.type === "anaphora:open") {
      $("question").focus();
    }
  });
  api.onUnauthorized(() => {
    // the session expired while the panel slept: a new one (the same visitor if it can still be renewed)
    startSession().catch(showError);
  });
}

async function start() {
  try {
    await startSession();
  } catch (error) {
    showError(error);
    return;
  }
  await open(sessionStorage.getItem(CONVERSATION_KEY));
}

wire();
start();
