"""The sources API (administrators): the ingested folders and sites with their last sync, and what became of each
page (indexed, unchanged, skipped or kept, with the reason)."""

from __future__ import annotations

import asyncio
from dataclasses import asdict

from fastapi import APIRouter

from anaphora.app import sources_of
from anaphora.errors import NotFoundError
from anaphora.server.routes.deps import Admin, Svc
from anaphora.server.schemas import SourceList, SourceOut, SourcePageList, SourcePageOut
from anaphora.store.sources import Source, SourceRegistry

router = APIRouter(tags=["sources"])


def _registry(svc) -> SourceRegistry:
    return sources_of(svc.components).registry


def _out(source: Source, pages: int) -> SourceOut:
    return SourceOut.model_validate({**asdict(source), "pages": pages, "last_report": source.report})


def _listing(registry: SourceRegistry) -> list[SourceOut]:
    return [_out(s, len(registry.pages(s.root))) for s in registry.sources()]


@router.get("/v1/sources", response_model=SourceList, summary="Ingested folders and sites, with their last sync")
async def list_sources(user: Admin, svc: Svc) -> SourceList:
    return SourceList(data=await asyncio.to_thread(_listing, _registry(svc)))


@router.get(
    "/v1/sources/{source_id}/pages", response_model=SourcePageList, summary="A source's pages and their outcomes"
)
async def source_pages(source_id: int, user: Admin, svc: Svc) -> SourcePageList:
    registry = _registry(svc)
    found = [s for s in await asyncio.to_thread(registry.sources) if s.id == source_id]
    if not found:
        raise NotFoundError(f"no source {source_id}", hint="GET /v1/sources lists them")
    pages = await asyncio.to_thread(registry.pages, found[0].root)
    data = [SourcePageOut.model_validate(page, from_attributes=True) for page in pages]
    return SourcePageList(source_id=source_id, data=data)
