"""The :class:`~anaphora.store.sources.SourceRegistry` in the SQLite database (tables ``sources`` and
``source_pages``, migration ``m008_sources``)."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Sequence

from anaphora.store.sources import Anchor, Source, SourcePage
from anaphora.store.sqlite_database import Database

_PAGE_COLUMNS = "url, source, title, anchors, outcome, reason, etag, last_modified, lastmod, checked_at"


def _page(row: sqlite3.Row) -> SourcePage:
    anchors = tuple(Anchor(a[0], a[1], tuple(a[2])) for a in json.loads(row["anchors"]))
    return SourcePage(
        url=row["url"],
        source=row["source"],
        title=row["title"],
        anchors=anchors,
        outcome=row["outcome"],
        reason=row["reason"],
        etag=row["etag"],
        last_modified=row["last_modified"],
        lastmod=row["lastmod"],
        checked_at=row["checked_at"],
    )


def _source(row: sqlite3.Row) -> Source:
    return Source(
        root=row["root"],
        kind=row["kind"],
        base_url=row["base_url"],
        generator=row["generator"],
        options=json.loads(row["options"]),
        id=row["id"],
        synced_at=row["synced_at"],
        report=json.loads(row["report"]),
    )


class SQLiteSources:
    def __init__(self, db: Database) -> None:
        self.db = db

    def save_source(self, source: Source) -> Source:
        with self.db.transaction() as db:
            db.execute(
                "INSERT INTO sources(root, kind, base_url, generator, options, synced_at, report) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(root) DO UPDATE SET kind = excluded.kind, "
                "base_url = excluded.base_url, generator = excluded.generator, options = excluded.options, "
                "synced_at = excluded.synced_at, report = excluded.report",
                (
                    source.root,
                    source.kind,
                    source.base_url,
                    source.generator,
                    json.dumps(source.options),
                    source.synced_at,
                    json.dumps(source.report),
                ),
            )
            row = db.execute("SELECT * FROM sources WHERE root = ?", (source.root,)).fetchone()
        return _source(row)

    def sources(self) -> list[Source]:
        return [_source(r) for r in self.db.query("SELECT * FROM sources ORDER BY id")]

    def pages(self, root: str) -> list[SourcePage]:
        rows = self.db.query(f"SELECT {_PAGE_COLUMNS} FROM source_pages WHERE root = ? ORDER BY url", (root,))
        return [_page(r) for r in rows]

    def put_pages(
        self, root: str, pages: Iterable[SourcePage], *, drop: Iterable[str] = (), replace: bool = False
    ) -> None:
        rows = [
            (
                root,
                p.url,
                p.source,
                p.title,
                json.dumps([[a.id, a.text, list(a.parents)] for a in p.anchors]),
                p.outcome,
                p.reason,
                p.etag,
                p.last_modified,
                p.lastmod,
                p.checked_at or time.time(),
            )
            for p in pages
        ]
        with self.db.transaction() as db:
            if replace:
                db.execute("DELETE FROM source_pages WHERE root = ?", (root,))
            db.executemany("DELETE FROM source_pages WHERE root = ? AND url = ?", [(root, u) for u in drop])
            db.executemany(
                f"INSERT OR REPLACE INTO source_pages(root, {_PAGE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )

    def links(self, sources: Sequence[str]) -> dict[str, SourcePage]:
        """The indexed page of each of ``sources`` (the first by root when two sources share a name)."""
        if not sources:
            return {}
        marks = ",".join("?" * len(sources))
        rows = self.db.query(
            f"SELECT {_PAGE_COLUMNS} FROM source_pages WHERE source IN ({marks}) ORDER BY root DESC", list(sources)
        )
        return {r["source"]: _page(r) for r in rows}
