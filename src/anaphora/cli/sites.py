"""The CLI's side of published sources: crawling a site from its URL, ``anaphora sync`` and ``anaphora sources``."""

from __future__ import annotations

from datetime import UTC, datetime

from rich.console import Console

from anaphora.app import Anaphora
from anaphora.cli.render import print_ingest_report, shown
from anaphora.ingest import IngestReport
from anaphora.ingest.sync import SiteReport


def print_site_report(console: Console, report: IngestReport, *, verbose: bool = False) -> None:
    """The ingest summary, and for a site what the crawl did and which indexed pages it kept as they were."""
    if isinstance(report, SiteReport):
        if report.error:
            console.print(f"[bold red]{shown(report.url)}[/bold red]: {shown(report.error)}")
            return
        console.print(
            f"[bold]{shown(report.url)}[/bold]: {report.requests} requests, {report.downloaded} pages downloaded"
        )
    print_ingest_report(console, report, verbose=verbose)
    if isinstance(report, SiteReport):
        for url, why in report.kept if verbose else report.kept[:5]:
            console.print(f"  [yellow]kept[/yellow] {shown(url)}: {shown(why)}")
        if len(report.kept) > 5 and not verbose:
            console.print(f"  [dim]... {len(report.kept) - 5} more kept (--verbose names them)[/dim]")


def ingest_sites(
    console: Console, rag: Anaphora, urls: list[str], *, allow_mass_delete: bool, force: bool, verbose: bool
) -> list[SiteReport]:
    reports = []
    for url in urls:
        report = rag.ingest_site(url, allow_mass_delete=allow_mass_delete, force=force)
        print_site_report(console, report, verbose=verbose)
        reports.append(report)
    return reports


def sync_sources(console: Console, rag: Anaphora, *, allow_mass_delete: bool, verbose: bool) -> None:
    done = rag.sync(allow_mass_delete=allow_mass_delete)
    if not done:
        console.print("No sources yet: ingest a folder or a site's URL first (anaphora ingest PATH_OR_URL).")
    for source, report in done:
        if source.kind == "folder":
            console.print(f"[bold]{shown(source.root)}[/bold]")
        print_site_report(console, report, verbose=verbose)


def print_sources_table(console: Console, rag: Anaphora) -> None:
    for source in rag.sources.registry.sources():
        when = (
            datetime.fromtimestamp(source.synced_at, UTC).strftime("%Y-%m-%d %H:%M UTC")
            if source.synced_at
            else "never"
        )
        url = f" -> {source.base_url}" if source.base_url and source.kind == "folder" else ""
        pages = len(rag.sources.registry.pages(source.root))
        console.print(
            f"{source.id:>3} {source.kind:<6} {shown(source.root)}{shown(url)}  last sync {when}, {pages} pages"
        )
