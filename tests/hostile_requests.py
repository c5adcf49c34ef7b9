"""Hostile text at the HTTP edge (issue 51), as checks run against a live server on any store (no tests here): lone
surrogates in JSON object keys and in a token's ``sub``, NUL in path ids and in ``sub``. Each check returns the
statuses it saw, so a test can assert on them and count the 5xx."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx

from tests.conftest import ROOT
from tests.server_harness import Running, sse_events, token

SURROGATE = "\ud800"
NUL = "\x00"


# the one /v1 operation that takes no token: it issues a visitor's (public mode; 404 when public mode is off)
UNAUTHENTICATED = {"/v1/visitor/session"}


def operations() -> Iterator[tuple[str, str]]:
    """(method, path template) of every documented /v1 operation that authenticates its caller."""
    spec = json.loads((ROOT / "docs" / "openapi.json").read_text(encoding="utf-8"))
    for path, methods in spec["paths"].items():
        if path.startswith("/v1/") and path not in UNAUTHENTICATED:
            for method in methods:
                yield method.upper(), path


def with_ids(template: str, value: str) -> str:
    """The path with every ``{id}`` replaced by ``value``, a NUL percent-encoded (%00), as a client sends it."""
    value = value.replace(NUL, "%00")
    return "/".join(value if part.startswith("{") else part for part in template.split("/"))


def post_json(http: httpx.Client, path: str, body: Any, method: str = "POST") -> httpx.Response:
    """``body`` as JSON with every non-ASCII character escaped (so a lone surrogate travels as ``\\ud800``, the
    only way JSON can carry one)."""
    content = json.dumps(body).encode("ascii")
    return http.request(method, path, content=content, headers={"Content-Type": "application/json"})


def request(http: httpx.Client, method: str, path: str) -> httpx.Response:
    if method in ("POST", "PATCH"):
        return post_json(http, path, {}, method)
    return http.request(method, path)


def subjects_refused(running: Running) -> dict[str, list[int]]:
    """A signed token whose ``sub`` holds a lone surrogate or a NUL, on every /v1 route: the statuses."""
    seen: dict[str, list[int]] = {}
    for name, sub in (("surrogate", f"alice{SURROGATE}"), ("nul", f"alice{NUL}bob")):
        headers = {"Authorization": f"Bearer {token(sub)}"}
        with httpx.Client(base_url=running.url, headers=headers, timeout=30) as http:
            seen[name] = [request(http, m, with_ids(p, "abc123")).status_code for m, p in operations()]
    return seen


def nul_ids_not_found(running: Running) -> list[tuple[str, str, int]]:
    """Every /v1 route with a path id, the id holding a NUL, as a signed-in user: (method, path, status)."""
    seen = []
    with running.client("alice") as http:
        for method, template in operations():
            if "{" in template:
                response = request(http, method, with_ids(template, f"conv{NUL}x"))
                seen.append((method, template, response.status_code))
    return seen


def stored_conversations(running: Running, user: str = "alice") -> int:
    with running.client(user) as http:
        return len(http.get("/v1/conversations").json()["data"])


def surrogate_keys_refused(running: Running) -> list[tuple[str, int]]:
    """A lone surrogate in a JSON object key of ``metadata`` (and among the top-level keys), on the routes that take
    one, streamed too: (what was sent, status). Nothing may be stored by any of them."""
    bad = {f"key{SURROGATE}": "value"}
    sent = [
        ("responses metadata", "/v1/responses", {"input": "How do I install Kestrel?", "metadata": bad}),
        ("responses metadata, streamed", "/v1/responses", {"input": "Kestrel?", "metadata": bad, "stream": True}),
        ("responses unknown key", "/v1/responses", {"input": "How do I install Kestrel?", SURROGATE: 1}),
        ("conversation metadata", "/v1/conversations", {"metadata": bad}),
        ("chat unknown key", "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], SURROGATE: 1}),
    ]
    seen = []
    with running.client("alice") as http:
        for what, path, body in sent:
            response = post_json(http, path, body)
            if response.headers.get("content-type", "").startswith("text/event-stream"):
                events = sse_events(response)
                seen.append((what, 500 if any("error" in str(e) for e in events) else response.status_code))
            else:
                response.json()  # a body that encodes and parses, whatever the status
                seen.append((what, response.status_code))
    return seen
