"""Skipped files grouped for the ingest summary: one line per reason and file type with a count, so a re-run over
a tree full of images does not list every image again.

A skip reason is a sentence that starts with what went wrong, details after it (``not a readable PDF (…)``,
``too large: 31.2 MB, …``), sometimes after the file's own name (``notes.jsonl, line 3: …``). The group is that
head; the full reasons stay in the report for ``--verbose``."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import PurePath

_DETAIL = re.compile(r" \(|: |, | [0-9]")


@dataclass
class SkipGroup:
    reason: str
    count: int = 0
    types: Counter[str] = field(default_factory=Counter)  # ".png" -> 12
    paths: list[str] = field(default_factory=list)


def reason_head(path: str, reason: str) -> str:
    """The part of ``reason`` that files skipped for the same cause share."""
    name = PurePath(path).name
    if name and reason.startswith(name):
        rest = reason[len(name) :]
        reason = rest.split(": ", 1)[1] if ": " in rest else rest.lstrip(":, ")
    if reason.startswith("unsupported file type"):
        return "unsupported file type"
    return _DETAIL.split(reason, 1)[0].strip() or reason


def file_type(path: str) -> str:
    return PurePath(path).suffix.lower() or "(no extension)"


def group_skipped(skipped: Sequence[tuple[str, str]]) -> list[SkipGroup]:
    """Groups, largest first (ties in order of first appearance)."""
    groups: dict[str, SkipGroup] = {}
    for path, reason in skipped:
        group = groups.setdefault(reason_head(path, reason), SkipGroup(reason_head(path, reason)))
        group.count += 1
        group.types[file_type(path)] += 1
        group.paths.append(path)
    return sorted(groups.values(), key=lambda g: -g.count)
