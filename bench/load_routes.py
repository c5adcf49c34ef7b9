"""The routes bench/load.py can drive, one small class each: how a client holds its conversation and asks the next
question, and where the answer's trace is. Each starts a new conversation on ``reset``.

- ``conversations``: a server-held conversation, ``POST /v1/conversations/{id}/messages``.
- ``chat``: ``POST /v1/chat/completions``; the client keeps the history and sends it whole.
- ``responses``: ``POST /v1/responses``, each turn continuing from the previous one's ``previous_response_id``.
"""

from __future__ import annotations

from typing import Any

import httpx


class ConversationArm:
    def __init__(self) -> None:
        self.conversation: str | None = None

    async def reset(self, http: httpx.AsyncClient) -> None:
        self.conversation = (await http.post("/v1/conversations", json={})).json()["id"]

    async def ask(self, http: httpx.AsyncClient, question: str) -> httpx.Response:
        return await http.post(f"/v1/conversations/{self.conversation}/messages", json={"content": question})

    def trace(self, reply: dict[str, Any]) -> dict[str, Any]:
        return reply["trace"]


class ChatArm:
    def __init__(self) -> None:
        self.history: list[dict[str, str]] = []

    async def reset(self, http: httpx.AsyncClient) -> None:
        self.history = []

    async def ask(self, http: httpx.AsyncClient, question: str) -> httpx.Response:
        messages = [*self.history, {"role": "user", "content": question}]
        response = await http.post("/v1/chat/completions", json={"model": "anaphora", "messages": messages})
        if response.status_code == 200:
            answer = response.json()["choices"][0]["message"]["content"]
            self.history = [*messages, {"role": "assistant", "content": answer}]
        return response

    def trace(self, reply: dict[str, Any]) -> dict[str, Any]:
        return reply["anaphora"]["trace"]


class ResponsesArm:
    def __init__(self) -> None:
        self.previous: str | None = None

    async def reset(self, http: httpx.AsyncClient) -> None:
        self.previous = None

    async def ask(self, http: httpx.AsyncClient, question: str) -> httpx.Response:
        body = {"model": "anaphora", "input": question, "previous_response_id": self.previous}
        response = await http.post("/v1/responses", json=body)
        if response.status_code == 200:
            self.previous = response.json()["id"]
        return response

    def trace(self, reply: dict[str, Any]) -> dict[str, Any]:
        return reply["anaphora"]["trace"]


ROUTES = {"conversations": ConversationArm, "chat": ChatArm, "responses": ResponsesArm}
