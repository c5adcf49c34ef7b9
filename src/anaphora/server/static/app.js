// The chat page's entry point: sign-in (none in dev mode; a pasted JWT otherwise), the conversation named in the
// URL (#/c/ID, so a reload keeps it), the composer (Enter sends, Shift+Enter adds a line), errors as the API's
// message and hint.

import * as api from "./js/api.js";
import { ask, showError, showTurns, wireComposer } from "./js/chat.js";
import * as conversations from "./js/conversations.js";
import { $, el, show } from "./js/dom.js";
import * as report from "./js/report.js";
import * as upload from "./js/upload.js";

let conversationId = null;
let busy = false;

function hideError() {
  show($("error"), false);
}

function signIn(message = "") {
  api.token.clear();
  show($("app"), false);
  show($("signin"), true);
  $("signin-message").textContent = message;
  $("signin-token").value = "";
  $("signin-token").focus();
}

function conversationFromHash() {
  const match = location.hash.match(/^#\/c\/([A-Za-z0-9_-]+)$/);
  return match ? match[1] : null;
}

function setTitle(title) {
  $("conversation-title").textContent = title || "New conversation";
  document.title = title ? `${title} · Anaphora` : "Anaphora";
}

/** The composer takes a question only once the conversation on screen has loaded: loading it replaces the turn
 * list, which would wipe a question sent while it loaded. */
function composerReady(ready) {
  $("question").disabled = !ready;
  $("send").disabled = !ready;
}

async function open(id) {
  hideError();
  conversationId = id;
  conversations.select(id);
  closeSidebarOnPhone();
  if (!id) {
    setTitle("");
    showTurns([]);
    composerReady(true);
    $("question").focus();
    return;
  }
  composerReady(false);
  try {
    // the latest 1000 turns (the most one page holds): every turn of any conversation a person reads here
    const conversation = await api.request("GET", `v1/conversations/${encodeURIComponent(id)}?limit=1000`);
    if (conversationId !== id) return;
    setTitle(conversation.title);
    showTurns(conversation.turns, id);
  } catch (error) {
    if (error.status === 401) return;
    setTitle("");
    showTurns([]);
    showError(error);
  }
  composerReady(true);
  $("question").focus();
}

function go(id) {
  const hash = id ? `#/c/${id}` : "";
  if (location.hash === hash || (!id && !location.hash)) open(id);
  else location.hash = hash;
}

async function send() {
  const box = $("question");
  const question = box.value.trim();
  if (!question || busy) return;
  busy = true;
  hideError();
  try {
    if (!conversationId) {
      const created = await api.request("POST", "v1/conversations", {});
      conversationId = created.id;
      history.replaceState(null, "", `#/c/${created.id}`);
      conversations.touch(created);
      conversations.select(created.id);
    }
    box.value = "";
    const id = conversationId;
    await ask(id, question);
    if (conversationId === id) {
      const fresh = await api.request("GET", `v1/conversations?limit=1&offset=0`);
      if (fresh.data[0]) {
        conversations.touch(fresh.data[0]);
        if (fresh.data[0].id === id) setTitle(fresh.data[0].title);
      }
    }
  } catch (error) {
    if (error.status !== 401) showError(error);
  } finally {
    busy = false;
    box.focus();
  }
}

function closeSidebarOnPhone() {
  document.body.classList.remove("sidebar-open");
  $("toggle-sidebar").setAttribute("aria-expanded", "false");
}

function wire() {
  wireComposer(send);
  $("new-conversation").addEventListener("click", () => go(null));
  $("close-sidebar").addEventListener("click", () => {
    closeSidebarOnPhone();
    $("toggle-sidebar").focus();
  });
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && document.body.classList.contains("sidebar-open")) closeSidebarOnPhone();
  });
  $("toggle-sidebar").addEventListener("click", () => {
    const open = document.body.classList.toggle("sidebar-open");
    $("toggle-sidebar").setAttribute("aria-expanded", String(open));
  });
  $("sign-out").addEventListener("click", async () => {
    try {
      await api.request("POST", "v1/session/logout");
    } catch {
      // the token may be expired already; signing out goes on
    }
    signIn("Signed out.");
  });
  $("signin-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const value = $("signin-token").value.trim();
    if (!value) return;
    api.token.set(value);
    start();
  });
  window.addEventListener("hashchange", () => open(conversationFromHash()));
  api.onUnauthorized((error) =>
    signIn(api.token.get() ? error.message + (error.hint ? ` (${error.hint})` : "") : "This server needs an access token."),
  );
  conversations.init({
    open: (id) => go(id),
    error: showError,
    deleted: (id) => id === conversationId && go(null),
    renamed: (c) => c.id === conversationId && setTitle(c.title),
  });
}

async function start() {
  let session;
  try {
    session = await api.request("GET", "v1/session");
  } catch (error) {
    if (error.status === 401) return; // onUnauthorized has shown sign-in with the server's message
    show($("signin"), false);
    show($("app"), true);
    showError(error);
    return;
  }
  show($("signin"), false);
  show($("app"), true);
  $("whoami").textContent = api.token.get() ? `Signed in as ${session.user_id}` : `Development mode (user ${session.user_id})`;
  show($("sign-out"), Boolean(api.token.get()));
  report.init(Boolean(session.admin));
  try {
    await conversations.reload();
    await upload.init(showError);
  } catch (error) {
    if (error.status !== 401) showError(error);
  }
  await open(conversationFromHash());
}

wire();
start();
