"""The only place where errors become HTTP: status codes, a uniform JSON body, and no internals leaked.

Every error body is ``{"error": {"type": ..., "message": ..., "param": ..., "code": ..., "hint": ...}}``: OpenAI's
error shape (so OpenAI clients raise the matching exception class, with ``param`` and ``code`` set) plus the hint.
``param`` names the request parameter at fault when one is (else null); ``code`` is a stable word to branch on.
"""

from __future__ import annotations

import logging
import math
import re
import uuid
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from anaphora.errors import (
    AnaphoraError,
    AuthError,
    ConfigurationError,
    ConversationNotFoundError,
    InputError,
    InvalidJSONError,
    ModelUnavailableError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    StoreError,
)
from anaphora.server.json_body import JSON_HINT

log = logging.getLogger("anaphora.server")

# first match wins: subclasses before their bases; (class, status, type, code unless the error names its own)
_STATUS: list[tuple[type[AnaphoraError], int, str, str]] = [
    (PermissionDeniedError, 403, "permission_error", "permission_denied"),
    (AuthError, 401, "authentication_error", "invalid_authentication"),
    (RateLimitError, 429, "rate_limit_error", "rate_limit_exceeded"),
    (NotFoundError, 404, "not_found_error", "not_found"),
    (InvalidJSONError, 400, "invalid_json", "invalid_json"),
    (InputError, 400, "invalid_request_error", "invalid_request"),
    (ModelUnavailableError, 503, "model_unavailable_error", "model_unavailable"),
    (StoreError, 503, "store_unavailable_error", "store_unavailable"),
    (ConfigurationError, 500, "configuration_error", "configuration_error"),
]
_HTTP_TYPES = {
    400: ("invalid_request_error", "invalid_request"),
    401: ("authentication_error", "invalid_authentication"),
    403: ("permission_error", "permission_denied"),
    404: ("not_found_error", "not_found"),
    405: ("invalid_request_error", "method_not_allowed"),
    413: ("request_too_large", "request_too_large"),
    415: ("invalid_request_error", "unsupported_media_type"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
}
# pydantic's error types as OpenAI's parameter error codes; any other refusal of a value is invalid_value
_VALIDATION_CODES = {
    "missing": "missing_required_parameter",
    "extra_forbidden": "unknown_parameter",
    "string_too_long": "string_above_max_length",
}
_HTTP_HINTS = {
    400: "see the request shapes in docs/server.md",
    413: "the limit is the max_request_bytes setting",
    415: "send JSON with Content-Type: application/json",
}
MODEL_RETRY_AFTER_S = 5
STORE_RETRY_AFTER_S = 5  # a store outage: readiness fails meanwhile, and recovery needs no restart


FALLBACK_HINT = "see docs/server.md"


def body(type_: str, message: str, hint: str | None = None, *, code: str, param: str | None = None) -> dict[str, Any]:
    """The error body; every one has a code and a hint (the documented shape), the docs when nothing more specific
    fits."""
    fields = {"type": type_, "message": message, "param": param, "code": code, "hint": hint or FALLBACK_HINT}
    return {"error": {name: None if value is None else _encodable(value) for name, value in fields.items()}}


def _encodable(text: str) -> str:
    """``text`` with any lone surrogate (from a request's JSON key, quoted in a message or as ``param``) written as
    its ``\\udXXX`` escape: an error body must always encode as UTF-8."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def describe(exc: BaseException) -> tuple[int, dict[str, Any], dict[str, str]]:
    """(status, JSON body, headers) for any exception raised while serving a request or streaming a turn."""
    if isinstance(exc, AnaphoraError):
        for cls, status, type_, code in _STATUS:
            if not isinstance(exc, cls):
                continue
            headers: dict[str, str] = {}
            message, hint, param = exc.message, exc.hint, None
            if isinstance(exc, InputError):
                code, param = exc.code or code, exc.param
            if isinstance(exc, ConversationNotFoundError):  # the store's hint is for the library
                hint = "check the id: GET /v1/conversations lists yours"
            elif status == 401:
                headers["WWW-Authenticate"] = 'Bearer realm="anaphora"'
            elif isinstance(exc, RateLimitError):
                headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after_s)))
                code = exc.code or code
            elif isinstance(exc, StoreError):  # the message and hint say which store, and what to check
                log.warning("store unavailable: %s", exc)
                headers["Retry-After"] = str(STORE_RETRY_AFTER_S)
            elif status == 503:
                log.warning("chat model unavailable: %s", exc)
                headers["Retry-After"] = str(MODEL_RETRY_AFTER_S)
                message, hint = "the chat model is unavailable", "try again in a few seconds"
            elif status == 500:
                log.error("configuration error: %s", exc)
            return status, body(type_, message, hint, code=code, param=param), headers
    reference = uuid.uuid4().hex[:12]
    log.error("internal error %s", reference, exc_info=exc)
    message = f"internal server error (reference {reference})"
    return 500, body("server_error", message, "the server log has the details", code="server_error"), {}


def _respond(exc: BaseException) -> JSONResponse:
    status, content, headers = describe(exc)
    return JSONResponse(content, status_code=status, headers=headers)


_TYPE_WORDS = {"str": "a string", "int": "an integer", "float": "a number", "bool": "true or false", "none": "null"}


def _union_member(part: object) -> str | None:
    """Pydantic names the member of a union an error is about in the location (``str``, ``list[TextPart]``,
    ``function-after[_encodable(), str]``): the type it tried, in words; None for a real field name or index."""
    if not isinstance(part, str):
        return None
    if part.startswith("function-") and part.endswith("]"):
        part = part.rsplit(", ", 1)[-1].rstrip("]")
    if part in _TYPE_WORDS:
        return _TYPE_WORDS[part]
    if part.startswith("list[") and part.endswith("]"):
        item = re.sub(r"(?<!^)(?=[A-Z])", " ", part[5:-1]).lower()
        return f"a list of {_TYPE_WORDS.get(item, item + 's').removeprefix('a ').removeprefix('an ')}"
    return part if "[" in part else None


def _field(loc: tuple | list) -> str:
    """``messages[0].content``: the field as the request names it."""
    parts = list(loc[1:] if loc and loc[0] == "body" else loc)
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text or "body"


def _message(error: dict[str, Any]) -> str:
    message = str(error.get("msg", "invalid")).removeprefix("Value error, ").replace(" after validation", "")
    if message == "Field required":
        return "is required"
    return re.sub(r"^(Input|List|String|Dictionary|Object|Tuple) should", "should", message)


def validation_problems(errors: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """Pydantic's errors in the user's terms: (field, problem, code) per field, union members folded into what the
    field may be (``messages[0].content``, ``should be a string or a list of text parts``, ``invalid_type``), never
    pydantic's type names."""
    fields: dict[str, list[tuple[str | None, dict[str, Any]]]] = {}
    for error in errors:
        loc = tuple(error.get("loc", ()))
        members = [_union_member(p) for p in loc]
        path = tuple(p for p, member in zip(loc, members, strict=True) if member is None)
        member = next((m for m in members if m is not None), None)
        fields.setdefault(_field(path), []).append((member, error))
    deeper = {n for n, found in fields.items() if any(m is not None for m, _ in found)}
    problems = []
    for name, found in fields.items():
        if all(m is not None for m, _ in found) and any(d.startswith((f"{name}[", f"{name}.")) for d in deeper):
            continue  # another member of the union matched and failed further in: that is the problem to report
        checked = [e for _, e in found if e.get("type") == "value_error"]  # the right type, refused by a check
        kinds = list(dict.fromkeys(m for m, _ in found if m is not None))
        if checked:
            problem, code = _message(checked[0]), "invalid_value"
        elif len(kinds) > 1:
            problem, code = f"should be {' or '.join(kinds)}", "invalid_type"
        else:
            problem, code = _message(found[0][1]), _validation_code(str(found[0][1].get("type", "")))
        problems.append((name, problem, code))
    return problems


def _validation_code(kind: str) -> str:
    """OpenAI's code for one of pydantic's error types (``string_type``: ``invalid_type``)."""
    if kind in _VALIDATION_CODES:
        return _VALIDATION_CODES[kind]
    return "invalid_type" if kind.endswith("_type") else "invalid_value"


async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = list(exc.errors())
    broken = next((e for e in errors if e.get("type") == "json_invalid"), None)
    if broken is not None:
        detail = (broken.get("ctx") or {}).get("error", "")
        return JSONResponse(
            body(
                "invalid_json",
                f"the request body is not valid JSON: {detail}".rstrip(": "),
                JSON_HINT,
                code="invalid_json",
            ),
            status_code=400,
        )
    if any(tuple(e.get("loc", ())) == ("body",) for e in errors) and "json" not in request.headers.get(
        "content-type", ""
    ):
        return JSONResponse(
            body(
                "invalid_request_error",
                "the request needs a JSON body",
                "send a JSON object with the header Content-Type: application/json",
                code="missing_body",
            ),
            status_code=400,
        )
    found = validation_problems(errors)
    problems = "; ".join(f"{name}: {problem}" for name, problem, _ in found[:5])
    if len(found) > 5:
        problems += f"; and {len(found) - 5} more"
    param, _, code = found[0] if found else ("body", "", "invalid_value")  # the first field at fault, as OpenAI's
    hint = "see the request shapes in docs/server.md"
    return JSONResponse(body("validation_error", problems, hint, code=code, param=param), status_code=422)


# FastAPI's own detail when json.loads fails with something else than a syntax error (bad UTF-8, too deep, a number
# with thousands of digits)
_UNPARSED_BODY = "There was an error parsing the body"


async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    if exc.status_code == 400 and exc.detail == _UNPARSED_BODY:
        return JSONResponse(
            body(
                "invalid_json",
                "the request body is not valid JSON (invalid UTF-8, nested too deeply, or a number too long)",
                JSON_HINT,
                code="invalid_json",
            ),
            status_code=400,
        )
    headers = dict(exc.headers or {})
    if exc.status_code == 404 and exc.detail == "Not Found":
        message = f"no route {request.method} {request.url.path}"
        hint = "check the path: docs/server.md lists the endpoints, and so does GET /openapi.json"
    elif exc.status_code == 405:
        allowed = allowed_methods(request)
        headers["Allow"] = ", ".join(allowed)
        message = f"{request.method} is not allowed on {request.url.path}"
        hint = f"this path accepts {' and '.join(allowed)}"
    else:
        message = str(exc.detail)
        hint = _HTTP_HINTS.get(exc.status_code, FALLBACK_HINT)
    type_, code = _HTTP_TYPES.get(exc.status_code, ("http_error", f"http_{exc.status_code}"))
    return JSONResponse(
        body(type_, message, hint, code=code),
        status_code=exc.status_code,
        headers=headers,
    )


def allowed_methods(request: Request) -> list[str]:
    """Every method some route answers on this path (Starlette's 405 names only the first route's)."""
    probe = {**request.scope, "method": "\0"}  # no method matches: a route on this path answers PARTIAL
    return sorted(
        {m for route in _leaf_routes(request.app.router.routes) if route.matches(probe)[0] is not Match.NONE
         for m in route.methods}
    )  # fmt: skip


def _leaf_routes(routes) -> list[Any]:
    """The routes with methods, looking inside included routers (FastAPI 0.165 wraps them)."""
    found: list[Any] = []
    for route in routes:
        inner = getattr(route, "original_router", None) or getattr(route, "router", None)
        if getattr(route, "methods", None):
            found.append(route)
        elif inner is not None and inner is not route:
            found.extend(_leaf_routes(inner.routes))
    return found


async def _anaphora(request: Request, exc: AnaphoraError) -> JSONResponse:
    return _respond(exc)


class CatchAllMiddleware:
    """Anything no handler took becomes a 500 with a reference, logged once with its traceback (Starlette's own
    last resort would log it again, without the reference, and re-raise it to the server)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watch(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except Exception as exc:
            if started:  # too late for a status: let the server close the connection
                raise
            await _respond(exc)(scope, receive, send)


def install(app: FastAPI) -> None:
    """Exception handlers (the catch-all middleware, innermost, is in the app's one middleware list)."""
    app.add_exception_handler(RequestValidationError, _validation)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, _http)  # type: ignore[arg-type]
    app.add_exception_handler(AnaphoraError, _anaphora)  # type: ignore[arg-type]
