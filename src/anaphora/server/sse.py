"""Server-sent events: the wire encoding and the streaming response."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from fastapi.responses import StreamingResponse

from anaphora.server.replies import encode

DONE = "data: [DONE]\n\n"


def event(data: dict[str, Any], name: str | None = None) -> str:
    """One ``data:`` event (preceded by ``event: name`` when named); JSON has no raw newlines, so one line carries
    it."""
    line = f"data: {encode(data).decode()}\n\n"
    return line if name is None else f"event: {name}\n{line}"


def response(events: AsyncIterator[str]) -> StreamingResponse:
    return StreamingResponse(
        events,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
