"""The sources API (administrators): the ingested folders and sites with their last sync, and what became of each
page (indexed, unchanged, skipped or kept, with the reason)."""

from __future__ import annotations

import asyncio

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
    return SourceOut(
        id=source.id,
        kind=source.kind,
        root=source.root,
        base_url=source.base_url,
        generator=source.generator,
        synced_at=source.synced_at,
        pages=pages,
        last_report=source.report,
    )


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
    data = [
        SourcePageOut(
            url=p.url,
            source=p.source,
            title=p.title,
            outcome=p.outcome,
            reason=p.reason,
            lastmod=p.lastmod,
            checked_at=p.checked_at,
        )
        for p in pages
    ]
    return SourcePageList(source_id=source_id, data=data)
