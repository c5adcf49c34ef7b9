"""Terminal escape injection (issue 16, defect 10): `ask`, `chat`, `ingest` and `conversations show` printed ANSI
and OSC sequences from file names and passage text raw, so `ESC [2J` in a document cleared the user's terminal.
Control characters are now written out (``\\x1b``), never sent."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from anaphora.cli.render import inert, shown

pytestmark = [pytest.mark.unit, pytest.mark.usefixtures("isolated_env")]
CLEAR = "\x1b[2J\x1b[H"
TITLE = "\x1b]0;pwned\x07"


def run(tmp_path: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    environment = {
        **os.environ,
        "ANAPHORA_CHAT_MODEL": "fake",
        "ANAPHORA_EMBEDDER": "hashing",
        "ANAPHORA_DATA_DIR": str(tmp_path / "data"),
        "ANAPHORA_SIMILARITY_THRESHOLD": "0",
        "COLUMNS": "300",
        "PYTHONIOENCODING": "utf-8",
    }
    return subprocess.run(
        [sys.executable, "-m", "anaphora", *args],
        input=stdin, capture_output=True, text=True, env=environment, cwd=tmp_path, timeout=120, encoding="utf-8",
    )  # fmt: skip


def test_inert_writes_control_characters_out() -> None:
    assert inert(CLEAR + "ok") == "\\x1b[2J\\x1b[Hok"
    assert inert(TITLE) == "\\x1b]0;pwned\\x07"
    assert inert("csi \x9b2J, bidi \u202e, bell \x07, nul \x00") == "csi \\x9b2J, bidi \\u202e, bell \\x07, nul \\x00"
    assert inert("caf\udce9") == "caf\\xe9"  # a file-name byte that was not UTF-8
    assert inert("lines\n\tand tabs stay, and so does ünïcode") == "lines\n\tand tabs stay, and so does ünïcode"
    assert shown("[red]x[/red]") == "\\[red]x\\[/red]"


def test_escapes_in_documents_and_file_names_reach_the_terminal_inert(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / f"evil{TITLE}.md").write_text(
        f"# Kestrel {CLEAR}install\n\nKestrel installs with Helm on Kubernetes.{CLEAR} Run helm install kestrel.\n",
        encoding="utf-8",
    )
    (docs / f"bad{CLEAR}.md").write_bytes(b"\x00\x01binary")  # skipped: its name is in the report
    ingested = run(tmp_path, "ingest", "--verbose", str(docs))
    assert ingested.returncode == 0, ingested.stderr
    assert "\x1b" not in ingested.stdout and "bad\\x1b[2J\\x1b[H.md: binary" in ingested.stdout, ingested.stdout
    asked = run(tmp_path, "ask", "--trace", "How do I install Kestrel with Helm on Kubernetes?")
    assert asked.returncode == 0, asked.stderr
    assert "\x1b" not in asked.stdout and "\x07" not in asked.stdout
    assert "\\x1b[2J" in asked.stdout, asked.stdout  # the fake model echoes the passage: shown, not obeyed
    chatted = run(tmp_path, "chat", stdin=f"install Kestrel{CLEAR} on Kubernetes?\n/quit\n")
    assert chatted.returncode == 0 and "\x1b" not in chatted.stdout, chatted.stderr
    conversation = chatted.stdout.split("--conversation ")[-1].split()[0]
    shown_turns = run(tmp_path, "conversations", "show", conversation)
    assert "\x1b" not in shown_turns.stdout and "\\x1b[2J" in shown_turns.stdout, shown_turns.stdout
    listed = run(tmp_path, "conversations", "list")
    assert "\x1b" not in listed.stdout
