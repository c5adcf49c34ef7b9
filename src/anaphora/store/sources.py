"""Sources: the folders and sites that were ingested, how they are published, and what became of each page.

A source is keyed by its ``root`` (a folder's absolute path, or a site's root URL). ``base_url`` gives a folder's
pages their published URLs (None: citations name the file only, as before); a site's pages carry their own. Each
page keeps what the next sync needs (``etag``, ``last_modified``, the sitemap's ``lastmod``) and what the report shows
(``outcome`` and ``reason``), and its headings' ids, so a citation opens the page at the heading it quotes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Protocol

SourceKind = Literal["folder", "site"]


class Anchor(NamedTuple):
    """A heading of a page: its id, its text and the texts of the headings above it (outermost first)."""

    id: str
    text: str
    parents: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Source:
    root: str
    kind: SourceKind
    base_url: str | None = None
    generator: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    id: int = 0
    synced_at: float | None = None
    report: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SourcePage:
    """One page of a source. ``source`` is the indexed document's name ('' when the page is not indexed)."""

    url: str
    source: str = ""
    title: str = ""
    anchors: tuple[Anchor, ...] = ()
    outcome: str = "indexed"  # indexed | unchanged | skipped | removed | kept
    reason: str = ""
    etag: str | None = None
    last_modified: str | None = None
    lastmod: str | None = None
    checked_at: float = 0.0


class SourceRegistry(Protocol):
    """Where sources and their pages are kept. Rules: ``save_source`` inserts or updates by ``root`` and returns
    the stored source (with its id); ``put_pages`` inserts or replaces pages by ``(root, url)``; ``links`` reads the
    indexed pages named ``sources`` of sources that have URLs; every write is one transaction."""

    def save_source(self, source: Source) -> Source: ...

    def sources(self) -> list[Source]: ...

    def pages(self, root: str) -> list[SourcePage]: ...

    def put_pages(
        self, root: str, pages: Iterable[SourcePage], *, drop: Iterable[str] = (), replace: bool = False
    ) -> None:
        """Upsert ``pages``, delete the pages with URLs in ``drop`` (``replace``: every other page of ``root``)."""
        ...

    def links(self, sources: Sequence[str]) -> dict[str, SourcePage]: ...
