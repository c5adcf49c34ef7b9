"""Request paths that can name no resource: a NUL in a path id.

Ids are made by the server (hex) and document names are file names, which cannot hold NUL, so a path holding one
names nothing on any store; it is answered 404 here, before a route hands it to a store that cannot even compare
it (PostgreSQL text refuses NUL).
"""

from __future__ import annotations

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from anaphora.server.errors import body


class NulPathMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and "\x00" in scope["path"]:
            content = body(
                "not_found_error",
                "no resource has a NUL character in its path",
                "check the id in the path (GET /v1/conversations lists your conversations)",
                code="not_found",
            )
            await JSONResponse(content, status_code=404)(scope, receive, send)
            return
        await self.app(scope, receive, send)
