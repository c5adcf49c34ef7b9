// The API client: same-origin relative URLs only, the token from session storage, errors as the API's
// {error: {message, hint}}, and streamed turns read from server-sent events.

const TOKEN_KEY = "anaphora.token";

export class ApiError extends Error {
  constructor(status, message, hint = "", type = "") {
    super(message);
    this.status = status;
    this.hint = hint;
    this.type = type;
  }
}

export const token = {
  key: TOKEN_KEY, // the widget keeps its visitor session under its own key
  get() { return sessionStorage.getItem(this.key) || ""; },
  set(value) { sessionStorage.setItem(this.key, value); },
  clear() { sessionStorage.removeItem(this.key); },
};

let unauthorized = () => {};
/** Called with the ApiError of any 401: the session is over, back to sign-in. */
export function onUnauthorized(handler) {
  unauthorized = handler;
}

function headers(extra = {}) {
  const all = { Accept: "application/json", ...extra };
  const value = token.get();
  if (value) all.Authorization = `Bearer ${value}`;
  return all;
}

async function failure(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    // not JSON: a proxy's page; keep the status line
  }
  const error = (body && body.error) || {};
  const message = error.message || `${response.status} ${response.statusText || "error"}`;
  const failed = new ApiError(response.status, message, error.hint || "", error.type || "");
  if (response.status === 401) unauthorized(failed);
  return failed;
}

async function send(path, init) {
  try {
    return await fetch(path, { credentials: "same-origin", ...init });
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new ApiError(0, "the server cannot be reached", "check that `anaphora serve` is running", "network");
  }
}

export async function request(method, path, body) {
  const init = { method, headers: headers() };
  if (body instanceof FormData) init.body = body;
  else if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["Content-Type"] = "application/json";
  }
  const response = await send(path, init);
  if (!response.ok) throw await failure(response);
  return response.json();
}

/** GET `path` as a raw Response (a download), the same errors as request(). */
export async function fetchRaw(path) {
  const response = await send(path, { method: "GET", headers: headers() });
  if (!response.ok) throw await failure(response);
  return response;
}

/** POST a question with stream: true and yield each SSE event's JSON; an error event is thrown. */
export async function* stream(path, body, signal) {
  const init = {
    method: "POST",
    headers: headers({ "Content-Type": "application/json", Accept: "text/event-stream" }),
    body: JSON.stringify({ ...body, stream: true }),
    signal,
  };
  const response = await send(path, init);
  if (!response.ok) throw await failure(response);
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const data = block
        .split("\n")
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).trimStart())
        .join("\n");
      if (!data) continue;
      if (data === "[DONE]") return;
      const event = JSON.parse(data);
      if (event.error) throw new ApiError(200, event.error.message, event.error.hint || "", event.error.type || "");
      yield event;
    }
  }
}
