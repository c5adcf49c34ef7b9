"""The support check: units, risky tokens, verdicts; what drop and mark modes do with them."""

from __future__ import annotations

import pytest

from anaphora.answering.support import SupportChecker, risky_tokens, split_units, strip_markers
from anaphora.pipeline.check import LEFT_OUT, Judged, UnitRelease
from anaphora.types import Passage

pytestmark = pytest.mark.unit

PASSAGES = [
    Passage(
        id="mem",
        text="The Kestrel agent needs 512 MiB of memory per node. Set it with helm install kestrel "
        "--set agent.memory=512Mi. See https://kestrel.example.org/docs/limits for the limits.",
    ),
    Passage(
        id="arm",
        text="On ARM nodes, use the kestrel-arm64 image, version 2.4.1 or later. Call support at +1 415 555 0100.",
    ),
    Passage(id="de", text="Der Agent benötigt 512 MiB Arbeitsspeicher pro Knoten."),
]


def checker(threshold: float = 0.6) -> SupportChecker:
    return SupportChecker(PASSAGES, ["How much memory does the Kestrel agent need?"], threshold=threshold)


def verdict(text: str):
    return checker().check(split_units(text)[0])


# --- units ------------------------------------------------------------------------------------------------------


def test_units_are_sentences_items_code_blocks_and_rows_and_join_back() -> None:
    text = (
        "Install it first. Then check the pods!\n\n- one item\n- another item\n\n```bash\nhelm install k\n"
        "kubectl get pods\n```\n| a | b |\n| 1 | 2 |\nDone."
    )
    units = split_units(text)
    assert [u.kind for u in units] == ["sentence", "sentence", "item", "item", "code", "row", "row", "sentence"]
    assert units[4].text == "```bash\nhelm install k\nkubectl get pods\n```"
    assert "".join(u.text + u.separator for u in units) == text


def test_splitting_is_prefix_stable() -> None:
    text = "First point here. Second one follows. Third ends it."
    whole = split_units(text)
    for cut in range(1, len(text)):
        prefix = split_units(text[:cut])
        assert prefix[:-1] == whole[: len(prefix) - 1]


def test_decimals_and_abbreviations_do_not_split_a_sentence() -> None:
    assert len(split_units("Use version 2.4.1 or later, e.g.the arm64 image.")) == 1
    # an abbreviation before a lower-case word ends no sentence: "etc. that ..." is one sentence, not a fragment
    text = "Any tool like Nomad, Ansible, etc. that defines labels works. It also works with e.g. a compose file."
    assert [u.text for u in split_units(text)] == [
        "Any tool like Nomad, Ansible, etc. that defines labels works.",
        "It also works with e.g. a compose file.",
    ]
    # a chat message's sentences in lower case still end at their full stops
    assert len(split_units("context: we're multi-tenant. tenant `payments` keeps logs 90 days.")) == 2


# --- risky tokens -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "token"),
    [
        ("Run `kubectl get pods` now.", "kubectl get pods"),
        ("Pass --force to it.", "--force"),
        ("Use -n kestrel.", "-n"),
        ("It listens on port 8080.", "8080"),
        ("Edit /etc/kestrel/config.yaml first.", "/etc/kestrel/config.yaml"),
        ("Open https://example.com/x today.", "https://example.com/x"),
        ("Mail ops@example.com.", "ops@example.com"),
        ("Use version v2.4.1.", "v2.4.1"),
        ("It runs as a DaemonSet.", "daemonset"),
        ("Set agent_memory high.", "agent_memory"),
        ("It costs 1,000 dollars.", "1000"),
    ],
)
def test_risky_tokens_are_found_and_normalised(text: str, token: str) -> None:
    assert token in risky_tokens(text)


def test_ordinary_words_and_citation_markers_are_not_risky() -> None:
    assert risky_tokens(strip_markers("Install the Helm chart into its own namespace [install.md#2].")) == []
    assert strip_markers("See [click me](https://x.org) [a.md#1].", {"a.md#1"}) == "See [click me](https://x.org)."


# --- verdicts ---------------------------------------------------------------------------------------------------


def test_a_sentence_from_a_passage_is_supported_by_it() -> None:
    result = verdict("The Kestrel agent needs 512 MiB of memory per node.")
    assert result.verdict == "supported" and result.passage_id == "mem" and result.precision == 1.0


def test_a_paraphrase_with_the_same_facts_passes() -> None:
    result = verdict("Each node's Kestrel agent needs 512 MiB memory.")
    assert result.verdict == "supported" and result.passage_id == "mem"


def test_a_number_changed_by_one_digit_fails() -> None:
    result = verdict("The Kestrel agent needs 513 MiB of memory per node.")
    assert result.verdict == "unsupported" and "513" in result.missing


def test_an_invented_flag_fails_even_in_a_supported_sentence() -> None:
    result = verdict("Set it with helm install kestrel --set agent.memory=512Mi --force.")
    assert result.verdict == "unsupported" and result.missing == ["--force"]


def test_the_real_command_passes() -> None:
    assert verdict("Set it with helm install kestrel --set agent.memory=512Mi.").verdict == "supported"


def test_an_invented_url_and_phone_number_fail_and_the_real_ones_pass() -> None:
    assert verdict("See https://kestrel.example.org/docs/limits for the limits.").verdict == "supported"
    assert verdict("See https://kestrel.example.com/docs/limits for the limits.").verdict == "unsupported"
    assert verdict("Call support at +1 415 555 0100.").verdict == "supported"
    assert verdict("Call support at +1 415 555 0199.").verdict == "unsupported"


def test_a_version_must_match() -> None:
    assert verdict("Use the kestrel-arm64 image, version 2.4.1 or later.").verdict == "supported"
    assert verdict("Use the kestrel-arm64 image, version 2.5.1 or later.").verdict == "unsupported"


def test_a_sentence_no_passage_supports_fails_on_its_words() -> None:
    result = verdict("Kestrel was written by a team of volcanologists in Iceland.")
    assert result.verdict == "unsupported" and result.precision < 0.6 and "threshold" in result.reason


def test_a_unit_in_another_language_is_checked_against_that_language() -> None:
    assert verdict("Der Agent benötigt 512 MiB Arbeitsspeicher.").verdict == "supported"
    assert verdict("Der Agent benötigt 1024 MiB Arbeitsspeicher.").verdict == "unsupported"
    assert verdict("Der Agent läuft nur auf Vulkanen in Island.").verdict == "unsupported"


def test_the_conversation_supports_what_it_holds() -> None:
    result = verdict("How much memory does the Kestrel agent need?")
    assert result.verdict == "supported"


def test_filler_makes_no_claim() -> None:
    assert verdict("Here is how:").verdict == "filler"


# --- drop mode ----------------------------------------------------------------------------------------------------


ANSWER = (
    "Here is how: the Kestrel agent needs 512 MiB of memory per node [arm]. "
    "Then run kestrel tune --turbo to double it. "
    "Use the kestrel-arm64 image, version 2.4.1 or later."
)


def test_drop_keeps_supported_units_and_corrects_their_citations() -> None:
    judged = Judged(checker(), ANSWER, {p.id for p in PASSAGES})
    kept = "".join(before + text for before, text in judged.pieces())
    assert "--turbo" not in kept
    assert kept == (
        "Here is how: the Kestrel agent needs 512 MiB of memory per node [mem]. "
        "Use the kestrel-arm64 image, version 2.4.1 or later [arm]."
    )
    assert judged.dropped() == 1
    assert [v.kept for v in judged.report(drop=True)] == [True, False, True]


def test_mark_keeps_the_text_and_reports_every_verdict() -> None:
    judged = Judged(checker(), ANSWER, {p.id for p in PASSAGES})
    report = judged.report(drop=False)
    assert [v.verdict for v in report] == ["supported", "unsupported", "supported"]
    assert all(v.kept for v in report)
    assert [v.passage_id for v in report] == ["mem", None, "arm"]


class Collect:
    def __init__(self) -> None:
        self.items: list[str] = []

    def __call__(self, item: str) -> None:
        self.items.append(item)


@pytest.mark.parametrize("piece", [1, 3, 7, 1000])
def test_the_release_never_sends_a_dropped_unit_and_adds_up_to_the_answer(piece: int) -> None:
    sent = Collect()
    release = UnitRelease(checker(), {p.id for p in PASSAGES}, sent)
    for start in range(0, len(ANSWER), piece):
        release.add(ANSWER[start : start + piece])
        assert "turbo" not in "".join(s for s in sent.items if s)  # never, at any point of the stream
    streamed = release.flush()
    judged = Judged(checker(), ANSWER, {p.id for p in PASSAGES})
    assert streamed == "".join(before + text for before, text in judged.pieces())
    assert "".join(s for s in sent.items if s) == streamed


def test_the_release_sends_a_finished_sentence_before_the_next_arrives() -> None:
    sent = Collect()
    release = UnitRelease(checker(), set(), sent)
    release.add("The Kestrel agent needs 512 MiB of memory per node. ")
    assert sent.items and "512 MiB" in sent.items[0]


def test_strip_markers_and_the_left_out_note_are_fixed_text() -> None:
    assert strip_markers("It works [a]. Really [a, b].") == "It works. Really."
    # plain words a reader can act on (issue 25: "(Unsupported text left out.)" was not), and where to look
    assert LEFT_OUT.startswith("(") and "was left out" in LEFT_OUT and "documents did not support it" in LEFT_OUT
