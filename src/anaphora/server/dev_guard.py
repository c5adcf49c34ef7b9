"""Development mode (auth 'none') answers only its own machine, and only its own pages.

Without tokens, any web page the developer opens could otherwise use the service: a cross-site form POST needs no
CORS preflight (it could plant a document that the next answer quotes), and a DNS-rebinding page reaches
127.0.0.1 under its own host name. So, in development mode only:

- the ``Host`` header must name a loopback host (``localhost``, ``127.x.x.x``, ``::1``) or one of the
  ``dev_allowed_hosts`` setting; a missing ``Host`` (not a browser) passes;
- a state-changing request (any method but GET, HEAD, OPTIONS) is refused when the browser says it is cross-site:
  ``Sec-Fetch-Site`` other than ``same-origin`` or ``none``, or an ``Origin`` that is not the ``Host`` it was sent
  to (``Origin: null`` included). Requests without these headers (curl, SDKs, the CLI) pass.

The service's own web page, loaded from ``http://127.0.0.1:PORT/`` or ``http://localhost:PORT/``, sends
``Sec-Fetch-Site: same-origin`` and an ``Origin`` equal to its ``Host``, and passes.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit

from fastapi.responses import JSONResponse
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from anaphora.server.errors import body

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
SAME_SITE_FETCHES = frozenset({"same-origin", "none"})  # "none": typed in the address bar, a bookmark


def host_name(host: str) -> str:
    """``example.org`` from ``Example.org:8000``, ``::1`` from ``[::1]:8000``."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    if host.count(":") == 1:
        return host.partition(":")[0]
    return host.rstrip(".")


def is_loopback_name(name: str) -> bool:
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class DevModeGuard:
    """ASGI middleware for auth 'none': a foreign Host or a cross-site state-changing request gets 403."""

    def __init__(self, app: ASGIApp, *, allowed_hosts: Iterable[str] = ()) -> None:
        self.app = app
        self.allowed = {host_name(h) for h in allowed_hosts}

    def refusal(self, method: str, headers: Headers) -> tuple[str, str] | None:
        """(message, hint) when the request must be refused, else None."""
        host = headers.get("host")
        if host is not None and not (is_loopback_name(name := host_name(host)) or name in self.allowed):
            return (
                f"development mode (auth 'none') answers loopback hosts only, not {name!r}",
                "open the service at http://127.0.0.1:PORT, add the name to dev_allowed_hosts, "
                "or use JWT auth (ANAPHORA_JWT_SECRET)",
            )
        if method in SAFE_METHODS:
            return None
        fetch_site = headers.get("sec-fetch-site")
        if fetch_site is not None and fetch_site.strip().lower() not in SAME_SITE_FETCHES:
            return (
                f"development mode (auth 'none') refuses {fetch_site} {method} requests from web pages",
                "send the request from the service's own page, or from a client that is not a browser",
            )
        origin = headers.get("origin")
        if origin is not None and not _same_origin(origin, host):
            return (
                f"development mode (auth 'none') refuses {method} requests from the web origin {origin!r}",
                "send the request from the service's own page, or from a client that is not a browser",
            )
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (problem := self.refusal(scope["method"], Headers(scope=scope))):
            message, hint = problem
            refused = body("permission_error", message, hint, code="permission_denied")
            await JSONResponse(refused, status_code=403)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _same_origin(origin: str, host: str | None) -> bool:
    parts = urlsplit(origin.strip().lower())
    return parts.scheme in ("http", "https") and host is not None and parts.netloc == host.strip().lower()
