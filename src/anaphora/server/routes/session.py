"""The caller's server-side session: inspect it, or end it (logout)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from anaphora.server.routes.deps import Svc, User
from anaphora.server.schemas import SessionEnded, SessionOut
from anaphora.server.sessions import STATE_KEY

router = APIRouter(tags=["session"])


@router.get("/v1/session", response_model=SessionOut, summary="Your server-side session (this request refreshes it)")
async def read(user: User, svc: Svc) -> SessionOut:
    sessions = svc.sessions
    session = await sessions.touch(user.user_id)
    return SessionOut(
        id=session.id,
        user_id=session.user_id,
        started_at=session.started_at,
        last_seen=session.last_seen,
        expires_at=session.last_seen + sessions.ttl_s,
        turns_in_flight=svc.runner.in_flight_for(user.user_id),
        admin=user.admin or svc.settings.server.auth == "none",
        support_url=svc.settings.server.support_url,
    )


@router.post("/v1/session/logout", response_model=SessionEnded, summary="End your server-side session")
async def logout(request: Request, user: User, svc: Svc) -> SessionEnded:
    ended = await svc.sessions.logout(user.user_id)
    setattr(request.state, STATE_KEY, None)  # no session left to name in the response
    return SessionEnded(id=ended.id if ended else None)
