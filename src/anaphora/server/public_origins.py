"""Public mode's origin allow-list for the API: which web pages may call it from a browser.

A browser names the page that makes a request in its ``Origin`` header, and a page cannot forge it. So, in public
mode, a request to ``/v1/...`` that carries an ``Origin``:

- from the service's own origin (its page, the widget's frame) passes, as before: the ``Origin`` names the
  ``Host`` the request was sent to, or the browser says ``Sec-Fetch-Site: same-origin`` (which a proxy that
  rewrites ``Host`` leaves intact);
- from a site in ``public_origins`` passes, with the CORS headers that let that page read the answer (its
  preflight is answered here);
- from any other origin is refused (HTTP 403, with the reason), preflight included.

Requests without ``Origin`` (curl, SDKs, the CLI) pass: they are not a visitor's browser, and the limits and
credentials still apply to them. The widget's frame is guarded by ``frame-ancestors`` instead (``widget.py``).
"""

from __future__ import annotations

from collections.abc import Iterable

from fastapi.responses import JSONResponse, Response
from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from anaphora.server.errors import body
from anaphora.server.logs import REQUEST_ID_HEADER
from anaphora.server.sessions import SESSION_HEADER

API_PREFIX = "/v1/"
ALLOW_METHODS = "GET, POST, PATCH, DELETE"
ALLOW_HEADERS = f"Authorization, Content-Type, {REQUEST_ID_HEADER}"
EXPOSE_HEADERS = f"Retry-After, {REQUEST_ID_HEADER}, {SESSION_HEADER}"
PREFLIGHT_MAX_AGE_S = 600


def cors_headers(origin: str) -> dict[str, str]:
    return {
        "Access-Control-Allow-Origin": origin,
        "Access-Control-Expose-Headers": EXPOSE_HEADERS,
        "Vary": "Origin",
    }


def own_origin(origin: str, host: str | None) -> bool:
    """Whether ``origin`` is the service's own (the ``Host`` the request was sent to)."""
    scheme, _, netloc = origin.partition("://")
    return scheme in ("http", "https") and host is not None and netloc == host.strip().lower()


class PublicOriginMiddleware:
    """ASGI middleware of public mode: the ``Origin`` check and CORS for the allowed sites."""

    def __init__(self, app: ASGIApp, *, allowed: Iterable[str]) -> None:
        self.app = app
        self.allowed = frozenset(allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(API_PREFIX):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        origin = (headers.get("origin") or "").strip().lower()
        same_origin = headers.get("sec-fetch-site", "").strip().lower() == "same-origin"  # behind a proxy, too
        if not origin or same_origin or own_origin(origin, headers.get("host")):
            await self.app(scope, receive, send)
            return
        if origin not in self.allowed:
            refused = body(
                "permission_error",
                f"the web origin {origin!r} may not use this assistant",
                "the operator adds the site to public_origins (scheme://host[:port])",
                code="origin_not_allowed",
            )
            await JSONResponse(refused, status_code=403)(scope, receive, send)
            return
        if scope["method"] == "OPTIONS" and "access-control-request-method" in headers:
            preflight = cors_headers(origin) | {
                "Access-Control-Allow-Methods": ALLOW_METHODS,
                "Access-Control-Allow-Headers": ALLOW_HEADERS,
                "Access-Control-Max-Age": str(PREFLIGHT_MAX_AGE_S),
            }
            await Response(status_code=204, headers=preflight)(scope, receive, send)
            return

        async def with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                response_headers = MutableHeaders(scope=message)
                for name, value in cors_headers(origin).items():
                    response_headers[name] = value
            await send(message)

        await self.app(scope, receive, with_cors)
