"""The OpenAPI document declares what the server really answers: every error status an operation can give, in the
service's error shape, the SSE media type of the streaming routes and ``/metrics`` as Prometheus text.

FastAPI documents only the success response and its own 422 shape; :func:`install` completes the document once,
when it is first generated, by rules that follow the middleware and handlers (errors.py, limits.py, auth.py,
dev_guard.py): which operations can be refused, too large, not found, rate limited or unavailable.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

ERROR_SCHEMA = "ErrorBody"
TURN_OPERATIONS = {
    ("post", "/v1/chat/completions"),
    ("post", "/v1/conversations/{conversation_id}/messages"),
    ("post", "/v1/responses"),
}
BODY_REFERENCES = {("post", "/v1/responses")}  # name a resource in the body (previous_response_id, conversation)
VISITOR_SESSION = ("post", "/v1/visitor/session")  # 404 with public mode off, 429 past the site's limit
QUERY_MEANINGS = {("get", "/v1/admin/report")}  # query values the schema allows and the service may refuse (a time)
_DESCRIPTIONS = {
    "400": "Bad request: a body that is not JSON (`invalid_json`), or input the service refuses",
    "401": "Missing, malformed, expired or wrongly signed token (auth `jwt`)",
    "403": "Not allowed: an admin-only route, development mode refusing a foreign Host or a cross-site request, "
    "a route closed to public mode's visitors, or an Origin not in public_origins",
    "404": "No such resource for this user",
    "413": "The request body is larger than max_request_bytes",
    "422": "The body or a parameter does not match the request schema (`validation_error`)",
    "429": "Too many turns in flight for this user, or a public-mode limit (per visitor, per site, daily cap); "
    "Retry-After says when to try again",
    "500": "Internal error (with a reference to the server log) or a configuration error",
    "503": "The chat model or the store is unavailable; Retry-After says when to try again",
}
_RETRY_AFTER = {"Retry-After": {"description": "seconds to wait", "required": True, "schema": {"type": "string"}}}
_SERVER_TIMING = {
    "Server-Timing": {
        "description": "`engine;dur=<ms>`: the engine's own time for the turn (JSON replies; not on a stream)",
        "required": False,
        "schema": {"type": "string"},
    }
}
_ERROR_BODY = {
    "type": "object",
    "title": ERROR_SCHEMA,
    "properties": {
        "error": {
            "type": "object",
            "properties": {
                "type": {"type": "string"},
                "message": {"type": "string"},
                "param": {
                    "type": ["string", "null"],
                    "description": "the request parameter at fault (`input[1].role`, `tools`), or null",
                },
                "code": {"type": "string", "description": "a stable machine-readable code (`unsupported_parameter`)"},
                "hint": {"type": "string"},
            },
            "required": ["type", "message", "param", "code", "hint"],
        }
    },
    "required": ["error"],
}


# the chat stream (sse.py), described event by event as OpenAPI 3.2 does for text/event-stream (a whole-stream
# pattern fails the per-event checks): one `data:` line each, a JSON object or the final `[DONE]`
SSE_SCHEMA = {
    "type": "object",
    "properties": {"data": {"type": "string", "pattern": "^(\\{.*\\}|\\[DONE\\])$"}},
    "required": ["data"],
    "description": "Server-sent events, one `data:` line each: `chat.completion.chunk` objects (the first with "
    "`delta.role`, then `delta.content` pieces, one with `finish_reason`, then one with `choices: []`, `usage` "
    'and `anaphora`), or `{"error": {...}}` when the turn fails after the stream began; always `data: [DONE]` last.',
}

# the Responses API's stream (responses.py), described event by event as OpenAPI 3.2 does for text/event-stream:
# each a named event whose data is one JSON object with its type and sequence number; no [DONE]
RESPONSES_SSE_SCHEMA = {
    "type": "object",
    "properties": {
        "event": {"type": "string", "pattern": "^(response\\.[a-z_.]+|error)$"},
        "data": {
            "type": "string",
            "contentMediaType": "application/json",
            "contentSchema": {"type": "object", "required": ["type", "sequence_number"]},
        },
    },
    "required": ["event", "data"],
    "description": "Responses API events, each an `event: TYPE` line and a `data:` line with `type` and "
    "`sequence_number`: `response.created`, `response.in_progress`, `response.output_item.added`, "
    "`response.content_part.added`, `response.output_text.delta` pieces, `response.output_text.done`, "
    "`response.content_part.done`, `response.output_item.done`, `response.completed` (usage, annotations, "
    "`anaphora`); when the turn fails after the stream began, `response.failed` then `error`. No `[DONE]`.",
}
_STREAM_SCHEMAS = {"/v1/responses": RESPONSES_SSE_SCHEMA}


def error_statuses(method: str, path: str, operation: dict[str, Any]) -> set[str]:
    """The error statuses one operation can answer with."""
    statuses = {"403", "500"}  # development mode's guard applies to every route; anything can fail internally
    parameters = operation.get("parameters", [])
    if path.startswith("/v1/"):
        statuses |= {"401", "503"}  # every /v1 route authenticates and reaches the store or the model
    if "requestBody" in operation:
        statuses |= {"400", "413", "422"}
    if (method, path) in QUERY_MEANINGS:
        statuses.add("400")
    if parameters:
        statuses.add("422")
    if any(p.get("in") == "query" for p in parameters):
        statuses.add("400")  # a well-formed value that names nothing (an unknown item id as `after`)
    if any(p.get("in") == "path" for p in parameters) or (method, path) in BODY_REFERENCES:
        statuses.add("404")
    if (method, path) in TURN_OPERATIONS:
        statuses.add("429")
    if (method, path) == VISITOR_SESSION:
        statuses |= {"404", "429"}
    if path == "/readyz":
        statuses.add("503")
    return statuses


def complete(document: dict[str, Any]) -> dict[str, Any]:
    """Add the error responses and media types to FastAPI's document, in place; returns it."""
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    schemas[ERROR_SCHEMA] = _ERROR_BODY
    for unused in ("HTTPValidationError", "ValidationError"):  # FastAPI's own 422 shape, which we never send
        schemas.pop(unused, None)
    reference = {"application/json": {"schema": {"$ref": f"#/components/schemas/{ERROR_SCHEMA}"}}}
    for path, item in document.get("paths", {}).items():
        for method, operation in item.items():
            responses = operation.setdefault("responses", {})
            for status in sorted(error_statuses(method, path, operation)):
                response: dict[str, Any] = {"description": _DESCRIPTIONS[status], "content": reference}
                if path == "/readyz" and status == "503":  # the readiness body, with the failing check
                    response = {"description": "not ready", "content": responses["200"]["content"]}
                if status == "429" or (status == "503" and path.startswith("/v1/")):
                    response["headers"] = _RETRY_AFTER
                responses[status] = response
            if (method, path) in TURN_OPERATIONS:
                stream = _STREAM_SCHEMAS.get(path, SSE_SCHEMA)
                responses["200"].setdefault("content", {})["text/event-stream"] = {"schema": stream}
                responses["200"]["headers"] = _SERVER_TIMING
    metrics = document.get("paths", {}).get("/metrics", {}).get("get")
    if metrics is not None:
        metrics["responses"]["200"]["content"] = {"text/plain": {"schema": {"type": "string"}}}
    return document


def install(app: FastAPI) -> None:
    """Make ``app.openapi()`` return the completed document (computed once, like FastAPI's own)."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = complete(generate())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
