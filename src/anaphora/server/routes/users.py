"""Right to erase (first slice): ``DELETE /v1/users/{user_id}/data`` removes every conversation of the user, with
their turns and rolling summaries. Cached embeddings of the user's text and rewrite logs are not erased yet
(docs/server.md says so)."""

from __future__ import annotations

from fastapi import APIRouter

from anaphora.errors import NotFoundError, PermissionDeniedError
from anaphora.server.routes.deps import Svc, User
from anaphora.server.schemas import Erased

router = APIRouter(tags=["users"])
PAGE = 100
MAX_PAGES = 100_000  # bounds the loop even if the user keeps creating conversations meanwhile


@router.delete("/v1/users/{user_id}/data", response_model=Erased, summary="Erase a user's conversations")
async def erase(user_id: str, user: User, svc: Svc) -> Erased:
    if user_id != user.user_id and not user.admin:
        raise PermissionDeniedError(
            "you may erase only your own data",
            hint="use your own user id (the token's 'sub'), or a token with the 'admin' scope",
        )
    store, runner = svc.components.conversations, svc.runner
    conversations = turns = 0
    for _ in range(MAX_PAGES):
        page = await store.list(user_id, limit=PAGE, offset=0)
        if not page:
            break
        for listed in page:
            async with runner.conversation(user_id, listed.id):  # a turn in flight finishes (and is counted) first
                try:
                    current = await store.get(user_id, listed.id)
                    await store.delete(user_id, listed.id)
                except NotFoundError:  # deleted meanwhile by another request
                    continue
            conversations += 1
            turns += current.turn_count
    return Erased(user_id=user_id, conversations=conversations, turns=turns)
