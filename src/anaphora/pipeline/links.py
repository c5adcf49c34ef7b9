"""Citations that open the published page at the heading they quote (sources with a base URL, crawled sites)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from anaphora.ingest.urls import anchor_for
from anaphora.pipeline.stage import Stage, StageResult
from anaphora.pipeline.state import TurnState
from anaphora.store.sources import SourceRegistry
from anaphora.types import Citation


class CitationLinks:
    """Adds ``url`` to citations whose source has a published page; others are returned as they are."""

    def __init__(self, registry: SourceRegistry) -> None:
        self.registry = registry

    def __call__(self, citations: Sequence[Citation]) -> list[Citation]:
        pages = self.registry.links(sorted({c.source for c in citations if c.source and c.url is None}))
        linked = []
        for citation in citations:
            page = pages.get(citation.source)
            if page is None or citation.url is not None:
                linked.append(citation)
                continue
            anchor = anchor_for(citation.heading, page.anchors, page.title)
            linked.append(citation.model_copy(update={"url": f"{page.url}#{anchor}" if anchor else page.url}))
        return linked


class LinkCitations(Stage):
    """After cite: each citation gets its published URL (optional: a failure leaves the citations as they were)."""

    name = "link_citations"
    reads = ("citations",)
    writes = ("citations",)
    timeout_s = 2.0

    def __init__(self, links: Callable[[Sequence[Citation]], list[Citation]]) -> None:
        self.links = links

    def applies(self, state: TurnState) -> bool:
        return bool(state.citations)

    async def run(self, state: TurnState) -> StageResult:
        linked = await asyncio.to_thread(self.links, state.citations)
        count = sum(1 for c in linked if c.url)
        return StageResult(state.update(citations=tuple(linked)), "ok", f"{count} of {len(linked)} linked")

    def fallback(self, state: TurnState, failure: str) -> tuple[TurnState, str] | None:
        return state, "citations without URLs"
