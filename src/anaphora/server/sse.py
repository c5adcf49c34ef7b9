"""Server-sent events: the wire encoding and the streaming response."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi.responses import StreamingResponse

DONE = "data: [DONE]\n\n"


def event(data: dict[str, Any]) -> str:
    """One ``data:`` event; JSON has no raw newlines, so one line carries it."""
    return f"data: {json.dumps(data, ensure_ascii=False, separators=(',', ':'))}\n\n"


def response(events: AsyncIterator[str]) -> StreamingResponse:
    return StreamingResponse(
        events,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
