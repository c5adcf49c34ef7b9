"""Sources as a docs team sees them: folders published at a base URL, and sites ingested from their URL.

:class:`Sources` runs the ingestion of either and records it: a folder's pages get their published URLs and heading
ids (:mod:`anaphora.ingest.urls`) after its files are indexed; a site is crawled and synced
(:mod:`anaphora.ingest.sync`). ``sync`` brings every stored source up to date. A folder ingested again without a
base URL keeps the one it was given before.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from anaphora.ingest.ingestor import IngestReport
from anaphora.ingest.sync import SiteReport, SiteSync, summarize
from anaphora.ingest.urls import SiteRules, anchor_for, detect_generator, folder_page
from anaphora.store.sources import Source, SourcePage, SourceRegistry
from anaphora.types import Citation

IngestFolders = Callable[[Sequence[str | Path]], IngestReport]


def is_site(path: str | Path) -> bool:
    return str(path).startswith(("http://", "https://"))


class Sources:
    def __init__(self, sites: SiteSync) -> None:
        """``sites``: the site sync, whose corpus, registry and settings the folders share."""
        self.sites = sites
        self.corpus, self.registry, self.settings = sites.corpus, sites.registry, sites.settings

    def site(self, url: str, *, allow_mass_delete: bool = False, force: bool = False) -> SiteReport:
        return self.sites.run(url, allow_mass_delete=allow_mass_delete, force=force)

    def base_url_of(self, folder: Path, given: str | None) -> str | None:
        """The base URL for ``folder``: given now, else the setting ``base_urls``, else the one it had before."""
        if given:
            return given
        for path, url in self.settings.base_urls.items():
            if Path(path).expanduser().absolute().resolve() == folder:
                return url
        known = {s.root: s for s in self.registry.sources()}.get(str(folder))
        return known.base_url if known else None

    def record_folders(
        self,
        paths: Sequence[str | Path],
        report: IngestReport,
        *,
        base_url: str | None = None,
        generator: str | None = None,
        directory_urls: bool | None = None,
    ) -> None:
        """After ``paths`` were ingested: record each folder as a source, with its pages' URLs when it has a base
        URL (``generator`` None: detected from the tree; ``directory_urls`` None: the generator's default)."""
        for raw in paths:
            folder = Path(raw).expanduser().absolute().resolve()
            if not folder.is_dir():
                continue
            known = {s.root: s for s in self.registry.sources()}.get(str(folder))
            url = self.base_url_of(folder, base_url)
            chosen = generator or (known.generator if known and known.generator else None)
            directory = (
                directory_urls if directory_urls is not None else (known.options if known else {}).get("directory_urls")
            )
            rules = SiteRules(url, chosen or detect_generator(folder), directory) if url else None
            self.publish(folder, rules)
            self.registry.save_source(
                Source(
                    root=str(folder),
                    kind="folder",
                    base_url=url,
                    generator=rules.generator if rules else chosen,
                    options={"directory_urls": directory} if directory is not None else {},
                    synced_at=time.time(),
                    report=summarize(report),
                )
            )

    def publish(self, folder: Path, rules: SiteRules | None) -> int:
        """Store the published URL and heading ids of every indexed file of ``folder`` (none without rules)."""
        pages: list[SourcePage] = []
        if rules is not None:
            for document in self.corpus.documents():
                if document.root != str(folder):
                    continue
                link = folder_page(folder, folder / document.source, rules)
                pages.append(SourcePage(link.url, document.source, link.title, link.anchors, checked_at=time.time()))
        self.registry.put_pages(str(folder), pages, replace=True)
        return len(pages)

    def sync(
        self, ingest_folders: IngestFolders, *, allow_mass_delete: bool = False
    ) -> list[tuple[Source, IngestReport]]:
        """Every stored source brought up to date: folders ingested again (``ingest_folders``), sites synced."""
        done: list[tuple[Source, IngestReport]] = []
        for source in self.registry.sources():
            if source.kind == "site":
                report: IngestReport = self.site(source.root, allow_mass_delete=allow_mass_delete)
            elif Path(source.root).is_dir():
                report = ingest_folders([source.root])  # which records the folder again (Anaphora.ingest)
            else:
                report = IngestReport(warnings=[(source.root, "the folder is gone; its documents are kept")])
            done.append((source, report))
        return done


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
