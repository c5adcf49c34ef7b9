"""The web chat page: static files shipped in the package, served at ``/`` with headers that keep untrusted text
inert (a Content-Security-Policy without inline script, no framing, no MIME sniffing).

The page talks to the same API as every other client, with relative same-origin URLs, so it needs no route of
its own beyond the files. ``web_ui = false`` leaves the service API-only.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse
from starlette.staticfiles import StaticFiles
from starlette.types import Message, Scope

from anaphora.server.asgi import ExchangeObserver
from anaphora.settings import ServerSettings

STATIC = Path(__file__).parent / "static"
MOUNT = "/ui"
# Everything the page loads or calls is its own origin; no inline script or style, no plugins, no framing.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
PAGE_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",  # frame-ancestors for browsers that predate it
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",  # revalidate, so an upgrade is seen at once
}

router = APIRouter(include_in_schema=False)


@router.get("/")
async def index() -> FileResponse:
    return FileResponse(STATIC / "index.html", media_type="text/html; charset=utf-8", headers=PAGE_HEADERS)


class PageFiles(StaticFiles):
    """The page's scripts and styles, with the page's headers."""

    def file_response(self, *args, **kwargs):
        response = super().file_response(*args, **kwargs)
        response.headers.update(PAGE_HEADERS)
        return response


class NoSniffMiddleware(ExchangeObserver):
    """``X-Content-Type-Options: nosniff`` on every response, API included: a JSON body holding an untrusted
    answer is never run as a script or rendered as HTML."""

    def response_started(self, scope: Scope, message: Message, context: None) -> None:
        headers = list(message.get("headers", []))
        if not any(name.lower() == b"x-content-type-options" for name, _ in headers):
            headers.append((b"x-content-type-options", b"nosniff"))
        message["headers"] = headers


def install(app: FastAPI, settings: ServerSettings, *, widget: bool = False) -> None:
    """Add the page (unless ``web_ui`` is off) to ``app`` (the nosniff header is in the app's middleware list); its
    files also when the ``widget`` (public mode) needs them."""
    if settings.web_ui:
        app.include_router(router)
    if settings.web_ui or widget:
        app.mount(MOUNT, PageFiles(directory=STATIC), name="ui")
