"""``anaphora feedback`` and ``anaphora report`` end to end (real subprocesses, the fake model, hashing embedder)."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest

from tests.conftest import SAMPLE_DOCS
from tests.unit.cli.test_main import run

pytestmark = pytest.mark.unit


def test_vote_show_report_and_withdraw(tmp_path: Path) -> None:
    assert run(tmp_path, "ingest", str(SAMPLE_DOCS)).returncode == 0
    asked = run(tmp_path, "ask", "--remember", "How do I install Kestrel on Kubernetes?")
    assert asked.returncode == 0, asked.stderr
    conversation = re.search(r"conversation ([0-9a-f]{12})", asked.stdout).group(1)

    voted = run(tmp_path, "feedback", f"{conversation}:0", "down", "--comment", "no ARM steps")
    assert voted.returncode == 0, voted.stderr
    assert f'voted down on {conversation}:0 with "no ARM steps"' in voted.stdout
    shown = run(tmp_path, "conversations", "show", conversation)
    assert f'turn {conversation}:0 · voted down "no ARM steps"' in shown.stdout

    again = run(tmp_path, "feedback", f"resp_{conversation}_0", "up")  # a response id names the same turn
    assert again.returncode == 0 and f"voted up on {conversation}:0" in again.stdout

    report = run(tmp_path, "report", "--since", "1d", "--format", "json")
    assert report.returncode == 0, report.stderr
    body = json.loads(report.stdout)
    assert body["votes"] == {"up": 1, "down": 0} and body["turns"] == 1
    assert body["pages_cited_most"] and body["top_topics"][0]["turns"] == 1
    rows = list(csv.reader(io.StringIO(run(tmp_path, "report", "--format", "csv").stdout)))
    assert rows[0][0] == "section" and ["votes", "up", "1", "", "", "", ""] in rows
    text = run(tmp_path, "report")
    assert "Asked most (by what was searched):" in text.stdout and "Pages never cited" in text.stdout

    cleared = run(tmp_path, "feedback", f"{conversation}:0", "clear")
    assert "withdrawn" in cleared.stdout
    assert "voted" not in run(tmp_path, "conversations", "show", conversation).stdout


def test_bad_turns_and_ranges_say_how_to_fix_them(tmp_path: Path) -> None:
    bad = run(tmp_path, "feedback", "nonsense", "up")
    assert bad.returncode == 1 and "CONVERSATION:INDEX" in bad.stderr
    missing = run(tmp_path, "feedback", "abc123:4", "up")
    assert missing.returncode == 1 and "no turn 4" in missing.stderr and "conversations show" in missing.stderr
    backwards = run(tmp_path, "report", "--since", "1d", "--until", "2d")
    assert backwards.returncode == 1 and "ends before it starts" in backwards.stderr
    garbled = run(tmp_path, "report", "--since", "yesterday-ish")
    assert garbled.returncode == 1 and "7d" in garbled.stderr
