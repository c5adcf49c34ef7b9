"""Dependencies shared by the routes."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from anaphora.errors import InputError
from anaphora.server.app import Service, service
from anaphora.server.auth import Principal
from anaphora.server.sessions import STATE_KEY


async def current_user(request: Request) -> Principal:
    """The authenticated caller; seeing them starts or refreshes their server-side session."""
    svc = service(request)
    principal = svc.auth.authenticate(request.headers.get("authorization"))
    setattr(request.state, STATE_KEY, (await svc.sessions.touch(principal.user_id)).id)
    return principal


User = Annotated[Principal, Depends(current_user)]
Svc = Annotated[Service, Depends(service)]


def check_length(text: str, limit: int, where: str) -> None:
    if len(text) > limit:
        raise InputError(
            f"{where} has {len(text)} characters, more than the {limit} allowed",
            hint="shorten it (the limit is the max_message_chars setting)",
        )
