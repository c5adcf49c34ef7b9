// The conversation list: newest activity first, a page at a time, with rename and delete in place (no browser
// dialogs: a second click confirms a delete).

import * as api from "./api.js";
import { $, el, show } from "./dom.js";

const PAGE = 20;
let loaded = [];
let hasMore = false;
let handlers = { open: () => {}, error: () => {}, deleted: () => {} };
let current = null;

export function init(callbacks) {
  handlers = { ...handlers, ...callbacks };
  $("more-conversations").addEventListener("click", () => more().catch(handlers.error));
}

export function select(id) {
  current = id;
  for (const item of $("conversations").children) {
    const active = item.dataset.id === id;
    item.classList.toggle("active", active);
    item.querySelector(".open")?.setAttribute("aria-current", active ? "true" : "false");
  }
}

export async function reload() {
  loaded = [];
  await more();
}

async function more() {
  const page = await api.request("GET", `v1/conversations?limit=${PAGE}&offset=${loaded.length}`);
  loaded = loaded.concat(page.data);
  hasMore = page.has_more;
  draw();
}

/** Put a conversation (new or just used) first, as the server's order would. */
export function touch(conversation) {
  loaded = [conversation, ...loaded.filter((c) => c.id !== conversation.id)];
  draw();
}

export function titleOf(id) {
  return loaded.find((c) => c.id === id)?.title;
}

function draw() {
  const list = $("conversations");
  list.replaceChildren(...loaded.map(item));
  show($("more-conversations"), hasMore);
  select(current);
}

function item(conversation) {
  const title = conversation.title || "Untitled";
  const li = el("li", { class: "conversation" });
  li.dataset.id = conversation.id;
  const open = el("button", { type: "button", class: "open", title, text: title, onclick: () => handlers.open(conversation.id) });
  const rename = el("button", { type: "button", class: "icon", "aria-label": `Rename ${title}`, title: "Rename", text: "✎",
    onclick: () => startRename(li, conversation) });
  const remove = el("button", { type: "button", class: "icon danger", "aria-label": `Delete ${title}`, title: "Delete", text: "✕" });
  remove.addEventListener("click", () => {
    if (!remove.classList.contains("confirm")) {
      remove.classList.add("confirm");
      remove.textContent = "Delete?";
      setTimeout(() => {
        remove.classList.remove("confirm");
        remove.textContent = "✕";
      }, 4000);
      return;
    }
    api.request("DELETE", `v1/conversations/${encodeURIComponent(conversation.id)}`)
      .then(() => {
        loaded = loaded.filter((c) => c.id !== conversation.id);
        draw();
        handlers.deleted(conversation.id);
      })
      .catch(handlers.error);
  });
  li.append(open, rename, remove);
  return li;
}

function startRename(li, conversation) {
  const input = el("input", { type: "text", class: "rename", maxlength: 200, "aria-label": "New title", value: conversation.title });
  const finish = async (save) => {
    if (!input.isConnected) return;
    const title = input.value.trim();
    if (save && title && title !== conversation.title) {
      try {
        const updated = await api.request("PATCH", `v1/conversations/${encodeURIComponent(conversation.id)}`, { title });
        loaded = loaded.map((c) => (c.id === updated.id ? updated : c));
        handlers.renamed?.(updated);
      } catch (error) {
        handlers.error(error);
      }
    }
    draw();
  };
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter") {
      event.preventDefault();
      finish(true);
    } else if (event.key === "Escape") finish(false);
  });
  input.addEventListener("blur", () => finish(true));
  li.replaceChildren(input);
  input.focus();
  input.select();
}
