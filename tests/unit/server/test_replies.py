"""Turn replies are encoded once by pydantic's serializer: the same JSON FastAPI's generic encoder made."""

from __future__ import annotations

import json

import pytest
from fastapi.encoders import jsonable_encoder

from anaphora.server.replies import Reply, encode
from anaphora.types import Citation, Passage, TurnTrace

pytestmark = pytest.mark.unit


def test_models_inside_the_content_encode_as_fastapis_encoder_made_them() -> None:
    passage = Passage(id="p1", text="Kestrel runs on ARM — «arm64» too.\nSecond line.", score=float("nan"))
    trace = TurnTrace(question="And on ARM?", retrieved=[passage])
    content = {"citations": [Citation(id="p1", source="install.md")], "trace": trace, "n": float("inf")}
    expected = jsonable_encoder(content)
    expected["trace"]["retrieved"][0]["score"] = None  # FastAPI made non-finite floats null before json.dumps
    expected["n"] = None
    assert json.loads(encode(content)) == expected
    assert b"\n" not in encode(content)  # one line: an SSE event's data fits on it


def test_a_reply_is_json_with_its_headers() -> None:
    reply = Reply({"ok": True, "trace": TurnTrace(question="q")}, headers={"Server-Timing": "engine;dur=1.00"})
    assert reply.media_type == "application/json" and reply.headers["server-timing"] == "engine;dur=1.00"
    assert json.loads(reply.body)["trace"]["question"] == "q"
