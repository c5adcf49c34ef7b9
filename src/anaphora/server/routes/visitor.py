"""``POST /v1/visitor/session``: public mode's anonymous visitor sessions (the widget asks for one on load).

A visitor needs no token from the host site: this route signs a short-lived session for a site in
``public_origins`` (or the service's own origin). Sent again with a valid visitor token, it renews that session
(same visitor, so their conversations stay theirs). The token is in the response body only, never in a URL.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from anaphora.errors import AnaphoraError, NotFoundError, PermissionDeniedError
from anaphora.server.auth import bearer_token
from anaphora.server.routes.deps import Svc
from anaphora.server.state import Service
from anaphora.server.visitors import is_visitor_token
from anaphora.settings import web_origin

router = APIRouter(tags=["visitor"])


class VisitorSessionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    site: Annotated[str | None, Field(max_length=300, description="the embedding page's origin")] = None


class VisitorSessionOut(BaseModel):
    object: Literal["visitor_session"] = "visitor_session"
    token: str = Field(description="send as Authorization: Bearer <token>; keep it out of URLs")
    visitor_id: str
    site: str
    expires_at: float
    memory: bool = Field(description="whether long-term memory is on for visitors")


def service_origin(request: Request) -> str:
    return f"{request.url.scheme}://{request.url.netloc}".lower()


def allowed_site(request: Request, site: str) -> bool:
    return site == service_origin(request) or site in request.app.state.service.settings.public.public_origins


def requested_site(request: Request, given: str | None) -> str:
    """The site a new session is for: the body's, else the page's ``Origin``, else the service's own origin; it
    must be an allowed one."""
    value = given or request.headers.get("origin") or service_origin(request)
    try:
        site = web_origin(value)
    except ValueError:
        site = value
    if not allowed_site(request, site):
        raise PermissionDeniedError(
            f"the site {site!r} may not embed this assistant",
            hint="the operator adds it to public_origins (scheme://host[:port])",
        )
    return site


def renewed(svc: Service, authorization: str | None) -> tuple[str, str] | None:
    """(visitor id, site) of a still valid visitor token, else None (a new visitor then)."""
    token = bearer_token(authorization)
    if token is None or not is_visitor_token(token):
        return None
    try:
        principal = svc.visitors.verify(token)
    except AnaphoraError:
        return None
    return principal.user_id, principal.site or ""


@router.post(
    "/v1/visitor/session",
    response_model=VisitorSessionOut,
    summary="Start (or renew) an anonymous visitor session (public mode only)",
)
async def visitor_session(
    request: Request, response: Response, svc: Svc, body: VisitorSessionRequest | None = None
) -> VisitorSessionOut:
    public = svc.settings.public
    if not public.public_mode:
        raise NotFoundError("public mode is off: there are no visitor sessions", hint="the operator sets public_mode")
    known = renewed(svc, request.headers.get("authorization"))
    if known is None or not allowed_site(request, known[1]):  # a site no longer allowed: start over
        site = requested_site(request, body.site if body else None)
        await svc.public_limits.admit_session(site)
        session = svc.visitors.issue(site)
    else:
        session = svc.visitors.issue(known[1], visitor_id=known[0])
    response.headers["Cache-Control"] = "no-store"
    return VisitorSessionOut(
        token=session.token,
        visitor_id=session.visitor_id,
        site=session.site,
        expires_at=session.expires_at,
        memory=public.visitor_memory,
    )
