"""JSON bodies encoded once, by pydantic's serializer, and the turn routes' ``Server-Timing`` header.

A route that returns a plain dict without a response model gets FastAPI's generic ``jsonable_encoder``, which walks
the whole body in Python before ``json.dumps`` walks it again; a turn's reply is large (its trace carries the
passages and the support verdicts), and that walk was the largest part of the Responses route's own time in a
profile. :class:`Reply` encodes the content in one pass of pydantic's Rust serializer instead, models inside it
included (so the content need not be ``model_dump``-ed first), with non-finite floats as null, as FastAPI's encoder
makes them.

``Server-Timing: engine;dur=<ms>`` on a turn's JSON reply is the engine's own time for the turn (loading its history,
the stages, storing it: :attr:`anaphora.server.turns.Turn.engine_ms`), so that a client can tell the service's
overhead from the engine's work (bench/load.py does).
"""

from __future__ import annotations

from typing import Any

import pydantic_core
from fastapi.responses import JSONResponse

from anaphora.server.turns import Turn


def encode(content: Any) -> bytes:
    """``content`` (dicts, lists, pydantic models, scalars) as compact UTF-8 JSON."""
    return pydantic_core.to_json(content, inf_nan_mode="null")


class Reply(JSONResponse):
    """A JSON response encoded by :func:`encode`."""

    def render(self, content: Any) -> bytes:
        return encode(content)


def turn_reply(turn: Turn, content: Any) -> Reply:
    """A finished turn's JSON reply, with the engine's time in ``Server-Timing``."""
    headers = {} if turn.engine_ms is None else {"Server-Timing": f"engine;dur={turn.engine_ms:.2f}"}
    return Reply(content, headers=headers)
