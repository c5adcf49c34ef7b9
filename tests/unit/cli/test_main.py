"""The CLI end to end with the fake model and the no-model embedder (real subprocesses for exit codes)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DEMO_SCRIPT, SAMPLE_DOCS

pytestmark = pytest.mark.unit


def run(tmp_path: Path, *args: str, stdin: str = "", env: dict[str, str] | None = None):
    environment = {
        **os.environ,
        "ANAPHORA_CHAT_MODEL": "fake",
        "ANAPHORA_EMBEDDER": "hashing",
        "ANAPHORA_DATA_DIR": str(tmp_path / "data"),
        "ANAPHORA_SIMILARITY_THRESHOLD": "0",
        "COLUMNS": "200",
        **(env or {}),
    }
    return subprocess.run(
        [sys.executable, "-m", "anaphora", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=environment,
        cwd=tmp_path,
        timeout=120,
    )


def test_ingest_then_reingest_is_idempotent(tmp_path: Path) -> None:
    first = run(tmp_path, "ingest", str(SAMPLE_DOCS))
    assert first.returncode == 0, first.stderr
    assert "12 added" in first.stdout
    second = run(tmp_path, "ingest", str(SAMPLE_DOCS))
    assert "0 added" in second.stdout and "12 unchanged" in second.stdout and "0 chunks written" in second.stdout


def test_ask_prints_answer_sources_and_trace(tmp_path: Path) -> None:
    run(tmp_path, "ingest", str(SAMPLE_DOCS))
    result = run(tmp_path, "ask", "--trace", "How do I install Kestrel with Helm on Kubernetes?")
    assert result.returncode == 0, result.stderr
    assert "Sources" in result.stdout and "[install-kubernetes.md#" in result.stdout
    for column in ("Turn trace", "retrieve", "query (question)", "model calls: 1", "Retrieved"):
        assert column in result.stdout


def test_the_trace_says_how_much_each_searched_query_counted(tmp_path: Path) -> None:
    """A follow-up searches its expansion and the message: the trace gives each one's weight in the fusion (or
    "left out"), so an alternate listed is not taken for one that was used."""
    run(tmp_path, "ingest", str(SAMPLE_DOCS))
    first = run(tmp_path, "ask", "--remember", "How do I install Kestrel on Kubernetes?")
    conversation = first.stdout.split("continue with -c ")[-1].split()[0].rstrip(",;.)")
    result = run(tmp_path, "ask", "-c", conversation, "--trace", "And on ARM?")
    assert result.returncode == 0, result.stderr
    assert re.search(r"query \(expansion\) \((weight \d\.\d\d|left out)\):", result.stdout)
    assert re.search(r"also \((weight \d\.\d\d|left out)\): And on ARM\?", result.stdout)


def test_ask_says_whether_the_turn_is_remembered_and_remember_keeps_it(tmp_path: Path) -> None:
    alone = run(tmp_path, "ask", "I run Fluent Bit 2.1 on ARM64 nodes")
    assert alone.returncode == 0, alone.stderr
    assert "Not remembered" in alone.stdout and "--remember" in alone.stdout
    assert "This chat is not remembered" in alone.stdout  # the acknowledgement does not promise to remember
    assert run(tmp_path, "memory", "list").stdout.count("Fluent Bit") == 0
    kept = run(tmp_path, "ask", "--remember", "I run Fluent Bit 2.1 on ARM64 nodes")
    assert "I'll remember that" in kept.stdout and "Remembered (conversation" in kept.stdout
    listed = run(tmp_path, "memory", "list").stdout
    assert "the user runs Fluent Bit 2.1 on ARM64 nodes" in listed and ", turn 1," in listed
    temporary = run(tmp_path, "ask", "--temporary", "hello")
    assert "remembered" not in temporary.stdout.lower()


def test_chat_repl_persists_and_resumes(tmp_path: Path) -> None:
    run(tmp_path, "ingest", str(SAMPLE_DOCS))
    session = run(tmp_path, "chat", stdin="How do I install Kestrel on Kubernetes?\nAnd on ARM?\n/quit\n")
    assert session.returncode == 0, session.stderr
    conversation = session.stdout.split("--conversation ")[-1].split()[0]
    listed = run(tmp_path, "conversations", "list")
    assert conversation in listed.stdout and "2 turns" in listed.stdout
    resumed = run(tmp_path, "chat", "--conversation", conversation, stdin="What about memory limits?\n")
    assert resumed.returncode == 0
    shown = run(tmp_path, "conversations", "show", conversation)
    assert shown.stdout.count("you>") == 3 and "And on ARM?" in shown.stdout
    deleted = run(tmp_path, "conversations", "delete", conversation)
    assert deleted.returncode == 0
    assert conversation not in run(tmp_path, "conversations", "list").stdout


def test_demo_plays_the_script(tmp_path: Path) -> None:
    result = run(tmp_path, "demo", "--docs", str(SAMPLE_DOCS), "--script", str(DEMO_SCRIPT))
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("you>") >= 7
    assert result.stdout.count("Sources") >= 5


def test_the_demo_answers_from_memory_in_a_new_conversation_with_provenance(tmp_path: Path) -> None:
    """The script's last turn starts a new conversation: the chart version the user stated in the first one (no
    document has it) is recalled, cited and shown with where the user said it. (The hashing embedder's cosines
    are not MiniLM's: the memory floor is lowered as the similarity floor is; tests/integration/test_demo_memory.py
    plays it with the embedded defaults.)"""
    env = {"ANAPHORA_MEMORY_MIN_SCORE": "0.2", "ANAPHORA_ANSWER_MODE": "extractive"}  # as with the embedded model
    result = run(tmp_path, "demo", "--docs", str(SAMPLE_DOCS), "--script", str(DEMO_SCRIPT), env=env)
    assert result.returncode == 0, result.stderr
    first, second = re.findall(r"conversation ([0-9a-f]{12}) stored", result.stdout)
    stated = next(n for n, t in enumerate(json.loads(DEMO_SCRIPT.read_text())["turns"]) if "2.7.1" in t["user"])
    later = result.stdout.split(f"conversation {second}: a week later", 1)[1]
    answer, shown = later.split("From memory", 1)
    assert "2.7.1" in answer and "[memory:" in answer
    assert f"you said it in conversation {first}, turn {stated + 1}," in shown  # turns counted from 1


@pytest.mark.parametrize(
    ("args", "env", "message", "fix"),
    [
        (("ask", "hi"), {"ANAPHORA_CHAT_MODEL": "gguf:/nowhere/model.gguf"}, "no GGUF model file", "gguf:"),
        (("ask", "hi"), {"ANAPHORA_CHAT_MODEL": "telepathy"}, "unknown chat model", "use one of"),
        (("ask", "hi"), {"ANAPHORA_TOP_K": "99"}, "top_k cannot exceed candidates", "ANAPHORA_"),
        (("ask", "-c", "nope", "hi"), {}, "no conversation 'nope'", "conversations list"),
        (("ask", "   "), {}, "the question is empty", "type a question"),
        (("demo", "--script", "missing.json"), {}, "no demo script", "--script"),
        (("--config", "missing.toml", "ask", "hi"), {}, "does not exist", "--config"),
    ],
)
def test_errors_say_what_and_how_to_fix(tmp_path: Path, args, env, message, fix) -> None:
    result = run(tmp_path, *args, env=env)
    assert result.returncode == 1
    assert "error:" in result.stderr and message in result.stderr
    assert "fix:" in result.stderr and fix in result.stderr
    assert "Traceback" not in result.stderr


def test_ingest_reports_bad_files_and_keeps_good_ones(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text("# Good\n\nKestrel keeps logs safe.\n")
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    (docs / "image.png").write_bytes(b"\x89PNG")
    result = run(tmp_path, "ingest", "--verbose", str(docs))
    assert result.returncode == 0
    assert "1 added" in result.stdout
    assert "broken.pdf" in result.stdout and "not a readable PDF" in result.stdout
    assert "image.png" in result.stdout and "unsupported" in result.stdout


def test_ask_and_chat_continue_a_response_chain_and_branch_it(tmp_path: Path) -> None:
    """Each stored answer names its response; --continue goes on from it: in its conversation when it is the
    latest, else in a branch that holds the chain up to it (the original keeps every turn)."""

    def response_of(output: str) -> str:
        found = re.findall(r"response (resp_\w+_\d+)", output)
        assert found, output
        return found[-1]

    run(tmp_path, "ingest", str(SAMPLE_DOCS))
    first = run(tmp_path, "ask", "--remember", "How do I install Kestrel on Kubernetes?")
    assert first.returncode == 0, first.stderr
    root = response_of(first.stdout)
    conversation = root.removeprefix("resp_").rsplit("_", 1)[0]
    second = run(tmp_path, "ask", "--continue", root, "And on ARM?")
    assert second.returncode == 0, second.stderr
    assert response_of(second.stdout) == f"resp_{conversation}_1"

    chatted = run(tmp_path, "chat", "--continue", root, stdin="What about its memory limits?\nAnd the CPU?\n/quit\n")
    assert chatted.returncode == 0, chatted.stderr
    branch = response_of(chatted.stdout).removeprefix("resp_").rsplit("_", 1)[0]
    assert branch != conversation and response_of(chatted.stdout) == f"resp_{branch}_2"
    shown = run(tmp_path, "conversations", "show", branch).stdout
    assert [line.split("> ", 1)[1] for line in shown.splitlines() if line.startswith("you> ")] == [
        "How do I install Kestrel on Kubernetes?",
        "What about its memory limits?",
        "And the CPU?",
    ]
    assert f"resp_{branch}_0" in shown
    original = run(tmp_path, "conversations", "show", conversation).stdout
    assert original.count("you> ") == 2

    unknown = run(tmp_path, "ask", "--continue", f"resp_{conversation}_9", "And on ARM?")
    assert unknown.returncode == 1 and "no response" in unknown.stderr
