"""A user's memory as plain JSON records: what ``GET /v1/memories`` answers with and what ``anaphora memory
export`` writes, one record a line (``object`` says which kind: ``memory``, ``entity`` or ``profile``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from anaphora.memory.types import Entity, MemoryExport, MemoryItem, Profile


def item_record(item: MemoryItem) -> dict[str, Any]:
    """An item with its provenance (conversation, turns, time); a fact also with its subject, attribute, value
    and validity (``valid_to`` ``None``: current)."""
    record: dict[str, Any] = {
        "object": "memory",
        "id": item.id,
        "kind": item.kind,
        "text": item.text,
        "provenance": {
            "conversation_id": item.conversation_id,
            "turns": list(item.turns),
            "time": item.time,
            "said_by": "user",  # memory keeps what the user said, never the assistant's answers
        },
        "source": item.source,
    }
    if item.kind == "fact":
        record.update(
            subject=item.subject,
            attribute=item.attribute,
            value=item.value,
            valid_from=item.valid_from,
            valid_to=item.valid_to,
            current=item.current,
        )
    return record


def entity_record(entity: Entity) -> dict[str, Any]:
    return {
        "object": "entity",
        "key": entity.key,
        "name": entity.name,
        "kind": entity.kind,
        "mentions": entity.mentions,
        "first_seen": entity.first_seen,
        "last_seen": entity.last_seen,
    }


def profile_record(profile: Profile) -> dict[str, Any]:
    return {"object": "profile", "text": profile.text, "updated_at": profile.updated_at, "covers": list(profile.covers)}


def export_lines(export: MemoryExport) -> Iterator[str]:
    """JSON lines: the items (newest first), then the entities, then the profile if there is one."""
    records = [
        *(item_record(i) for i in export.items),
        *(entity_record(e) for e in export.entities),
        *([profile_record(export.profile)] if export.profile is not None else []),
    ]
    for record in records:
        yield json.dumps({**record, "user_id": export.user_id}, ensure_ascii=False)
