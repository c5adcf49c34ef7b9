"""The scripted demo conversation format: {"title": ..., "turns": [{"user": "..."}, ...]}."""

from __future__ import annotations

import json
from pathlib import Path

from anaphora.errors import InputError


def load_script(path: Path) -> list[str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return [str(turn["user"]) for turn in data["turns"]]
    except FileNotFoundError as exc:
        raise InputError(
            f"no demo script at {path}", hint="run from the repository root, or pass --script PATH"
        ) from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(
            f"{path} is not a demo script ({exc})", hint='expected {"turns": [{"user": "..."}, ...]}'
        ) from exc
