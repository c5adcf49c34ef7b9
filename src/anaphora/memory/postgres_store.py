"""PostgreSQL-backed long-term memory (psycopg 3, async pool): items with pgvector vectors, entities, profiles.

It implements :class:`~anaphora.memory.MemoryStore` (the contract suite :mod:`anaphora.testing.memory_contract`
runs against it and the SQLite store), for deployments whose replicas share one PostgreSQL.

- **Every read is filtered by user in its SQL** (``WHERE user_id = %(user)s`` on the table searched), and so is
  every write that touches existing rows; nothing is filtered afterwards in Python.
- **Lexical search is BM25 with the user's own statistics**, computed in SQL over an inverted index of the user's
  items (``memory_terms``: one row per item and lexeme of ``to_tsvector`` under the search configuration, with its
  count and the item's length, in an index on ``(user_id, lexeme)`` that covers the rest): a query's lexemes find
  their postings, and the document frequencies, item count and mean length are the user's own (Lucene's BM25,
  k1 = 1.5, b = 0.75, like the passage index). PostgreSQL's ``ts_rank`` has no IDF at all, and a corpus-wide one
  would let other users' words move a user's ranking.
- **Dense search is an exact cosine scan of the user's vectors** (pgvector ``<=>``, rows found by the
  ``(user_id)`` index). An HNSW graph over all users would filter *after* the graph search and return fewer than
  ``k`` of a user's items whenever their items are a small share of the table; one user's memory (thousands of
  items) scans in milliseconds.
- Vectors have one dimension per database, recorded with the first vector stored (``memory_meta``); another is
  refused with a hint, as in the passage store. Times are epoch seconds in ``double precision`` (what the items
  carry, exactly); ``to_timestamp(time)`` reads them as dates in SQL.
- Migrations are recorded in ``memory_migrations``. Text cannot hold NUL characters in PostgreSQL: they are stored
  as U+FFFD, as in the conversation store.

Needs the ``postgres`` extra: ``pip install 'anaphora[postgres]'``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from anaphora.errors import ConfigurationError, MemoryNotFoundError
from anaphora.memory.legacy_episodes import users_words
from anaphora.memory.types import (
    Entity,
    EntityMention,
    MemoryExport,
    MemoryHit,
    MemoryItem,
    MemoryKind,
    MemoryPage,
    Profile,
    epoch_key,
)
from anaphora.retrieval.bm25 import K1, B
from anaphora.store.migrations import Migrations
from anaphora.store.postgres_conversations import _text
from anaphora.store.postgres_passages import vector_literal
from anaphora.store.postgres_pool import AsyncPostgresStore, Migration, create_vector_extension, run_script

MIGRATIONS: Migrations[Migration] = Migrations(
    "the PostgreSQL memory store", hint="upgrade Anaphora, or point ANAPHORA_POSTGRES_URL at another database"
)
migration = MIGRATIONS  # the decorator that registers a step
BM25_K1, BM25_B = K1, B  # the passage index's constants
TABLES = ("memory_items", "memory_vectors", "memory_terms", "memory_entities", "memory_profiles")  # each has user_id


MEMORY_META_SQL = """
        CREATE TABLE memory_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE memory_entities (
            user_id TEXT NOT NULL,
            key TEXT NOT NULL,
            name TEXT NOT NULL,
            kind TEXT NOT NULL,
            mentions INTEGER NOT NULL,
            first_seen DOUBLE PRECISION NOT NULL,
            last_seen DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (user_id, key)
        );
        CREATE INDEX memory_entities_last_seen ON memory_entities (last_seen);
        CREATE TABLE memory_profiles (
            user_id TEXT PRIMARY KEY,
            text TEXT NOT NULL,
            covers JSONB NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL
        )
        """
MEMORY_INDEX_SQL = """
        CREATE INDEX memory_items_user_time ON memory_items (user_id, time DESC, id);
        CREATE INDEX memory_items_time ON memory_items (time);
        CREATE INDEX memory_items_current_facts ON memory_items (user_id, lower(subject), lower(attribute))
            WHERE kind = 'fact' AND valid_to IS NULL;
        CREATE TABLE memory_terms (
            item_id TEXT NOT NULL REFERENCES memory_items (id) ON DELETE CASCADE,
            user_id TEXT NOT NULL,
            lexeme TEXT NOT NULL,
            tf INTEGER NOT NULL,
            length INTEGER NOT NULL,
            PRIMARY KEY (item_id, lexeme)
        );
        CREATE INDEX memory_terms_user_lexeme ON memory_terms (user_id, lexeme) INCLUDE (item_id, tf, length);
        CREATE TABLE memory_vectors (
            item_id TEXT PRIMARY KEY REFERENCES memory_items (id) ON DELETE CASCADE,
            user_id TEXT NOT NULL,
            embedding vector NOT NULL
        );
        CREATE INDEX memory_vectors_user ON memory_vectors (user_id)
        """


@migration
async def m001_memory(conn: Any, text_search_config: str) -> None:
    from psycopg import sql

    await create_vector_extension(conn)
    await run_script(conn, MEMORY_META_SQL)
    await conn.execute("INSERT INTO memory_meta (key, value) VALUES ('text_search_config', %s)", (text_search_config,))
    await conn.execute(
        sql.SQL(
            "CREATE TABLE memory_items (id TEXT PRIMARY KEY, user_id TEXT NOT NULL, "
            "kind TEXT NOT NULL CHECK (kind IN ('episode', 'fact')), text TEXT NOT NULL, "
            "conversation_id TEXT NOT NULL, turns INTEGER[] NOT NULL, time DOUBLE PRECISION NOT NULL, "
            "subject TEXT NOT NULL, attribute TEXT NOT NULL, value TEXT NOT NULL, "
            "valid_from DOUBLE PRECISION, valid_to DOUBLE PRECISION, source TEXT NOT NULL, "
            "length INTEGER NOT NULL)"  # tokens of the text under the search configuration (BM25's length)
        )
    )
    await run_script(conn, MEMORY_INDEX_SQL)


@migration
async def m002_memory_epochs(conn: Any, text_search_config: str) -> None:
    """Each user's erase epoch under a hash of the user id: writes check it under the user's lock (erase wins)."""
    await conn.execute("CREATE TABLE memory_epochs (user_key TEXT PRIMARY KEY, epoch BIGINT NOT NULL)")


@migration
async def m003_episodes_keep_the_users_words(conn: Any, text_search_config: str) -> None:
    """Episodes written before issue 24 held the question and the assistant's answer: each keeps the user's words
    only (:func:`~anaphora.memory.legacy_episodes.users_words`; the stored turn's question when the conversations
    live in this database too), with its BM25 length and terms recomputed; its vector is left as it was."""
    row = await (await conn.execute("SELECT to_regclass('turns') IS NOT NULL AS present")).fetchone()
    joined = (
        "SELECT e.id, e.text, t.question FROM memory_items e LEFT JOIN turns t "
        "ON t.conversation_id = e.conversation_id AND t.idx = e.turns[1]"
        if row["present"]
        else "SELECT e.id, e.text, NULL AS question FROM memory_items e"
    )
    rows = await (await conn.execute(f"{joined} WHERE e.kind = 'episode' AND strpos(e.text, E'\\n') > 0")).fetchall()
    for old in rows:
        kept = users_words(old["text"], old["question"])
        if kept == old["text"]:
            continue
        await conn.execute(
            "UPDATE memory_items SET text = %s, length = (SELECT COALESCE(sum(COALESCE(array_length(positions, 1), "
            "1)), 0) FROM unnest(to_tsvector(%s::regconfig, %s))) WHERE id = %s",
            (kept, text_search_config, kept, old["id"]),
        )
        await conn.execute("DELETE FROM memory_terms WHERE item_id = %s", (old["id"],))
        await conn.execute(
            "INSERT INTO memory_terms (item_id, user_id, lexeme, tf, length) SELECT i.id, i.user_id, t.lexeme, "
            "COALESCE(array_length(t.positions, 1), 1), i.length FROM memory_items i, "
            "unnest(to_tsvector(%s::regconfig, i.text)) AS t WHERE i.id = %s",
            (text_search_config, old["id"]),
        )


_USER_LOCK = "SELECT pg_advisory_xact_lock(hashtext('anaphora memory'), hashtext(%s))"
_EPOCH = "SELECT epoch FROM memory_epochs WHERE user_key = %s"


# Each CTE is MATERIALIZED so it is computed once (inlined, the user's statistics were recomputed per posting).
_LEXICAL = f"""
WITH q AS MATERIALIZED (
    SELECT DISTINCT q.n, l.lexeme
    FROM unnest(%(texts)s::text[]) WITH ORDINALITY AS q (text, n)
    CROSS JOIN LATERAL unnest(tsvector_to_array(to_tsvector(%(config)s::regconfig, q.text))) AS l (lexeme)
),
mine AS MATERIALIZED (
    SELECT count(*)::float8 AS items, COALESCE(avg(length), 0)::float8 AS mean_length
    FROM memory_items WHERE user_id = %(user)s
),
postings AS MATERIALIZED (
    SELECT q.n, t.item_id, t.lexeme, t.tf, t.length
    FROM q JOIN memory_terms t ON t.user_id = %(user)s AND t.lexeme = q.lexeme
),
df AS MATERIALIZED (SELECT n, lexeme, count(*)::float8 AS df FROM postings GROUP BY n, lexeme),
scored AS (
    SELECT p.n, p.item_id, sum(
        ln(1 + (mine.items - df.df + 0.5) / (df.df + 0.5)) * p.tf * {BM25_K1 + 1}
        / (p.tf + {BM25_K1} * (1 - {BM25_B} + {BM25_B} * p.length / mine.mean_length))
    ) AS score
    FROM postings p JOIN df USING (n, lexeme) CROSS JOIN mine
    GROUP BY p.n, p.item_id
)
SELECT n, item_id, score FROM (
    SELECT n, item_id, score, row_number() OVER (PARTITION BY n ORDER BY score DESC, item_id) AS rank FROM scored
) ranked WHERE rank <= %(k)s ORDER BY n, rank
"""

# the query vectors are parsed once (``vector[]``), not once per row scanned (``text`` cast in the ORDER BY)
_DENSE = """
SELECT q.n, v.item_id, 1 - v.distance AS score
FROM unnest(%(vectors)s::vector[]) WITH ORDINALITY AS q (v, n),
LATERAL (SELECT item_id, embedding <=> q.v AS distance FROM memory_vectors
         WHERE user_id = %(user)s ORDER BY distance, item_id LIMIT %(k)s) AS v
ORDER BY q.n, v.distance, v.item_id
"""

_ITEM_COLUMNS = (
    "id, user_id, kind, text, conversation_id, turns, time, subject, attribute, value, valid_from, valid_to, source"
)


def _item(row: dict[str, Any]) -> MemoryItem:
    """A row of ``_ITEM_COLUMNS`` (the item's fields, by name) as the item."""
    return MemoryItem(**{**row, "turns": tuple(row["turns"])})


def _hits(rows: Sequence[dict[str, Any]], count: int) -> list[list[MemoryHit]]:
    rankings: list[list[MemoryHit]] = [[] for _ in range(count)]
    for row in rows:
        rankings[row["n"] - 1].append(MemoryHit(row["item_id"], float(row["score"])))
    return rankings


def _dimension_error(stored: int, got: int) -> ConfigurationError:
    return ConfigurationError(
        f"memory vectors with {got} dimensions cannot be compared with the stored {stored}-dimensional ones",
        hint="the embedder changed since these memories were written: set ANAPHORA_EMBEDDER back, or erase the "
        "memories (DELETE /v1/memories, or drop the memory_* tables) to start again with the new embedder",
    )


class PostgresMemoryStore(AsyncPostgresStore):
    """Long-term memory in PostgreSQL with pgvector. Construction is cheap and synchronous; the pool opens (and the
    schema is migrated) on :meth:`open` or first use. Close it with :meth:`aclose`."""

    PURPOSE = "the PostgreSQL memory store"
    MIGRATIONS = MIGRATIONS
    MIGRATIONS_TABLE = "memory_migrations"
    MIGRATION_LOCK = 0x616E6172  # the conversations use ...70, the corpus ...71

    def __init__(self, url: str, *, text_search_config: str = "english", **pool: Any) -> None:
        super().__init__(url, **pool)
        self.text_search_config = text_search_config

    async def _apply(self, step: Migration, conn: Any) -> None:
        await step(conn, self.text_search_config)

    async def _migrate(self) -> None:
        await super()._migrate()
        async with self.pool.connection() as conn:
            row = await (
                await conn.execute("SELECT value FROM memory_meta WHERE key = 'text_search_config'")
            ).fetchone()
        if row["value"] != self.text_search_config:
            raise ConfigurationError(
                f"the memory store's full-text index uses the text search configuration {row['value']!r}, not "
                f"{self.text_search_config!r}",
                hint=f"set ANAPHORA_POSTGRES_TEXT_SEARCH_CONFIG={row['value']}, or drop the memory_* tables",
            )

    # -- MemoryReader ------------------------------------------------------------------------------------------

    async def lexical(self, user_id: str, queries: Sequence[str], k: int) -> list[list[MemoryHit]]:
        if not queries:
            return []
        texts = [_text(q) for q in queries]
        params = {
            "user": user_id,
            "config": self.text_search_config,
            "texts": texts,
            "k": k,
        }
        async with await self._conn() as conn:
            rows = await (await conn.execute(_LEXICAL, params)).fetchall()
        return _hits(rows, len(queries))

    async def dense(self, user_id: str, vectors: np.ndarray, k: int) -> list[list[MemoryHit]]:
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2:
            raise ValueError("dense() takes a 2-D array: one query vector per row")
        async with await self._conn() as conn:
            stored = await self._stored_dimension(conn)
            if stored is None:  # no vector stored yet, for anyone
                return [[] for _ in range(len(vectors))]
            if vectors.shape[1] != stored:
                raise _dimension_error(stored, vectors.shape[1])
            params = {"user": user_id, "vectors": [vector_literal(v) for v in vectors], "k": k}
            rows = await (await conn.execute(_DENSE, params)).fetchall()
        return _hits(rows, len(vectors))

    async def get_many(self, user_id: str, item_ids: Sequence[str]) -> dict[str, MemoryItem]:
        async with await self._conn() as conn:
            rows = await (
                await conn.execute(
                    f"SELECT {_ITEM_COLUMNS} FROM memory_items WHERE user_id = %s AND id = ANY(%s)",
                    (user_id, list(item_ids)),
                )
            ).fetchall()
        return {row["id"]: _item(row) for row in rows}

    async def profile(self, user_id: str) -> Profile | None:
        async with await self._conn() as conn:
            return await self._profile(conn, user_id)

    async def _profile(self, conn: Any, user_id: str) -> Profile | None:
        row = await (await conn.execute("SELECT * FROM memory_profiles WHERE user_id = %s", (user_id,))).fetchone()
        if row is None:
            return None
        return Profile(row["user_id"], row["text"], row["updated_at"], tuple(row["covers"]))

    # -- MemoryWriter ------------------------------------------------------------------------------------------

    async def epoch(self, user_id: str) -> int:
        async with await self._conn() as conn:
            row = await (await conn.execute(_EPOCH, (epoch_key(user_id),))).fetchone()
        return 0 if row is None else int(row["epoch"])

    async def _locked_and_current(self, conn: Any, user_id: str, epoch: int | None) -> bool:
        """Take the user's write lock for this transaction (erase takes it too, so a write and an erase of one user
        are serialised across replicas); whether the epoch the write began under is still the user's."""
        await conn.execute(_USER_LOCK, (user_id,))
        if epoch is None:
            return True
        row = await (await conn.execute(_EPOCH, (epoch_key(user_id),))).fetchone()
        return (0 if row is None else int(row["epoch"])) == epoch

    async def add(
        self, user_id: str, items: Sequence[MemoryItem], vectors: np.ndarray | None = None, *, epoch: int | None = None
    ) -> list[MemoryItem]:
        strangers = sorted({item.user_id for item in items if item.user_id != user_id})
        if strangers:
            raise ValueError(f"add() for user {user_id!r} was given items of {', '.join(map(repr, strangers))}")
        if vectors is not None:
            vectors = np.asarray(vectors, dtype=np.float32)
            if vectors.ndim != 2 or len(vectors) != len(items):
                raise ValueError(f"add() needs one vector per item: {len(items)} items, vectors {vectors.shape}")
        stored: list[MemoryItem] = []
        async with await self._conn() as conn, conn.transaction():
            # one writer per user at a time, so two adds of the same fact cannot both find it new
            if not await self._locked_and_current(conn, user_id, epoch):
                return []
            if vectors is not None and len(vectors):
                await self._check_dimension(conn, vectors.shape[1])
            for number, item in enumerate(items):
                if item.kind == "fact":
                    item = await self._supersede(conn, item)
                    if item is None:
                        continue
                await self._insert(conn, item)
                if vectors is not None:
                    await conn.execute(
                        "INSERT INTO memory_vectors (item_id, user_id, embedding) VALUES (%s, %s, %s::vector)",
                        (item.id, user_id, vector_literal(vectors[number])),
                    )
                stored.append(item)
        return stored

    async def _supersede(self, conn: Any, fact: MemoryItem) -> MemoryItem | None:
        """Close the user's current facts of the same subject and attribute (case-folded) that this one replaces;
        ``None`` when it repeats a current fact. A fact older than the current one arrives already closed by it."""
        since = fact.valid_from if fact.valid_from is not None else fact.time
        current = await (
            await conn.execute(
                "SELECT id, value, COALESCE(valid_from, time) AS since FROM memory_items WHERE user_id = %s "
                "AND kind = 'fact' AND lower(subject) = lower(%s) AND lower(attribute) = lower(%s) "
                "AND valid_to IS NULL",
                (fact.user_id, _text(fact.subject), _text(fact.attribute)),
            )
        ).fetchall()
        if any(row["value"].casefold() == _text(fact.value).casefold() for row in current):
            return None
        closes = [row["id"] for row in current if row["since"] <= since]
        later = [row["since"] for row in current if row["since"] > since]
        if closes:
            await conn.execute(
                "UPDATE memory_items SET valid_to = %s WHERE user_id = %s AND id = ANY(%s)",
                (since, fact.user_id, closes),
            )
        if later and fact.valid_to is None:
            return replace(fact, valid_from=since, valid_to=min(later))
        return fact

    async def _insert(self, conn: Any, item: MemoryItem) -> None:
        text = _text(item.text)
        await conn.execute(
            "INSERT INTO memory_items (id, user_id, kind, text, conversation_id, turns, time, subject, attribute, "
            "value, valid_from, valid_to, source, length) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, "
            "%s, (SELECT COALESCE(sum(COALESCE(array_length(positions, 1), 1)), 0) "
            "FROM unnest(to_tsvector(%s::regconfig, %s))))",
            (
                item.id,
                item.user_id,
                item.kind,
                text,
                _text(item.conversation_id),
                list(item.turns),
                item.time,
                _text(item.subject),
                _text(item.attribute),
                _text(item.value),
                item.valid_from,
                item.valid_to,
                item.source,
                self.text_search_config,
                text,
            ),
        )
        await conn.execute(
            "INSERT INTO memory_terms (item_id, user_id, lexeme, tf, length) SELECT i.id, i.user_id, t.lexeme, "
            "COALESCE(array_length(t.positions, 1), 1), i.length FROM memory_items i, "
            "unnest(to_tsvector(%s::regconfig, i.text)) AS t WHERE i.id = %s AND i.user_id = %s",
            (self.text_search_config, item.id, item.user_id),
        )

    async def _stored_dimension(self, conn: Any) -> int | None:
        row = await (await conn.execute("SELECT value FROM memory_meta WHERE key = 'dim'")).fetchone()
        return None if row is None else int(row["value"])

    async def _check_dimension(self, conn: Any, dim: int) -> None:
        """Record the first vectors' dimension; refuse any other afterwards."""
        await conn.execute(
            "INSERT INTO memory_meta (key, value) VALUES ('dim', %s) ON CONFLICT (key) DO NOTHING", (str(dim),)
        )
        stored = await self._stored_dimension(conn)
        if stored != dim:
            raise _dimension_error(stored, dim)

    async def upsert_entities(
        self, user_id: str, mentions: Sequence[EntityMention], *, epoch: int | None = None
    ) -> None:
        async with await self._conn() as conn, conn.transaction():
            if not await self._locked_and_current(conn, user_id, epoch):
                return
            for mention in mentions:
                await conn.execute(
                    "INSERT INTO memory_entities (user_id, key, name, kind, mentions, first_seen, last_seen) "
                    "VALUES (%s, %s, %s, %s, 1, %s, %s) ON CONFLICT (user_id, key) DO UPDATE SET "
                    "mentions = memory_entities.mentions + 1, "
                    "first_seen = LEAST(memory_entities.first_seen, EXCLUDED.first_seen), "
                    "last_seen = GREATEST(memory_entities.last_seen, EXCLUDED.last_seen)",
                    (
                        user_id,
                        _text(mention.name.casefold()),
                        _text(mention.name),
                        mention.kind,
                        mention.seen_at,
                        mention.seen_at,
                    ),
                )

    async def set_profile(
        self, user_id: str, text: str, covers: Sequence[str] = (), *, epoch: int | None = None
    ) -> None:
        async with await self._conn() as conn, conn.transaction():
            if not await self._locked_and_current(conn, user_id, epoch):
                return
            await conn.execute(
                "INSERT INTO memory_profiles (user_id, text, covers, updated_at) VALUES (%s, %s, %s::jsonb, %s) "
                "ON CONFLICT (user_id) DO UPDATE SET text = EXCLUDED.text, covers = EXCLUDED.covers, "
                "updated_at = EXCLUDED.updated_at",
                (user_id, _text(text), json.dumps([_text(c) for c in covers]), time.time()),
            )

    # -- MemoryStore -------------------------------------------------------------------------------------------

    async def list(
        self, user_id: str, *, kind: MemoryKind | None = None, limit: int = 50, offset: int = 0
    ) -> MemoryPage:
        async with await self._conn() as conn:
            rows = await (
                await conn.execute(
                    f"SELECT {_ITEM_COLUMNS} FROM memory_items WHERE user_id = %s AND (%s::text IS NULL OR kind = %s) "
                    "ORDER BY time DESC, id LIMIT %s OFFSET %s",
                    (user_id, kind, kind, limit + 1, offset),
                )
            ).fetchall()
        more = len(rows) > limit
        return MemoryPage(tuple(_item(r) for r in rows[:limit]), offset + limit if more else None)

    async def entities(self, user_id: str, *, limit: int = 100) -> list[Entity]:
        async with await self._conn() as conn:
            return await self._entities(conn, user_id, limit)

    async def _entities(self, conn: Any, user_id: str, limit: int | None) -> list[Entity]:
        rows = await (
            await conn.execute(
                "SELECT * FROM memory_entities WHERE user_id = %s ORDER BY mentions DESC, last_seen DESC, key LIMIT %s",
                (user_id, limit),
            )
        ).fetchall()
        return [Entity(**r) for r in rows]  # the table's columns are the entity's fields

    async def delete(self, user_id: str, item_id: str) -> None:
        async with await self._conn() as conn:
            cursor = await conn.execute("DELETE FROM memory_items WHERE user_id = %s AND id = %s", (user_id, item_id))
            if not cursor.rowcount:
                raise MemoryNotFoundError(item_id)

    async def _delete(self, conn: Any, items: str, entities: str, profiles: str, params: tuple) -> dict[str, int]:
        """Delete the items matching ``items`` (their vectors with them), the entities matching ``entities`` and
        the profiles matching ``profiles`` (each a WHERE clause over ``params``); count each kind."""
        vectors = await conn.execute(
            f"DELETE FROM memory_vectors WHERE item_id IN (SELECT id FROM memory_items WHERE {items})", params
        )
        counts = {"vectors": vectors.rowcount}
        for name, table, where in (
            ("memories", "memory_items", items),
            ("entities", "memory_entities", entities),
            ("profiles", "memory_profiles", profiles),
        ):
            counts[name] = (await conn.execute(f"DELETE FROM {table} WHERE {where}", params)).rowcount
        return {name: counts[name] for name in ("memories", "vectors", "entities", "profiles")}

    async def delete_expired(self, before_ts: float) -> dict[str, int]:
        async with await self._conn() as conn, conn.transaction():
            return await self._delete(
                conn, "time < %(before)s", "last_seen < %(before)s", "false", {"before": before_ts}
            )

    async def erase_user(self, user_id: str) -> dict[str, int]:
        async with await self._conn() as conn, conn.transaction():
            await conn.execute(_USER_LOCK, (user_id,))
            where = "user_id = %(user)s"
            counts = await self._delete(conn, where, where, where, {"user": user_id})
            await conn.execute(
                "INSERT INTO memory_epochs (user_key, epoch) VALUES (%s, 1) "
                "ON CONFLICT (user_key) DO UPDATE SET epoch = memory_epochs.epoch + 1",
                (epoch_key(user_id),),
            )
            return counts

    async def export(self, user_id: str) -> MemoryExport:
        async with await self._conn() as conn, conn.transaction():  # one snapshot of items, entities and profile
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            rows = await (
                await conn.execute(
                    f"SELECT {_ITEM_COLUMNS} FROM memory_items WHERE user_id = %s ORDER BY time DESC, id", (user_id,)
                )
            ).fetchall()
            entities = await self._entities(conn, user_id, None)
            profile = await self._profile(conn, user_id)
        return MemoryExport(user_id, tuple(_item(r) for r in rows), tuple(entities), profile)
