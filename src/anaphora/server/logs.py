"""Request ids and structured logs.

:class:`RequestIdMiddleware` gives every HTTP request an id: the client's ``X-Request-ID`` when it is a sane token,
else a new one. The id is echoed in the response's ``X-Request-ID`` header and held in a context variable for the
whole request, including the tasks and threads the request starts (they copy the context), so every log record
made meanwhile can carry it. Each request ends with one ``anaphora.server.access`` record (method, path, status,
milliseconds).

:func:`configure_logging` (called by ``anaphora serve`` only, never at import) writes every record as one JSON
line: ``{"ts", "level", "logger", "message", "request_id", ...extra fields, "exc_info"}``.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import uuid
from contextvars import ContextVar, Token
from datetime import UTC, datetime
from typing import Any, TextIO

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import Message, Scope

from anaphora.server.asgi import ExchangeObserver

REQUEST_ID_HEADER = "X-Request-ID"
request_id: ContextVar[str | None] = ContextVar("anaphora_request_id", default=None)
access_log = logging.getLogger("anaphora.server.access")
_SANE = re.compile(r"[A-Za-z0-9._:-]{1,128}")
# LogRecord's own attributes, and uvicorn's ANSI-coloured copy of the message: not extra fields
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "request_id",
    "color_message",
}


class RequestIdMiddleware(ExchangeObserver):
    """Assigns or propagates ``X-Request-ID`` and logs one access record per request (add it outermost)."""

    def begin(self, scope: Scope) -> tuple[str, Token]:
        given = Headers(scope=scope).get(REQUEST_ID_HEADER.lower(), "")
        rid = given if _SANE.fullmatch(given) else uuid.uuid4().hex
        return rid, request_id.set(rid)

    def response_started(self, scope: Scope, message: Message, context: tuple[str, Token]) -> None:
        MutableHeaders(scope=message)[REQUEST_ID_HEADER] = context[0]

    def finished(self, scope: Scope, status: int, seconds: float, context: tuple[str, Token]) -> None:
        ms = round(seconds * 1000, 2)
        method, path = scope.get("method", ""), scope.get("path", "")
        access_log.info(
            "%s %s %d %.1f ms",
            method,
            path,
            status,
            ms,
            extra={"method": method, "path": path, "status": status, "ms": ms},
        )
        request_id.reset(context[1])


class RequestIdFilter(logging.Filter):
    """Stamps ``record.request_id`` with the current request's id (None outside a request)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            record.request_id = request_id.get()
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", None) or request_id.get(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry.setdefault(key, value)
        if record.exc_info:
            entry["exc_info"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def configure_logging(level: int | str = logging.INFO, stream: TextIO | None = None) -> logging.Handler:
    """Send every log record to ``stream`` (stderr) as JSON lines with the request id; replaces the root handlers."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.addFilter(RequestIdFilter())
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):  # let uvicorn's records reach the JSON handler
        logging.getLogger(name).handlers.clear()
        logging.getLogger(name).propagate = True
    return handler
