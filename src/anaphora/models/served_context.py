"""The context length an OpenAI-compatible server reports for a model, asked once when the model is loaded.

Servers report it in different places, and some not at all:

- vLLM: ``GET /v1/models``, the model's ``max_model_len`` (what the server was started with);
- OpenRouter and other hosted routers: ``context_length`` on the model's entry;
- llama.cpp's server (``llama-server``): ``GET /props``, ``default_generation_settings.n_ctx`` (the context of one
  slot, which is what one request can use), and ``meta.n_ctx_train`` on ``/v1/models`` (the length it was trained
  for: used only when ``/props`` says nothing);
- OpenAI, Ollama's ``/v1``, LM Studio's ``/v1`` and llama-cpp-python's server report nothing: there the
  ``context_window`` setting is the model's context.

A server that is down, slow or answers something else is not an error here: the answer is then "not reported".
"""

from __future__ import annotations

import logging
from typing import Any

import httpx

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 3.0


def served_context_tokens(
    base_url: str,
    model: str,
    *,
    api_key: str = "",
    timeout_s: float = PROBE_TIMEOUT_S,
    transport: httpx.BaseTransport | None = None,
) -> int | None:
    """The context length the server at ``base_url`` (ending in ``/v1``) reports for ``model``, or None."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    base_url = base_url.rstrip("/")
    root = base_url.removesuffix("/v1")
    with httpx.Client(headers=headers, timeout=timeout_s, transport=transport) as client:
        listing = get_json(client, f"{base_url}/models")
        if listing is None:  # down or unreachable: no second wait
            log.info("the chat endpoint %s did not answer; its context is not known", base_url)
            return None
        entry = model_entry(listing, model)
        found = positive(entry.get("max_model_len")) or positive(entry.get("context_length"))
        if found is None:
            props = get_json(client, f"{root}/props") or {}
            settings = props.get("default_generation_settings")
            found = positive(settings.get("n_ctx") if isinstance(settings, dict) else None) or positive(
                props.get("n_ctx")
            )
        if found is None:
            meta = entry.get("meta")
            found = positive(meta.get("n_ctx_train") if isinstance(meta, dict) else None)
    log.info("the chat endpoint %s reports a context of %s tokens for %s", base_url, found or "no", model)
    return found


def get_json(client: httpx.Client, url: str) -> dict[str, Any] | None:
    """The JSON object at ``url``; ``{}`` for any other answer (an error status, HTML); None for no answer."""
    try:
        response = client.get(url)
    except httpx.HTTPError:
        return None
    try:
        body = response.json() if response.status_code == 200 else {}
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def model_entry(listing: dict[str, Any], model: str) -> dict[str, Any]:
    """The entry of ``model`` in a ``/v1/models`` listing; a server that lists one model serves it under any
    name (llama.cpp's server and llama-cpp-python's answer every model name with the model they loaded)."""
    entries = [e for e in listing.get("data") or [] if isinstance(e, dict)]
    named = [e for e in entries if e.get("id") == model]
    if named:
        return named[0]
    return entries[0] if len(entries) == 1 else {}


def positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
