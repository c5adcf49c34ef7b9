"""One way to watch an HTTP exchange from ASGI middleware: the response's status (and headers, to add some) and
the time it took, however the response ends."""

from __future__ import annotations

import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class ExchangeObserver:
    """Base of the middlewares that observe each HTTP request. Subclasses override :meth:`begin` (before the app
    runs; its value is handed to the other hooks), :meth:`response_started` (may edit the response head) and
    :meth:`finished` (always called, with status 500 if the app never started a response)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    def begin(self, scope: Scope) -> Any:
        return None

    def response_started(self, scope: Scope, message: Message, context: Any) -> None:
        return None

    def finished(self, scope: Scope, status: int, seconds: float, context: Any) -> None:
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        context = self.begin(scope)
        started, status = time.perf_counter(), 500

        async def watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                self.response_started(scope, message, context)
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            self.finished(scope, status, time.perf_counter() - started, context)


class HeadAsGetMiddleware:
    """HEAD wherever GET works (RFC 9110 §9.3.2): FastAPI's routes declare GET alone, so a HEAD is run as that GET
    and only its body is dropped (status and headers, Content-Length included, are the GET's)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def headless(message: Message) -> None:
            if message["type"] == "http.response.body":
                if message.get("more_body", False):
                    return
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, headless)
