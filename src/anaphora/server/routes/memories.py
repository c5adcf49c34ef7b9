"""The caller's long-term memory: list it (paginated, with provenance), forget one item, forget everything.

Every operation is the authenticated user's own: an id that belongs to another user is answered exactly like one
that does not exist (404), so ids reveal nothing.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query

from anaphora.app import erase_memory
from anaphora.memory.forget import forget
from anaphora.server.routes.deps import Svc, User, refuse_visitors
from anaphora.server.schemas import MemoriesErased, MemoryDeleted, MemoryList, MemoryOut

router = APIRouter(tags=["memories"], dependencies=[Depends(refuse_visitors)])  # closed to visitors
BASE = "/v1/memories"


@router.get(BASE, response_model=MemoryList, summary="Your memories, newest first, with where each came from")
async def list_memories(
    user: User,
    svc: Svc,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    offset: Annotated[int, Query(ge=0, le=2**31 - 1)] = 0,
    kind: Annotated[Literal["episode", "fact"] | None, Query(description="only episodes or only facts")] = None,
) -> MemoryList:
    page = await svc.components.memory.list(user.user_id, kind=kind, limit=limit, offset=offset)
    return MemoryList(
        data=[MemoryOut.of(item) for item in page.items],
        limit=limit,
        offset=offset,
        has_more=page.next_offset is not None,
    )


@router.delete(
    f"{BASE}/{{memory_id}}",
    response_model=MemoryDeleted,
    summary="Forget one memory (a fact with the message that stated it; the profile is rebuilt without it)",
)
async def forget_one(memory_id: str, user: User, svc: Svc) -> MemoryDeleted:
    await forget(svc.components.memory, user.user_id, memory_id)
    return MemoryDeleted(id=memory_id)


@router.delete(BASE, response_model=MemoriesErased, summary="Forget all your memories, entities and profile")
async def forget_all(user: User, svc: Svc) -> MemoriesErased:
    return MemoriesErased(**await erase_memory(svc.components, user.user_id))
