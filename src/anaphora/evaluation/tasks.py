"""Multi-turn task files (the format of shared/bench): one JSON object per line.

Required: ``task_id``, ``history`` (earlier messages), ``question``. Optional: ``turn``, ``gold``, ``rewrite``,
``gold_rewrite``, ``last_turn``, ``multi_turn``, ``answerability``, ``answer``.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError, field_validator

from anaphora.errors import InputError
from anaphora.types import Message


def _labels(value: object) -> list[str]:
    if value is None:
        return []
    if isinstance(value, list):
        return [str(v) for v in value]
    return [str(value)]


class Task(BaseModel):
    task_id: str
    history: list[Message]
    question: str
    turn: int | None = None
    gold: list[str] | None = None
    rewrite: str | None = None
    gold_rewrite: str | None = None
    last_turn: str | None = None
    multi_turn: list[str] = Field(default_factory=list)
    answerability: list[str] = Field(default_factory=list)
    answer: str | None = None

    _labels_multi = field_validator("multi_turn", mode="before")(_labels)
    _labels_answerability = field_validator("answerability", mode="before")(_labels)

    @property
    def turn_number(self) -> int:
        return self.turn if self.turn is not None else sum(1 for m in self.history if m.role == "user") + 1

    @property
    def is_follow_up(self) -> bool:
        return self.turn_number > 1

    @property
    def reference_rewrite(self) -> str | None:
        return self.gold_rewrite or self.rewrite


def load_tasks(path: str | Path, *, limit: int | None = None) -> list[Task]:
    path = Path(path)
    tasks: list[Task] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read task file {path}: {exc}", hint="check the --tasks path") from exc
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            tasks.append(Task.model_validate_json(line))
        except (ValidationError, json.JSONDecodeError) as exc:
            first = exc.errors()[0] if isinstance(exc, ValidationError) else {"loc": (), "msg": str(exc)}
            where = ".".join(str(p) for p in first["loc"])
            raise InputError(
                f"{path.name}, line {number}: not a task ({where + ': ' if where else ''}{first['msg']})",
                hint="each line needs task_id, history ([{role, content}]) and question; see shared/bench/README.md",
            ) from exc
        if limit and len(tasks) >= limit:
            break
    if not tasks:
        raise InputError(f"{path} holds no tasks", hint="one JSON object per line")
    return tasks
