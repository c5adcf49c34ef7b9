"""The scripted demo format: ``{"title": ..., "turns": [{"user": "..."}, ...]}``.

A turn with ``"new_conversation": "title"`` (or ``true``) starts a new conversation before it is asked, so a script
can show what carries over between conversations (long-term memory) and what does not (the verbatim history).
Other keys of a turn (``kind``, ``expect``, ``note``) are for the tests and are ignored here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from anaphora.errors import InputError

FORMAT = '{"title": "...", "turns": [{"user": "..."}, {"user": "...", "new_conversation": "title"}, ...]}'


@dataclass(frozen=True, slots=True)
class ScriptTurn:
    user: str
    new_conversation: str | None = None  # the title of the conversation this turn starts, if it starts one


@dataclass(frozen=True, slots=True)
class Script:
    title: str
    turns: list[ScriptTurn]


def _turn(number: int, item: object) -> ScriptTurn:
    if not isinstance(item, dict) or not isinstance(item.get("user"), str) or not item["user"].strip():
        raise ValueError(f"turn {number} needs a non-empty string 'user'")
    new = item.get("new_conversation", False)
    if new is True:
        new = f"demo, conversation from turn {number}"
    elif new is False:
        new = None
    elif not isinstance(new, str) or not new.strip():
        raise ValueError(f"turn {number}: 'new_conversation' must be true or a title, not {new!r}")
    return ScriptTurn(item["user"], new)


def load_script(path: Path) -> Script:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or not isinstance(data.get("turns"), list) or not data["turns"]:
            raise ValueError("'turns' must be a non-empty list")
        title = data.get("title", "demo")
        return Script(str(title), [_turn(n, item) for n, item in enumerate(data["turns"], start=1)])
    except FileNotFoundError as exc:
        raise InputError(
            f"no demo script at {path}", hint="run from the repository root, or pass --script PATH"
        ) from exc
    except (OSError, ValueError) as exc:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise InputError(f"{path} is not a demo script ({exc})", hint=f"expected {FORMAT}") from exc
