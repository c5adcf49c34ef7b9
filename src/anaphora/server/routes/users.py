"""Right to erase: ``DELETE /v1/users/{user_id}/data`` removes every conversation of the user, with their turns,
rolling summaries and traces (where the rewrites are logged), in one transaction, and the cached embeddings of their
text."""

from __future__ import annotations

from contextlib import AsyncExitStack

from fastapi import APIRouter

from anaphora.app import erase_user_data
from anaphora.errors import PermissionDeniedError
from anaphora.server.routes.deps import Svc, User
from anaphora.server.schemas import Erased
from anaphora.store.protocols import all_conversations

router = APIRouter(tags=["users"])
PAGE = 100


@router.delete("/v1/users/{user_id}/data", response_model=Erased, summary="Erase a user's conversations")
async def erase(user_id: str, user: User, svc: Svc) -> Erased:
    if user_id != user.user_id and not user.admin:
        raise PermissionDeniedError(
            "you may erase only your own data",
            hint="use your own user id (the token's 'sub'), or a token with the 'admin' scope",
        )
    store, runner = svc.components.conversations, svc.runner
    ids = [c.id for c in await all_conversations(store, user_id, page=PAGE)]
    async with AsyncExitStack() as locks:
        for conversation_id in sorted(set(ids)):  # a turn in flight finishes (and is counted) first
            await locks.enter_async_context(runner.conversation(user_id, conversation_id))
        counts = await erase_user_data(svc.components, user_id)
    return Erased(user_id=user_id, **counts)
