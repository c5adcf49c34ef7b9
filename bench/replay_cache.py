"""A chat model wrapper that replays recorded replies: benchmarks call the embedded model (temperature 0, so its
replies are deterministic) once per distinct prompt and read the reply back on later runs.

The cache lives in bench/.cache/model-replies.jsonl (never committed). ``--fresh-model`` in the scripts that use it
bypasses it. A recorded reply is keyed by the model's name, the messages and the options, so a changed prompt or
setting is a miss, never a stale hit.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from anaphora.models.base import ChatModel, ChatOptions, ChatReply, ChatStream, Usage
from anaphora.types import Message


class ReplayingModel:
    def __init__(self, model: ChatModel, path: Path) -> None:
        self.model = model
        self.name = model.name
        self.capabilities = model.capabilities  # what the wrapped model declares
        self.path = path
        self.replies: dict[str, dict] = {}
        self.hits = self.misses = 0
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    row = json.loads(line)
                    self.replies[row["key"]] = row

    def _key(self, messages: Sequence[Message], options: ChatOptions) -> str:
        payload = json.dumps(
            [self.name, [[m.role, m.content] for m in messages], asdict(options)], sort_keys=True, default=str
        )
        return hashlib.sha256(payload.encode()).hexdigest()

    async def chat(self, messages: Sequence[Message], options: ChatOptions) -> ChatReply:
        key = self._key(messages, options)
        row = self.replies.get(key)
        if row is not None:
            self.hits += 1
            usage = Usage(prompt_tokens=row["prompt_tokens"], completion_tokens=row["completion_tokens"])
            return ChatReply(row["text"], usage)
        self.misses += 1
        reply = await self.model.chat(messages, options)
        row = {
            "key": key,
            "text": reply.text,
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
        }
        self.replies[key] = row
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(row) + "\n")
        return reply

    def stream(self, messages: Sequence[Message], options: ChatOptions) -> ChatStream:
        return self.model.stream(messages, options)

    def count_tokens(self, text: str) -> int:
        return self.model.count_tokens(text)

    async def aclose(self) -> None:
        await self.model.aclose()
