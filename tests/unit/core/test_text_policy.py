"""One edge policy for text that cannot be encoded (lone surrogates, NUL): refused with a clear error by the HTTP
API, the CLI and ingestion alike, and nothing is stored. Found by the hostile-input probe (issue 16): a lone
surrogate in a message used to give a 500 (the embedding-cache key and the stored turn could not be encoded)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from anaphora import Anaphora, InputError, Settings
from anaphora.text_policy import describe_invalid, require_valid_text
from tests.server_harness import components_for, serve, settings_for

pytestmark = pytest.mark.unit
LONE = "install \ud800 kestrel"


def test_the_policy_refuses_lone_surrogates_and_nul_and_accepts_real_text() -> None:
    assert describe_invalid("Kestrel 🦅 on ARM, naïve café") is None  # astral characters are proper pairs in str
    assert describe_invalid(LONE) == "holds an unpaired surrogate (U+D800) at character 8"
    assert describe_invalid("a\udfffb") == "holds an unpaired surrogate (U+DFFF) at character 1"
    assert describe_invalid("a\x00b") == "holds a NUL character at character 1"
    with pytest.raises(InputError, match="the question holds an unpaired surrogate") as refused:
        require_valid_text(LONE, "the question")
    assert refused.value.hint


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    settings = settings_for(tmp_path_factory.mktemp("surrogates"))
    with serve(settings, components_for(settings)) as server:
        yield server


def raw_json(body: dict) -> dict:
    # json.dumps keeps a lone surrogate as the escape "\ud800", exactly what the probe sent
    return {"content": json.dumps(body).encode(), "headers": {"content-type": "application/json"}}


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("text", [LONE, "a\x00b"])
def test_chat_completions_refuse_unencodable_content_with_422_naming_the_field(running, stream, text) -> None:
    with running.client() as http:
        body = {"messages": [{"role": "user", "content": text}], "stream": stream}
        response = http.post("/v1/chat/completions", **raw_json(body))
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert error["type"] == "validation_error" and "messages[0].content" in error["message"], error
        assert error["hint"]
        parts = {"messages": [{"role": "user", "content": [{"type": "text", "text": text}]}], "stream": stream}
        assert http.post("/v1/chat/completions", **raw_json(parts)).status_code == 422


@pytest.mark.parametrize("stream", [False, True])
def test_conversation_append_refuses_a_lone_surrogate_and_stores_nothing(running, stream) -> None:
    with running.client() as http:
        conversation = http.post("/v1/conversations", json={}).json()["id"]
        url = f"/v1/conversations/{conversation}/messages"
        response = http.post(url, **raw_json({"content": LONE, "stream": stream}))
        assert response.status_code == 422, response.text
        assert "content" in response.json()["error"]["message"]
        assert http.get(f"/v1/conversations/{conversation}").json()["turn_count"] == 0
        titled = http.post("/v1/conversations", **raw_json({"title": LONE}))
        assert titled.status_code == 422 and "title" in titled.json()["error"]["message"]


def test_the_library_facade_refuses_a_lone_surrogate(tmp_path: Path) -> None:
    with Anaphora(Settings(data_dir=tmp_path, chat_model="fake", embedder="hashing")) as rag:
        with pytest.raises(InputError, match="unpaired surrogate"):
            rag.ask(LONE)
        with pytest.raises(InputError, match="unpaired surrogate"):
            list(rag.stream(LONE))
        assert rag.conversations() == []


def test_the_cli_reports_an_undecodable_argument_without_a_traceback(tmp_path: Path) -> None:
    # bytes that are not UTF-8 on the command line reach Python as lone surrogates (surrogateescape)
    environment = {
        **os.environ,
        "ANAPHORA_CHAT_MODEL": "fake",
        "ANAPHORA_EMBEDDER": "hashing",
        "ANAPHORA_DATA_DIR": str(tmp_path / "data"),
        "PYTHONIOENCODING": "utf-8",
    }
    result = subprocess.run(
        [os.fsencode(sys.executable), b"-m", b"anaphora", b"ask", b"install \xff kestrel"],
        capture_output=True,
        env=environment,
        timeout=120,
    )
    stderr = result.stderr.decode("utf-8", "replace")
    assert result.returncode == 1, stderr
    assert "unpaired surrogate" in stderr and "fix:" in stderr and "Traceback" not in stderr


def test_ingestion_skips_a_passage_file_with_an_escaped_lone_surrogate(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "bad.jsonl").write_text('{"id": "p1", "text": "install \\ud800 kestrel"}\n', encoding="utf-8")
    (docs / "good.md").write_text("# Good\n\nKestrel installs with Helm.\n", encoding="utf-8")
    with Anaphora(Settings(data_dir=tmp_path / "data", chat_model="fake", embedder="hashing")) as rag:
        report = rag.ingest([docs])
    assert report.added == ["good.md"]
    [(path, reason)] = report.skipped
    assert path.endswith("bad.jsonl") and "line 1" in reason and "unpaired surrogate" in reason


def test_the_chat_repl_reports_an_undecodable_line_and_goes_on(tmp_path: Path) -> None:
    environment = {
        **os.environ,
        "ANAPHORA_CHAT_MODEL": "fake",
        "ANAPHORA_EMBEDDER": "hashing",
        "ANAPHORA_DATA_DIR": str(tmp_path / "data"),
        "PYTHONIOENCODING": "utf-8:surrogateescape",
    }
    result = subprocess.run(
        [sys.executable, "-m", "anaphora", "chat"], input=b"install \xff kestrel\n/quit\n",
        capture_output=True, env=environment, timeout=120,
    )  # fmt: skip
    stderr = result.stderr.decode("utf-8", "replace")
    assert result.returncode == 0, stderr
    assert "unpaired surrogate" in stderr and "Traceback" not in stderr
    assert "resume with" in result.stdout.decode("utf-8", "replace")
