"""The extractive answerer quotes sentences that answer; a sentence that asks a question is never quoted."""

from __future__ import annotations

import pytest

from anaphora.answering.extractive import (
    ExtractiveAnswerer,
    entry_name,
    in_context,
    in_release,
    passage_units,
    quotable_units,
    release_of,
    under_name,
    with_lead_ins,
)
from anaphora.embeddings.hashing import HashingEmbedder
from anaphora.types import Passage

pytestmark = pytest.mark.unit


async def test_a_question_in_a_source_is_never_quoted_as_an_answer() -> None:
    faq = Passage(
        id="faq.md#1",
        text="How much disk does the Kestrel spool need? The Kestrel spool needs 2 GiB of free disk by default.",
    )
    memory = Passage(id="memory:1", text="How much disk does the Kestrel spool need on my nodes?")
    answer = await ExtractiveAnswerer(HashingEmbedder(), min_relevance=0.0).answer(
        "Kestrel spool disk", "How much disk does the Kestrel spool need?", [faq, memory]
    )
    assert answer is not None
    quoted = [point.text for point in answer.points]
    assert quoted == ["The Kestrel spool needs 2 GiB of free disk by default."]
    assert "?" not in answer.text


async def test_only_questions_give_no_answer() -> None:
    asked = Passage(id="memory:2", text="Which chart version should I run on ARM nodes?")
    answerer = ExtractiveAnswerer(HashingEmbedder(), min_relevance=0.0)
    assert await answerer.answer("chart version ARM", "Which chart version on ARM?", [asked]) is None


async def test_the_most_relevant_point_leads_and_the_others_keep_their_passages_order() -> None:
    """A recalled memory is shown after the documents; when it is what answers the question, it leads the answer."""
    document = Passage(
        id="install.md#2", text="The chart version on the staging cluster is what the user's values pin."
    )
    other = Passage(id="upgrading.md#1", text="Upgrading the chart replaces one agent pod at a time on each node.")
    memory = Passage(id="memory:3", text="The user's chart version is 2.7.1 on the staging cluster.")
    answer = await ExtractiveAnswerer(HashingEmbedder(), min_relevance=0.0).answer(
        "user's chart version staging", "Which chart version does the user run on staging?", [document, other], [memory]
    )
    assert answer is not None
    ids = [point.passage_id for point in answer.points]
    assert ids[0] == "memory:3"
    assert answer.text.startswith("The user's chart version is 2.7.1")
    rest = [(p.order, p.position) for p in answer.points[1:]]
    assert rest == sorted(rest) and len(rest) >= 1


async def test_a_sentence_that_introduces_what_follows_is_quoted_with_it() -> None:
    passage = Passage(
        id="upgrading.md#6",
        text="Upgrade the chart release with the following command:\n\n"
        "```bash\nhelm upgrade kestrel kestrel/kestrel\n```\n\nThe upgrade replaces one agent pod at a time.",
    )
    answer = await ExtractiveAnswerer(HashingEmbedder(), min_relevance=0.0).answer(
        "upgrade the chart release", "How do I upgrade the chart release?", [passage]
    )
    assert answer is not None
    assert all(not point.text.endswith(":") for point in answer.points)
    lead = answer.points[0]
    assert lead.kind == "lead-in"
    assert (
        lead.text
        == "Upgrade the chart release with the following command:\n\n```bash\nhelm upgrade kestrel kestrel/kestrel\n```"
    )
    assert answer.text.startswith(lead.text + "\n[upgrading.md#6]")
    assert [kind for *_, kind in quotable_units("Then run the following:\n\nThe agent pod restarts on each node.")] == [
        "sentence"
    ]


def test_a_lead_in_introduces_the_blocks_of_one_language_that_follow_it() -> None:
    """Three commands in a row under "create a user, a vhost and let the user in:" are one step quoted whole; a
    config shown as YAML and then as TOML is two alternatives, so only the first comes with its lead-in."""
    steps = (
        "Create a user and a vhost and let the user into it:\n\n```console\n$ ctl add_user app secret\n```\n\n"
        "```console\n$ ctl add_vhost apps\n```\n\n```console\n$ ctl set_permissions -p apps app\n```"
    )
    leads = [text for _, text, kind in quotable_units(steps) if kind == "lead-in"]
    assert len(leads) == 1 and all(c in leads[0] for c in ("add_user", "add_vhost", "set_permissions"))
    alternatives = 'Set the retention:\n\n```yaml\nretention: 7d\n```\n\n```toml\nretention = "7d"\n```'
    leads = [text for _, text, kind in quotable_units(alternatives) if kind == "lead-in"]
    assert leads == ["Set the retention:\n\n```yaml\nretention: 7d\n```"]


async def test_a_table_row_is_quoted_under_its_tables_header() -> None:
    passage = Passage(
        id="install.md#11",
        text="The values most installations change.\n\n| Value | Default | Description |\n|---|---|---|\n"
        "| `image.repository` | `ghcr.io/kestrel-project/kestrel` | Container image |\n"
        "| `resources.limits.memory` | `512Mi` | Memory limit of each agent pod |",
    )
    answer = await ExtractiveAnswerer(HashingEmbedder(), min_relevance=0.0, max_points=1).answer(
        "memory limit agent pod", "What is the memory limit of each agent pod?", [passage]
    )
    assert answer is not None
    [point] = answer.points
    assert point.kind == "row"
    assert point.text.splitlines() == [
        "| Value | Default | Description |",
        "|---|---|---|",
        "| `resources.limits.memory` | `512Mi` | Memory limit of each agent pod |",
    ]
    assert answer.text.endswith("|\n\n[install.md#11]")  # the marker is not read as one more row
    rows = [text for _, text, kind in quotable_units(passage.text) if kind == "row"]
    assert len(rows) == 2 and rows[0].endswith("Container image |")
    assert [kind for *_, kind in quotable_units("| a | b |\n| c | d |")] == []  # no delimiter row: no table


def test_a_sentence_wrapped_over_two_lines_is_one_unit() -> None:
    text = "The plugin reads logs from Docker\ncontainers and ships them on.\n\n```bash\ndocker plugin ls\n```"
    units = quotable_units(text)
    assert units[0] == (0, "The plugin reads logs from Docker containers and ships them on.", "sentence")
    assert [kind for *_, kind in units] == ["sentence", "code", "lead-in"]  # the sentence also introduces the code


async def test_a_sentence_is_quoted_with_the_next_one_when_that_names_the_settings() -> None:
    """The sentence that matches the question ("increase the rate limits") is seldom the one that says what to
    set; the next sentence of its paragraph, which names the settings, comes with it."""
    passage = Passage(
        id="limits.md#3",
        text="This limit is enforced when a tenant sends logs faster than its ingestion rate limit.\n\n"
        "One solution for rate limited pushes is to increase the rate limits of the tenant. "
        "The config options to use are `ingestion_rate_mb` and `ingestion_burst_size_mb`.",
    )
    answer = await ExtractiveAnswerer(HashingEmbedder(), min_relevance=0.0, max_points=1).answer(
        "rate limited pushes increase rate limits", "Rate limited pushes: which limits do I increase?", [passage]
    )
    assert answer is not None
    assert answer.points[0].text.startswith("One solution for rate limited pushes")
    assert "`ingestion_rate_mb` and `ingestion_burst_size_mb`" in answer.points[0].text


@pytest.mark.parametrize(
    ("text", "question", "quoted"),
    [
        (  # the condition the chosen sentence holds under comes first
            "When configured with `auth_enabled: false`, Loki uses a single tenant. The `X-Scope-OrgID` header is "
            "not required in Loki API requests.",
            "is the X-Scope-OrgID header required in API requests?",
            "When configured with `auth_enabled: false`, Loki uses a single tenant. The `X-Scope-OrgID` header",
        ),
        (  # a sentence that refers back is quoted with what it refers to
            "Include a `tls` field in the router definition. This field tells Traefik that the router should "
            "process only TLS connections.",
            "will the router process only TLS connections?",
            "Include a `tls` field in the router definition. This field tells Traefik",
        ),
    ],
)
async def test_a_sentence_is_quoted_with_the_one_before_it_that_it_depends_on(
    text: str, question: str, quoted: str
) -> None:
    passage = Passage(id="page.md#1", text=text)
    answer = await ExtractiveAnswerer(HashingEmbedder(), min_relevance=0.0, max_points=1).answer(
        question, question, [passage]
    )
    assert answer is not None and answer.points[0].text.startswith(quoted)


# a sentence that makes its paragraph too long to be quoted whole (PARAGRAPH_WORDS)
LONG = " ".join(["Operators of large clusters read the capacity planning guide before they change any of these"] * 5)


async def test_a_sentence_of_a_short_paragraph_is_quoted_with_the_whole_paragraph() -> None:
    """The sentence that matches is seldom all the paragraph says: here the operator it applies to is in the
    sentence before the one before it."""
    text = (
        "When using `|~` and `!~`, RE2 syntax regex may be used. The matching is case-sensitive by default. "
        "Switch to case-insensitive matching by prefixing the regular expression with `(?i)`.\n\n"
        "Line filters are best placed at the beginning of a pipeline."
    )
    question = "how do I switch to case-insensitive matching?"
    answer = await ExtractiveAnswerer(HashingEmbedder(), min_relevance=0.0, max_points=1).answer(
        question, question, [Passage(id="page.md#1", text=text)]
    )
    assert answer is not None
    assert answer.points[0].text == text.split("\n\n")[0]  # the paragraph, not the next one
    long = Passage(id="page.md#2", text=f"{text.split(chr(10))[0]} {LONG}")
    answer = await ExtractiveAnswerer(HashingEmbedder(), min_relevance=0.0, max_points=1).answer(
        question, question, [long]
    )
    assert answer is not None and answer.points[0].text.startswith("Switch to case-insensitive")  # too long: alone


async def test_a_sentence_close_to_the_expanded_query_is_quoted_for_a_message_close_to_nothing() -> None:
    """ "does any of what you told me change?" names no topic; its expansion does. A sentence needs to be close to
    the query or the message, not to their mean, which a message with no topic halves."""
    message = "does any of what you told me change?"
    passage = Passage(id="page.md#1", text="Use the swarm provider when Traefik runs on Docker Swarm managers.")
    answer = await ExtractiveAnswerer(HashingEmbedder()).answer(f"{message} docker swarm", message, [passage])
    assert answer is not None and answer.points[0].passage_id == "page.md#1"


async def test_a_memorys_sentence_is_quoted_alone() -> None:
    """What the user said is a few statements, each its own: not a paragraph of a page to quote whole."""
    said = Passage(
        id="memory:1", text="We moved to Loki 3.2 last month. The team also hired two new SREs.", source="memory"
    )
    question = "which Loki version did we move to?"
    answer = await ExtractiveAnswerer(HashingEmbedder(), min_relevance=0.0, max_points=1).answer(
        question, question, [], [said]
    )
    assert answer is not None and answer.points[0].text == "We moved to Loki 3.2 last month."


def test_a_sentence_two_points_need_is_quoted_once() -> None:
    """The first point takes the next sentence (it names `b`); the second refers back to that same sentence, which
    is not quoted a second time in front of it."""
    passage = Passage(
        id="page.md#1",
        text=f"Set `a` before anything else. The `b` option then applies. This option needs `c` too. {LONG}",
    )
    found = ExtractiveAnswerer.candidates([passage])
    first, second = (next(n for n, c in enumerate(found) if c.text.startswith(s)) for s in ("Set", "This"))
    texts = in_context(found, [first, second])
    assert texts[first] == "Set `a` before anything else. The `b` option then applies."
    assert texts[second] == "This option needs `c` too."


async def test_a_sentence_that_stands_alone_is_quoted_alone() -> None:
    passage = Passage(
        id="page.md#1",
        text=f"Loki stores chunks in object storage. The compactor deletes chunks past the retention period. {LONG}",
    )
    answer = await ExtractiveAnswerer(HashingEmbedder(), min_relevance=0.0, max_points=1).answer(
        "compactor deletes chunks past retention period", "what deletes chunks past the retention period?", [passage]
    )
    assert answer is not None and answer.points[0].text == "The compactor deletes chunks past the retention period."


async def test_of_two_equally_relevant_sentences_the_one_quoting_code_leads() -> None:
    """A docs answer is what to type: with the question's words in both, the sentence that names the setting in
    code leads the one that only talks about it."""
    prose = Passage(id="retention.md#1", text="Retention in the compactor deletes old chunks of a tenant.")
    code = Passage(id="retention.md#2", text="Retention in the compactor is `retention_enabled` for old chunks.")
    answer = await ExtractiveAnswerer(HashingEmbedder(), min_relevance=0.0, max_points=1).answer(
        "retention compactor old chunks", "How does retention in the compactor work?", [prose, code]
    )
    assert answer is not None
    assert answer.points[0].passage_id == "retention.md#2"


@pytest.mark.parametrize(
    ("question", "leads"),
    [
        ("How do I turn on retention in the compactor?", "minimum.md#1"),  # a procedure: what to type leads
        ("Does retention in the compactor use `retention_enabled`?", "compactor.md#1"),  # not a procedure
    ],
)
async def test_a_how_question_is_answered_with_the_block_a_sentence_introduces(question: str, leads: str) -> None:
    sentence = Passage(id="compactor.md#1", text="Retention in the compactor uses `retention_enabled` for old chunks.")
    block = Passage(
        id="minimum.md#1",
        text="Minimum retention configuration for the compactor:\n\n```yaml\ncompactor:\n"
        "  retention_enabled: true\n```",
    )
    answer = await ExtractiveAnswerer(HashingEmbedder(), min_relevance=0.0, max_points=1).answer(
        "retention compactor retention_enabled", question, [sentence, block]
    )
    assert answer is not None and answer.points[0].passage_id == leads


def test_how_questions_are_told_from_others() -> None:
    from anaphora.reading.focus import asks_how

    assert asks_how("how do i turn on retention?") and asks_how("How to enable TLS") and asks_how("what do I set?")
    assert not asks_how("does it support TLS?") and not asks_how("which limit applies?") and not asks_how("how much?")
    assert asks_how("ok so what would the config look like for that?") and asks_how("show me an example")
    assert not asks_how("what does the dashboard look like?") and not asks_how("is the config file required?")


def test_a_block_introduced_by_its_sentence_is_one_unit_not_two() -> None:
    """The sentence that ends in ":" introduces the block, and it is also the paragraph before the block: one unit,
    not the same text twice (a second copy spent a point of the answer's selection on nothing)."""
    text = 'To make it the default, set `log-driver` in `daemon.json`:\n\n```json\n{"log-driver": "loki"}\n```'
    assert [(position, kind) for position, _, kind in quotable_units(text)] == [(0, "lead-in"), (1, "code")]


def test_a_heading_kept_as_a_line_of_text_is_not_quoted() -> None:
    text = (
        "Postgres STARTTLS\n\nTraefik supports the Postgres STARTTLS protocol for TLS routing.\n\n"
        "Postgres STARTTLS with TCP TLS PassThrough routers"
    )
    assert [t for _, t, _ in quotable_units(text)] == [
        "Traefik supports the Postgres STARTTLS protocol for TLS routing."
    ]


def test_an_unpunctuated_sentence_in_lower_case_is_still_quoted() -> None:
    assert [t for _, t, _ in quotable_units("i think you should just buy an index fund")] == [
        "i think you should just buy an index fund"
    ]


@pytest.mark.parametrize(
    ("question", "leads"),
    [
        ("How far can I push the per stream rate limit?", "limits.md#2"),  # an amount: the quantity leads
        ("Why does the per stream rate limit exist?", "limits.md#1"),  # not an amount
    ],
)
async def test_a_question_about_an_amount_is_answered_with_the_quantity(question: str, leads: str) -> None:
    reason = Passage(id="limits.md#1", text="The per stream rate limit keeps one stream from overwhelming ingesters.")
    amount = Passage(id="limits.md#2", text="Keep the per stream rate limit no higher than 5MB for each stream.")
    answer = await ExtractiveAnswerer(HashingEmbedder(), min_relevance=0.0, max_points=1).answer(
        "per stream rate limit", question, [reason, amount]
    )
    assert answer is not None and answer.points[0].passage_id == leads


def test_amount_questions_are_told_from_others() -> None:
    from anaphora.reading.focus import asks_amount

    assert asks_amount("how long until it's gone?") and asks_amount("what's it set to out of the box?")
    assert asks_amount("How many teams are in the NFL?") and asks_amount("what is the maximum size?")
    assert not asks_amount("how do I make it the default for every container?") and not asks_amount("which limit?")


DRIVER = Passage(
    id="docker-driver.md#2",
    text="Loki ships a Docker logging driver that reads the containers' logs.\n\n"
    "Run the following command to install the plugin, changing the architecture (`arm64` and `amd64` are "
    "supported) if needed:\n\n```bash\ndocker plugin install grafana/loki-docker-driver:3.6.0-amd64 --alias loki\n```",
)


def test_a_chosen_code_block_is_quoted_with_the_sentence_that_introduces_it() -> None:
    """The block may match the words best, but its sentence says what to change in it."""
    found = ExtractiveAnswerer.candidates([DRIVER])
    kinds = [c.kind for c in found]
    code, sentence = kinds.index("code"), kinds.index("sentence")
    first, swapped = with_lead_ins(found, [sentence, code])
    assert first == sentence and found[swapped].kind == "lead-in" and found[swapped].end == found[code].position
    assert found[swapped].text.startswith("Run the following command") and found[code].text in found[swapped].text
    assert with_lead_ins(found, [swapped, code]) == [swapped, code]  # never the same unit twice
    assert with_lead_ins(found, [sentence]) == [sentence]


def test_a_code_block_keeps_its_place_when_its_sentence_is_already_quoted() -> None:
    """A paragraph's opening sentence is a point of its own and also introduces the block after it: quoted once."""
    passage = Passage(
        id="log_queries.md#11",
        text='Filter operators can be chained.\n\n```logql\n{job="mysql"} |= "error" != "timeout"\n```',
    )
    found = ExtractiveAnswerer.candidates([passage])
    kinds = [c.kind for c in found]
    assert "lead-in" in kinds
    sentence, code = kinds.index("sentence"), kinds.index("code")
    assert with_lead_ins(found, [sentence, code]) == [sentence, code]


async def test_an_answer_never_quotes_a_block_without_the_sentence_that_introduces_it() -> None:
    answer = await ExtractiveAnswerer(HashingEmbedder(), min_relevance=0.0).answer(
        "loki docker logging driver plugin install", "how do I get docker logs into loki?", [DRIVER]
    )
    assert answer is not None
    assert all(point.kind != "code" for point in answer.points)
    assert "changing the architecture" in answer.text and answer.text.count("docker plugin install") == 1


def test_a_point_close_in_meaning_but_not_in_words_is_no_repeat() -> None:
    """An embedding puts "decrease the rate of log lines" beside "increase the rate limits": the other half of
    the advice, not a repeat. A repeat says mostly the same words."""
    from anaphora.answering.extractive import Candidate, says_again

    def unit(n: int, text: str) -> Candidate:
        return Candidate(n, text, "sentence", n, "", False, "", passage_id="limits.md#3", order=0, rank=0, source="")

    found = [
        unit(0, "Another option is simply to decrease the rate of log lines sent to your cluster."),
        unit(1, "One solution is to increase the rate limits: raise `ingest_rate_mb` and `ingest_burst_mb`."),
        unit(2, "Another option is to simply decrease the rate of the log lines sent to the cluster."),
    ]
    assert not says_again(found[1], found, [0])
    assert says_again(found[2], found, [0])


async def test_a_reference_entry_is_quoted_under_the_name_its_section_documents() -> None:
    """A page of settings titles each entry with the setting's name and only describes it below: quoted alone, the
    description would not say what to set."""
    entry = Passage(
        id="config.md#40",
        heading="Configuration > Result backend settings > `result_ttl_seconds`",
        text="How long a finished task's result is kept in the backend before it is deleted. Default: one day.",
    )
    prose = Passage(
        id="guide.md#3",
        heading="Results > Keeping `results` around",
        text="Finished results are kept in the backend for a while and then deleted by a cleanup job.",
    )
    answer = await ExtractiveAnswerer(HashingEmbedder(), min_relevance=0.0).answer(
        "finished task result kept backend deleted",
        "how long is a finished result kept before it is deleted?",
        [entry, prose],
    )
    assert answer is not None
    texts = {p.passage_id: p.text for p in answer.points}
    assert texts["config.md#40"].startswith("`result_ttl_seconds`: How long a finished task's result")
    assert entry_name(prose.heading) == ""  # a title that mentions a name names no entry
    said = "Set `result_ttl_seconds` to keep results longer."
    assert under_name(said, entry_name(entry.heading)) == said  # a sentence that says the name needs no label


async def test_a_sentence_under_a_term_line_is_quoted_under_that_name() -> None:
    """Celery's ``.. attribute:: Task.max_retries`` is a line naming the attribute above the paragraph that
    describes it; "Maximum number of retries before giving up." was quoted without the name, so it did not say
    what to set. Our own entries, one under its signature as a label (what the Sphinx directive renders), one under
    a Markdown term: the name above the paragraph is said, as code, with its first quoted sentence."""
    entries = Passage(
        id="jobs.md#7",
        heading="Jobs > Retrying",
        text="Retrying is configured per job.\n\nJob.retry_limit:\n\nA number. How many times a failed job is "
        "tried again before it is dropped. By default, three.\n\n`Job.retry_pause`\n\nA number of seconds. "
        "How long to wait before the next attempt is made.",
    )
    answer = await ExtractiveAnswerer(HashingEmbedder(), min_relevance=0.0).answer(
        "failed job tried again before dropped pause next attempt",
        "how many times is a failed job tried again, and how long between attempts?",
        [entries],
    )
    assert answer is not None
    said = " ".join(p.text for p in answer.points)
    assert "`Job.retry_limit`: How many times a failed job is tried again" in said, said
    assert "`Job.retry_pause`: A number of seconds. How long to wait" in said, said


async def test_a_point_of_release_notes_is_said_with_its_release() -> None:
    """Celery's changelog said "This release introduces support for Pydantic models" under the heading "Change
    history > 5.5.0": quoted alone, it did not say which release, and the user had asked whether their version
    could do it. Our own release notes: the first quoted point of a release says which one, once per release."""
    notes = Passage(
        id="changes.md#12",
        source="docs/changes.md",
        heading="Release history > 4.2.0 > News",
        text="This release adds schema checks for incoming job payloads.\n\nAn incoming job payload that fails "
        "its schema checks is rejected before the job runs.",
    )
    answer = await ExtractiveAnswerer(HashingEmbedder(), min_relevance=0.0).answer(
        "job incoming payload schema checks",
        "can a job check its incoming payload against a schema on our version?",
        [notes],
    )
    assert answer is not None
    said = [p.text for p in answer.points]
    assert said == [
        "In 4.2.0: This release adds schema checks for incoming job payloads.",
        "An incoming job payload that fails its schema checks is rejected before the job runs.",  # read under it
    ]


def test_a_release_note_item_keeps_its_mark_first_and_a_point_naming_its_release_is_left_alone() -> None:
    """Changelogs are mostly lists (Flask's CHANGES.rst: "-   Support async views ..." under "Version 2.0.0")."""
    assert in_release("- Support async views and error handlers.", "2.0.0") == (
        "- In 2.0.0: Support async views and error handlers."
    )
    assert in_release("3. Dropped support for Python 3.8.", "5.0") == "3. In 5.0: Dropped support for Python 3.8."
    assert in_release("Since 4.2 a job checks its payload.", "4.2") == "Since 4.2 a job checks its payload."


async def test_one_block_of_a_tab_group_is_quoted() -> None:
    """Traefik's pages show one configuration in tabs, one per syntax ("Structured (YAML):", "Structured (TOML):",
    "Labels:"); "how do I redirect all http traffic to https?" quoted three of them, one fact three times. One is
    quoted, and the room goes to other points."""
    tabs = Passage(
        id="redirect.md#2",
        text="Structured (YAML):\n\n```yaml\nhttp:\n  middlewares:\n    to-https:\n      redirectScheme:\n"
        "        scheme: https\n```\n\nStructured (TOML):\n\n```toml\n[http.middlewares.to-https.redirectScheme]\n"
        '  scheme = "https"\n```\n\nLabels:\n\n```yaml\nlabels:\n'
        '  - "kestrel.http.middlewares.to-https.redirectscheme.scheme=https"\n```',
    )
    prose = Passage(
        id="entrypoints.md#9",
        text="Redirect every request of an entry point to https with the entry point's redirection scheme.",
    )
    answer = await ExtractiveAnswerer(HashingEmbedder(), min_relevance=0.0).answer(
        "redirect http to https scheme middleware", "how do I redirect http to https?", [tabs, prose]
    )
    assert answer is not None
    blocks = [p for p in answer.points if "```" in p.text]
    assert len(blocks) == 1, [p.text for p in answer.points]


@pytest.mark.parametrize(
    ("source", "heading", "release"),
    [
        ("history/changelog-5.5.rst", "Change history > 5.5.0b2 > Key Highlights", "5.5.0b2"),
        ("release-notes/v2-9.md", "V2.9 > Bug fixes > 2.9.4 (2024-01-24)", "2.9.4"),  # the most specific; no date
        ("history/whatsnew-4.2.rst", "What's new in Celery 4.2 (windowlicker) > Preface", "4.2"),
        ("release-notes/v3-0.md", "Features and enhancements", ""),  # no version said: nothing to add
        ("setup/upgrade.md", "Upgrading > 3.0", ""),  # not release notes: a guide's version is its subject
    ],
)
def test_the_release_is_the_most_specific_version_of_the_heading_path(source: str, heading: str, release: str) -> None:
    assert release_of(source, heading) == release


@pytest.mark.parametrize(
    "title", ["Retry configuration for the Database backend", "How to set up test reports", "Test report example"]
)
def test_a_rubric_or_caption_in_sentence_case_is_not_quoted(title: str) -> None:
    """A section's title or a caption kept as a line of text names what follows and answers nothing."""
    text = f"{title}\n\nThe backend retries every failed operation three times before it gives up."
    assert [t for _, t, _ in quotable_units(text)] == [
        "The backend retries every failed operation three times before it gives up."
    ]


def test_the_line_under_a_term_or_an_entry_title_is_what_it_does() -> None:
    """A flag's description is a short unpunctuated line too: under its term, or in a passage whose heading names
    the entry, it is quoted."""
    flags = "`-n --dry-run`\n\nPrint what would change without changing anything"
    assert "Print what would change without changing anything" in [t for _, t, _ in quotable_units(flags)]
    entry = "Remove the tool(s) from the config file"
    assert [u.text for u in passage_units(entry, entry=True)] == [entry]
    assert [u.text for u in passage_units(entry)] == []


@pytest.mark.parametrize(
    "pointer",
    [
        "This page outlines the basics of running the server.",  # Flask's docs, read as a user
        "See the metrics documentation for configuration details.",
        "For more information about access control, refer to the admin guide.",
        "This guide walks you through the upgrade step by step.",
    ],
)
def test_a_sentence_that_only_points_elsewhere_is_not_quoted(pointer: str) -> None:
    """Every docs site writes them; quoted, they spend a point of the answer on nothing."""
    text = f"{pointer} The server reads `workers` from its configuration file at start."
    assert [t for _, t, _ in quotable_units(text)] == [
        "The server reads `workers` from its configuration file at start."
    ]


@pytest.mark.parametrize(
    "says",
    ["See `task_acks_late` for how to change it.", "See https://example.com/limits for the current limits."],
)
def test_a_pointer_that_names_a_setting_or_an_address_says_something(says: str) -> None:
    assert [t for _, t, _ in quotable_units(says)] == [says]


@pytest.mark.parametrize(
    ("sentence", "points"),
    [
        ("The behaviour at these limits is described in the resources guide, section Memory.", True),
        ("How the buffer works is explained on the architecture page.", True),
        ("Retention is described in seconds since the last write.", False),
        ("The `max_memory` setting is documented in the buffer section.", False),  # it names the setting
    ],
)
def test_a_sentence_that_says_where_something_is_told_points_elsewhere(sentence: str, points: bool) -> None:
    """The sample docs' "What happens when it hits that limit?" led with where the behaviour is described."""
    from anaphora.answering.extractive import points_elsewhere

    assert points_elsewhere(sentence) is points
