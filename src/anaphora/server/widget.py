"""The embeddable widget (public mode): ``/widget.js``, the loader a docs page includes with one script tag, and
``/widget``, the chat panel it shows in an iframe.

Why an iframe (and not only a shadow root): the panel holds the visitor's token and renders untrusted text
(answers, passages), so it runs on the assistant's own origin, under the assistant's own strict CSP, where neither
the host page's scripts nor its styles reach it, and where nothing it renders can touch the host page; the
browser's ``frame-ancestors`` check then keeps it off every site not in ``public_origins``. The loader's launcher
button sits in a closed shadow root whose ``:host`` resets every property, so no style crosses either way there.
"""

from __future__ import annotations

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse

from anaphora.server.web import STATIC
from anaphora.settings import PublicSettings

WIDGET = STATIC / "widget"
LOADER_HEADERS = {
    "Cache-Control": "no-cache",  # revalidate, so an upgrade reaches every docs page at once
    "Cross-Origin-Resource-Policy": "cross-origin",  # a script for other sites' pages
}


def frame_csp(origins: list[str]) -> str:
    """The panel's policy: everything from this origin, no inline script or style, framed only by allowed sites."""
    ancestors = " ".join(["'self'", *origins])
    return (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        f"base-uri 'none'; form-action 'none'; frame-ancestors {ancestors}"
    )


def router_for(settings: PublicSettings) -> APIRouter:
    router = APIRouter(include_in_schema=False)
    frame_headers = {
        "Content-Security-Policy": frame_csp(settings.public_origins),
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-cache",
    }

    @router.get("/widget.js")
    async def loader() -> FileResponse:
        return FileResponse(WIDGET / "loader.js", media_type="text/javascript; charset=utf-8", headers=LOADER_HEADERS)

    @router.get("/widget")
    async def frame() -> FileResponse:
        return FileResponse(WIDGET / "frame.html", media_type="text/html; charset=utf-8", headers=frame_headers)

    return router


def install(app: FastAPI, settings: PublicSettings) -> None:
    """Add the widget's loader and panel in public mode (their scripts and styles are the page's files, /ui)."""
    if settings.public_mode:
        app.include_router(router_for(settings))
