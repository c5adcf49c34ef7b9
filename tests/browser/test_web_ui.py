"""The web chat page in a real browser (headless Chromium) against a live `anaphora serve` with the fake model:
streaming with citations, the "why" panel, reload, untrusted text kept inert, upload, a second user, sign-in,
stop, phone width, page weight and the first token's latency."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from tests.browser.conftest import keep_for_docs
from tests.integration.services import ServiceProcess
from tests.server_harness import token

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FIRST = "How do I install Kestrel on Kubernetes?"
FOLLOW_UP = "And on ARM?"
DONE_TURNS = "#turns .turn:not(.streaming)"
PAGE_BUDGET_BYTES = 100_000
LATENCY_BUDGET_MS = 100.0
DESKTOP = {"width": 1280, "height": 860}
RESULTS = Path(__file__).resolve().parents[2] / "tmp" / "artifacts" / "browser"

# Recorded in the page: the wall-clock time the first answer text is in the DOM and its frame has been painted
# (a requestAnimationFrame callback, then a task after that frame), and how the answer text grew while streaming.
WATCH_FIRST_PAINT = """() => {
  window.__ui = { firstPaint: null, lengths: [] };
  const list = document.getElementById("turns");
  new MutationObserver(() => {
    const answer = list.querySelector(".turn:last-child .answer");
    const streaming = list.querySelector(".turn:last-child.streaming");
    if (!answer || !streaming) return;
    const length = answer.textContent.length;
    if (length && !window.__ui.lengths.includes(length)) window.__ui.lengths.push(length);
    if (length && window.__ui.firstPaint === null) {
      window.__ui.firstPaint = 0;
      const now = () => { window.__ui.firstPaint = performance.timeOrigin + performance.now(); };
      requestAnimationFrame(() => setTimeout(now));
    }
  }).observe(list, { subtree: true, childList: true, characterData: true });
}"""


def ask(page, question: str) -> None:
    """Type the question and press Enter (the composer's send key); wait until the answer has finished."""
    before = page.locator(DONE_TURNS).count()
    page.locator("#question").fill(question)
    page.locator("#question").press("Enter")
    page.locator(".turn .why").nth(before).wait_for(state="attached")


def conversation_id(page) -> str:
    page.wait_for_function("() => location.hash.startsWith('#/c/')")
    return page.evaluate("location.hash").removeprefix("#/c/")


class NetworkClock:
    """Chromium's own network events (DevTools protocol): when the first bytes of a response reached the browser,
    as wall-clock milliseconds comparable with the page's ``performance.timeOrigin + performance.now()``."""

    def __init__(self, page) -> None:
        self.sent: dict[str, dict] = {}
        self.first_data: dict[str, float] = {}
        cdp = page.context.new_cdp_session(page)
        cdp.on("Network.requestWillBeSent", lambda e: self.sent.setdefault(e["requestId"], e))
        cdp.on("Network.dataReceived", lambda e: self.first_data.setdefault(e["requestId"], e["timestamp"]))
        cdp.send("Network.enable")

    def first_bytes_ms(self, url_suffix: str) -> float:
        [request_id] = [r for r, e in self.sent.items() if e["request"]["url"].endswith(url_suffix)][-1:]
        sent = self.sent[request_id]
        return (sent["wallTime"] + (self.first_data[request_id] - sent["timestamp"])) * 1000


def test_two_turns_stream_with_citations_the_why_panel_and_a_reload(
    dev_server: ServiceProcess, open_page, artifacts: Path
) -> None:
    page, recorder = open_page(dev_server, viewport=DESKTOP)
    clock = NetworkClock(page)
    page.goto("/")
    page.locator("#question").wait_for()
    page.evaluate(WATCH_FIRST_PAINT)
    ask(page, FIRST)
    cid = conversation_id(page)
    streamed = page.evaluate("window.__ui")
    assert streamed["lengths"], "no answer text was shown while the turn streamed"
    first_bytes = clock.first_bytes_ms(f"/v1/conversations/{cid}/messages")
    latency_ms = streamed["firstPaint"] - first_bytes
    (artifacts / "first-token-latency.json").write_text(json.dumps({"first_token_on_screen_ms": latency_ms}))
    print(f"\nfirst answer token on screen {latency_ms:.1f} ms after the first SSE bytes reached the browser")
    assert 0 <= latency_ms <= LATENCY_BUDGET_MS

    page.locator("#question").press("Shift+Enter")  # a new line, not a send
    assert page.locator("#question").input_value() == "\n"
    assert page.locator("#turns .turn").count() == 1
    ask(page, FOLLOW_UP)
    turns = page.locator("#turns .turn")
    assert turns.count() == 2
    for n in range(2):
        assert turns.nth(n).locator(".sources li").count() >= 1
        assert turns.nth(n).locator(".answer .cite").count() >= 1

    stored = httpx.get(f"{dev_server.url}/v1/conversations/{cid}").json()
    query = stored["turns"][1]["trace"]["query"]
    assert query != FOLLOW_UP and FOLLOW_UP in query  # the expansion added the conversation's words
    page.screenshot(path=artifacts / "chat.png")
    keep_for_docs(artifacts / "chat.png", "web-ui-chat.png")

    why = turns.nth(1).locator("details.why")
    assert not why.get_by_test_id("retrieval-query").is_visible()  # collapsed until asked
    why.locator("summary").click()
    assert why.get_by_test_id("retrieval-query").inner_text().strip().strip('“”"') == query
    assert "history expansion" in why.inner_text()
    why.locator("summary").evaluate("node => node.scrollIntoView({block: 'start'})")
    page.screenshot(path=artifacts / "why-panel.png")
    keep_for_docs(artifacts / "why-panel.png", "web-ui-why.png")

    citation = stored["turns"][1]["citations"][0]
    passage = next(p for p in stored["turns"][1]["trace"]["retrieved"] if p["id"] == citation["id"])
    turns.nth(1).locator(".answer .cite").first.click()
    dialog = page.locator("#passage")
    assert dialog.is_visible()
    assert citation["source"] in dialog.locator("#passage-title").inner_text()
    assert citation["heading"] in dialog.locator("#passage-meta").inner_text()
    first_words = " ".join(passage["text"].split()[:3]).lstrip("#").strip()
    assert first_words.split()[0] in dialog.locator("#passage-text").inner_text()
    page.screenshot(path=artifacts / "passage.png")
    page.keyboard.press("Escape")
    assert not dialog.is_visible()

    page.reload()
    page.locator("#turns .turn .why").nth(1).wait_for(state="attached")
    assert page.locator("#turns .turn").count() == 2
    assert page.locator("#turns .turn .question").nth(1).inner_text().strip().endswith(FOLLOW_UP)
    assert page.locator("#conversation-title").inner_text() == stored["title"]
    assert page.locator("#conversations .conversation.active").get_attribute("data-id") == cid

    assert recorder.requests, "the network log recorded nothing"


def test_first_visit_weighs_at_most_100_kb_and_is_served_with_a_strict_policy(dev_server: ServiceProcess, open_page):
    page, _ = open_page(dev_server, viewport=DESKTOP)
    responses = []
    page.on("response", lambda response: responses.append(response))
    document = page.goto("/")
    page.wait_for_load_state("networkidle")
    page.locator("#question").wait_for()
    files = [r for r in responses if "/v1/" not in r.url]
    weight = sum(len(r.body()) for r in files)
    print(f"\npage weight on a first visit: {weight} bytes in {len(files)} files")
    assert {r.url.rsplit("/", 1)[-1] for r in files} >= {"", "app.js", "app.css", "markdown.js", "why.js"}
    assert weight <= PAGE_BUDGET_BYTES
    policy = document.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy and "unsafe" not in policy
    assert document.headers["x-content-type-options"] == "nosniff"
    assert all(r.headers.get("x-content-type-options") == "nosniff" for r in responses)


PAYLOAD_NAME = "<img src=x onerror=alert('name')>.md"
PAYLOAD = (
    "# Zanzibar <svg onload=alert('heading')></svg>\n\n"
    "Zanzibar payloads: <script>alert('script')</script> <img src=x onerror=alert('img')> "
    "[click me](javascript:alert('link')) <svg onload=alert('svg')><circle r=9></svg> end.\n\n"
    "More text <iframe src=\"javascript:alert('frame')\"></iframe> and "
    "<a href=\"javascript:alert('a')\">a link</a>.\n\n"
    "```html\n<script>document.title = 'pwned'</script>\n```\n"
)
# A short paragraph is one line of its chunk (and of the prompt), and the fake model quotes one line: a paragraph of
# four sentences makes an answer of four sentences, streamed one by one.
STREAMED = (
    "# Quokka facts\n\n"
    "Quokkas live on Rottnest Island. they eat leaves and grasses. their young ride in a pouch. visitors may not "
    "feed them.\n"
)


def upload(page, name: str, text: str) -> list[str]:
    """Upload one file from the documents panel; return every job status the page showed, in order."""
    page.evaluate("""() => {
      window.__statuses = [];
      new MutationObserver(() => {
        const line = document.querySelector("#upload-status [data-status]");
        const progress = document.querySelector("#upload-status progress");
        if (line && progress) window.__statuses.push(`${line.dataset.status} ${progress.value}/${progress.max}`);
      }).observe(document.getElementById("upload-status"), { subtree: true, childList: true });
    }""")
    page.locator("#upload-files").set_input_files(
        files=[{"name": name, "mimeType": "text/markdown", "buffer": text.encode()}]
    )
    page.locator("#upload-form button").click()
    page.locator("#upload-status [data-status=done]").wait_for()
    return page.evaluate("window.__statuses")


def test_upload_shows_progress_then_the_new_document_is_searchable_and_streams(
    dev_server: ServiceProcess, open_page, artifacts: Path
) -> None:
    page, _ = open_page(dev_server, viewport=DESKTOP)
    page.goto("/")
    page.locator("#documents").wait_for()
    statuses = upload(page, "quokka.md", STREAMED)
    assert statuses[0].startswith("queued") and statuses[-1].startswith("done"), statuses
    done, total = statuses[-1].split()[1].split("/")
    assert int(done) == int(total) >= 1, statuses
    assert "quokka.md" in page.locator("#upload-status").inner_text()
    page.locator("#document-count").click()  # the sample documents and others: a collapsed list
    page.locator("#document-filter").fill("quokka")
    assert page.locator("#document-list li:not([hidden])").all_inner_texts() == ["quokka.md 1 chunks"]
    page.screenshot(path=artifacts / "upload.png")

    page.evaluate(WATCH_FIRST_PAINT)
    ask(page, "What do quokkas eat?")
    lengths = page.evaluate("window.__ui.lengths")
    assert len(lengths) >= 3, f"the answer did not arrive sentence by sentence: {lengths}"
    turn = page.locator("#turns .turn").last
    assert "they eat leaves" in turn.locator(".answer").inner_text()
    assert turn.locator(".sources").inner_text().count("quokka.md") >= 1


def test_untrusted_answers_passages_and_file_names_render_as_text(
    dev_server: ServiceProcess, open_page, artifacts: Path
) -> None:
    page, recorder = open_page(dev_server, viewport=DESKTOP)
    page.goto("/")
    page.locator("#documents").wait_for()
    upload(page, PAYLOAD_NAME, PAYLOAD)
    assert PAYLOAD_NAME in page.locator("#upload-status").inner_text()
    ask(page, "Zanzibar payloads")
    turn = page.locator("#turns .turn").last
    answer = turn.locator(".answer").inner_text()
    # ingestion drops <script> elements from Markdown prose (their text stays); the markup it keeps shows as text
    assert "alert('script')" in answer and "<img src=x onerror=alert('img')>" in answer
    assert "[click me](javascript:alert('link'))" in answer and "<svg onload=alert('svg')>" in answer
    assert PAYLOAD_NAME in turn.locator(".sources").inner_text()
    turn.locator(".sources button").first.click()
    passage = page.locator("#passage")
    assert "<iframe" in passage.inner_text() or "<script>" in passage.inner_text()
    page.screenshot(path=artifacts / "untrusted.png")

    for where in ("#turns", "#passage", "#upload-status", "#document-list"):
        inert = page.locator(where).locator("script, img, svg, iframe, object, embed, [onerror], [onload]")
        assert inert.count() == 0, f"markup from untrusted text became elements in {where}"
    assert page.locator("a[href^='javascript:' i]").count() == 0
    assert page.locator("script").count() == 1  # the page's own module
    assert page.title() != "pwned"
    passage.get_by_role("button", name="Close").click()
    assert not passage.is_visible()
    page.reload()  # stored turns render the same way
    page.locator("#turns .turn .why").last.wait_for(state="attached")
    assert page.locator("#turns").locator("script, img, svg, iframe").count() == 0
    assert recorder.dialogs == []


def sign_in(page, value: str) -> None:
    page.locator("#signin-token").fill(value)
    page.locator("#signin-form button").click()


def test_a_second_user_cannot_see_the_first_users_conversation_and_expiry_returns_to_sign_in(
    jwt_server: ServiceProcess, open_page, artifacts: Path
) -> None:
    alice, _ = open_page(jwt_server, viewport=DESKTOP)
    alice.goto("/")
    alice.locator("#signin").wait_for()
    assert "access token" in alice.locator("#signin-message").inner_text()
    alice.screenshot(path=artifacts / "sign-in.png")
    sign_in(alice, token("alice"))
    alice.locator("#question").wait_for()
    assert "alice" in alice.locator("#whoami").inner_text()
    assert alice.locator("#documents").is_hidden()  # not an administrator
    ask(alice, FIRST)
    secret = conversation_id(alice)
    alice.reload()  # the token is kept in session storage
    alice.locator("#turns .turn .why").first.wait_for(state="attached")

    bob, _ = open_page(jwt_server, viewport=DESKTOP)
    bob.goto(f"/#/c/{secret}")
    sign_in(bob, token("bob"))
    bob.locator("#error").wait_for()
    assert f"no conversation '{secret}'" in bob.locator("#error").inner_text()
    assert bob.locator("#turns .turn").count() == 0
    assert bob.locator("#conversations .conversation").count() == 0
    assert FIRST not in bob.locator("body").inner_text()
    bob.screenshot(path=artifacts / "second-user.png")

    late, _ = open_page(jwt_server, viewport=DESKTOP)
    late.goto("/")
    sign_in(late, token("carol", ttl_s=2))
    late.locator("#question").wait_for()
    late.wait_for_timeout(3000)
    late.locator("#question").fill("Is my session still valid?")
    late.locator("#question").press("Enter")
    late.locator("#signin").wait_for()
    assert "expired" in late.locator("#signin-message").inner_text()
    assert late.evaluate("sessionStorage.getItem('anaphora.token')") is None


KIWI = (
    "# Kiwi\n\nKiwi birds cannot fly at all. their eggs are very large. they sleep during the day. males sit on "
    "the eggs. some live for fifty years.\n"
)


def test_stop_ends_the_stream_and_the_turn_is_stored_anyway(slow_server: ServiceProcess, open_page) -> None:
    job = httpx.post(f"{slow_server.url}/v1/documents", files={"files": ("kiwi.md", KIWI.encode())}).json()
    for _ in range(100):
        if httpx.get(f"{slow_server.url}/v1/jobs/{job['job_id']}").json()["status"] == "done":
            break
        time.sleep(0.1)
    page, _ = open_page(slow_server, viewport=DESKTOP)
    page.goto("/")
    page.locator("#question").fill("Can kiwi birds fly?")
    page.locator("#question").press("Enter")
    page.locator("#turns .turn.streaming .answer:not(:empty)").wait_for()
    page.locator("#stop").click()
    turn = page.locator("#turns .turn").last
    turn.locator(".turn-error").wait_for()
    assert "Stopped" in turn.inner_text()
    assert page.locator("#send").is_visible() and page.locator("#stop").is_hidden()
    shown = turn.locator(".answer").inner_text()
    cid = conversation_id(page)
    for _ in range(200):
        stored = httpx.get(f"{slow_server.url}/v1/conversations/{cid}").json()
        if stored["turns"]:
            break
        time.sleep(0.1)
    answer = stored["turns"][0]["answer"]
    assert shown.strip() and len(shown) < len(answer) and "fifty years" in answer
    assert turn.locator(".answer").inner_text() == shown  # nothing more arrived after the stop
    page.reload()
    page.locator("#turns .turn .why").last.wait_for(state="attached")
    assert "fifty years" in page.locator("#turns .answer").last.inner_text()


def test_closing_the_tab_mid_answer_still_stores_the_turn(slow_server: ServiceProcess, open_page) -> None:
    page, _ = open_page(slow_server, viewport=DESKTOP)
    page.goto("/")
    page.locator("#question").fill("How do I install Kestrel on Kubernetes?")
    page.locator("#question").press("Enter")
    page.locator("#turns .turn.streaming").wait_for()
    cid = conversation_id(page)
    page.close()
    for _ in range(300):
        turns = httpx.get(f"{slow_server.url}/v1/conversations/{cid}").json()["turns"]
        if turns:
            break
        time.sleep(0.1)
    assert turns and turns[0]["answer"] and turns[0]["citations"]


def test_the_composer_waits_until_the_conversation_on_screen_has_loaded(dev_server: ServiceProcess, open_page):
    """Loading a conversation replaces the turn list: a question sent while it loads would vanish from the page."""
    created = httpx.post(f"{dev_server.url}/v1/conversations", json={}).json()
    httpx.post(f"{dev_server.url}/v1/conversations/{created['id']}/messages", json={"content": FIRST}, timeout=60)
    page, _ = open_page(dev_server, viewport=DESKTOP)
    held = []
    path = f"/v1/conversations/{created['id']}"
    page.route(lambda url: url.split("?")[0].endswith(path), lambda route: held.append(route))
    page.goto(f"/#/c/{created['id']}")
    page.wait_for_function("() => document.getElementById('app').hidden === false")
    for _ in range(100):  # the request is held by the route as soon as it is made; a busy machine may take a while
        if held:
            break
        page.wait_for_timeout(100)
    assert held, "the page did not ask for the conversation"
    assert page.locator("#question").is_disabled() and page.locator("#send").is_disabled()
    held[0].continue_()
    page.locator("#turns .turn").first.wait_for()
    assert page.locator("#question").is_enabled()
    ask(page, FOLLOW_UP)
    assert page.locator("#turns .turn").count() == 2


def test_conversations_are_renamed_deleted_and_paginated(dev_server: ServiceProcess, open_page) -> None:
    for n in range(23):
        httpx.post(f"{dev_server.url}/v1/conversations", json={"title": f"older {n:02d}"}).raise_for_status()
    page, _ = open_page(dev_server, viewport=DESKTOP)
    page.goto("/")
    items = page.locator("#conversations .conversation")
    items.first.wait_for()
    assert items.count() == 20 and page.locator("#more-conversations").is_visible()
    page.locator("#more-conversations").click()
    page.wait_for_function("() => document.querySelectorAll('#conversations .conversation').length > 20")
    assert page.locator("#conversations").inner_text().count("older") == 23

    first = items.first
    first.locator("button.icon").first.click()  # rename
    page.locator("input.rename").fill("renamed by the test")
    page.locator("input.rename").press("Enter")
    page.locator("#conversations .open", has_text="renamed by the test").wait_for()
    renamed_id = page.locator("#conversations .conversation").first.get_attribute("data-id")
    assert httpx.get(f"{dev_server.url}/v1/conversations/{renamed_id}").json()["title"] == "renamed by the test"

    delete = page.locator(f"#conversations [data-id='{renamed_id}'] button.danger")
    delete.click()
    assert delete.inner_text() == "Delete?"
    delete.click()
    page.locator(f"#conversations [data-id='{renamed_id}']").wait_for(state="detached")
    assert httpx.get(f"{dev_server.url}/v1/conversations/{renamed_id}").status_code == 404


def test_phone_width_in_the_dark_scheme_with_visible_focus(dev_server: ServiceProcess, open_page, artifacts: Path):
    page, _ = open_page(dev_server, viewport={"width": 390, "height": 800}, color_scheme="dark", is_mobile=True)
    page.goto("/")
    page.locator("#question").wait_for()
    assert page.locator("#sidebar").bounding_box()["x"] < 0  # the list is a drawer on a phone
    ask(page, FIRST)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(23, 24, 26)", background  # the dark palette
    page.screenshot(path=artifacts / "phone-dark.png")
    page.locator("#toggle-sidebar").click()
    page.wait_for_function("() => document.getElementById('sidebar').getBoundingClientRect().x >= 0")
    page.screenshot(path=artifacts / "phone-dark-sidebar.png")
    page.locator("#close-sidebar").click()
    page.wait_for_function("() => document.getElementById('sidebar').getBoundingClientRect().right <= 0")

    page.locator("#question").focus()
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Tab")
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline != "none"


def test_trace_fields_the_page_does_not_know_yet_are_shown_generically(dev_server: ServiceProcess, open_page) -> None:
    """Trace fields the page does not know yet: the panel shows them without a change to the page, as inert text."""
    page, _ = open_page(dev_server, viewport=DESKTOP)
    page.goto("/")
    page.locator("#question").wait_for()
    text = page.evaluate("""async () => {
      const { whyPanel } = await import("./ui/js/why.js");
      const trace = {
        question: "q", query: "q", stages: [], retrieved: [],
        future_checks: [{ sentence: "Use the Helm chart.", verdict: "supported", passages: ["a.md#1"] },
                        { sentence: "<img src=x onerror=alert(1)>", verdict: "unsupported", passages: [] }],
        memories: ["prefers ARM", { id: "m1", text: "runs k3s" }],
      };
      const panel = whyPanel(trace, [], () => {});
      panel.open = true;
      document.getElementById("turns").append(panel);
      return panel.innerText;
    }""")
    assert "future checks" in text.lower() and "unsupported" in text
    assert "Use the Helm chart.\tsupported\ta.md#1" in text
    assert "memories" in text.lower() and "prefers ARM" in text and "runs k3s" in text
    assert "<img src=x onerror=alert(1)>" in text
    assert page.locator("#turns img").count() == 0


def test_markdown_renders_structure_and_keeps_only_safe_links(dev_server: ServiceProcess, open_page) -> None:
    page, _ = open_page(dev_server, viewport=DESKTOP)
    page.goto("/")
    page.locator("#question").wait_for()
    html = page.evaluate("""async () => {
      const { render } = await import("./ui/js/markdown.js");
      const target = document.createElement("div");
      render(target, [
        "## Install", "", "Run **helm** with `--set arch=arm64` and *wait*; keep max_tokens_here as is.", "",
        "1. add the repo", "2. install the chart", "", "- one", "- two", "",
        "> quoted <b>bold</b>", "", "```bash", "helm install <kestrel> && echo '<script>'", "```", "",
        "[docs](https://example.org/a?b=1) [local](/v1/x) [bad](javascript:alert(1)) [data](data:text/html,hi)", "",
        "| Value | Default |", "|---|:--:|", "| `image.tag` | <img src=x onerror=alert(1)> |", "| a \\\\| b | **c** |",
        "", "| not | a table |", "| no | delimiter |",
      ].join("\\n"));
      return target.innerHTML;
    }""")
    assert "<h4>Install</h4>" in html and "<strong>helm</strong>" in html and "<em>wait</em>" in html
    assert "<code>--set arch=arm64</code>" in html and "max_tokens_here" in html
    assert "<ol><li>add the repo</li><li>install the chart</li></ol>" in html and "<ul><li>one</li>" in html
    assert "<blockquote><p>quoted &lt;b&gt;bold&lt;/b&gt;</p></blockquote>" in html
    assert (
        "<pre><code data-language=\"bash\">helm install &lt;kestrel&gt; &amp;&amp; echo '&lt;script&gt;'</code></pre>"
        in html
    )
    assert 'href="https://example.org/a?b=1" rel="noopener noreferrer nofollow" target="_blank">docs</a>' in html
    assert f'href="{dev_server.url}/v1/x"' in html
    assert "[bad](javascript:alert(1))" in html and "[data](data:text/html,hi)" in html
    assert "javascript:alert" not in html.replace("[bad](javascript:alert(1))", "")
    assert (
        '<div class="table"><table><thead><tr><th>Value</th><th>Default</th></tr></thead><tbody>'
        "<tr><td><code>image.tag</code></td><td>&lt;img src=x onerror=alert(1)&gt;</td></tr>"
        "<tr><td>a | b</td><td><strong>c</strong></td></tr></tbody></table></div>" in html
    )
    assert "<p>| not | a table |<br>| no | delimiter |</p>" in html  # rows without a delimiter row stay text


# A page that fits the screen (issue 25): the "why" panel used to widen the conversation to 1,359 px in a 1,078 px
# column on a desktop and to 1,245 px on a 390 px phone. A document whose passages hold a 300-character code line
# and a wide table, a long question, then a follow-up: with every panel open nothing may be wider than the screen;
# wide code and tables scroll inside their own boxes.
CODE_LINE = "zorblax-agent run " + " ".join(f"--zorblax-option-{n:02d}=value-{n:02d}" for n in range(10))
WIDE_TABLE = "\n".join(
    [
        "| " + " | ".join(f"zorblax column {n}" for n in range(6)) + " |",
        "|" + "---|" * 6,
        "| " + " | ".join(f"zorblax_default_value_{n}" for n in range(6)) + " |",
    ]
)
ZORBLAX = (
    "# Zorblax agent\n\nThe zorblax agent is started with one long command line:\n\n"
    f"```bash\n{CODE_LINE}\n```\n\n"
    f"{WIDE_TABLE}\n"
)
LONG_QUESTION = (  # a long question with a 200-character word in it
    f"How do I start the zorblax agent with its long command line, as in {CODE_LINE}, from "
    "https://zorblax.example.org/" + "z" * 172 + " ?"
)
ZORBLAX_FOLLOW_UP = "And its defaults, and the command line again?"
MEASURE = """() => {
  const turns = document.getElementById("turns");
  const boxes = [...turns.querySelectorAll(".turn, .question, .reply, .why, .why-section, .answer")];
  return {
    documentWidth: document.documentElement.scrollWidth, viewport: window.innerWidth,
    documentHeight: document.documentElement.scrollHeight, viewportHeight: window.innerHeight,
    turnsScroll: turns.scrollWidth, turnsClient: turns.clientWidth,
    rightmost: Math.max(...boxes.map((box) => box.getBoundingClientRect().right)),
  };
}"""


def zorblax_conversation(server: ServiceProcess) -> str:
    with httpx.Client(base_url=server.url, timeout=120) as http:
        job = http.post("/v1/documents", files={"files": ("zorblax.md", ZORBLAX.encode())}).json()
        for _ in range(400):
            if http.get(f"/v1/jobs/{job['job_id']}").json()["status"] == "done":
                break
            time.sleep(0.05)
        conversation = http.post("/v1/conversations", json={"title": "Zorblax " + "wide " * 30}).json()["id"]
        for question in (LONG_QUESTION, ZORBLAX_FOLLOW_UP):
            http.post(f"/v1/conversations/{conversation}/messages", json={"content": question}).raise_for_status()
        follow_up = http.get(f"/v1/conversations/{conversation}").json()["turns"][1]
    texts = [p["text"] for p in follow_up["trace"]["retrieved"]]
    assert any(CODE_LINE in t for t in texts) and any(WIDE_TABLE.splitlines()[0] in t for t in texts), texts
    return conversation


@pytest.mark.parametrize(("width", "height"), [(390, 800), (1280, 860)])
def test_the_why_panel_on_long_code_and_wide_tables_stays_within_the_screen(
    dev_server: ServiceProcess, open_page, artifacts: Path, width: int, height: int
) -> None:
    conversation = zorblax_conversation(dev_server)
    page, _ = open_page(dev_server, viewport={"width": width, "height": height}, is_mobile=width < 720)
    page.goto(f"/#/c/{conversation}")
    page.locator("#turns .turn .why").nth(1).wait_for(state="attached")
    for why in page.locator("#turns .turn details.why").all():
        why.locator("summary").click()
    assert page.locator("#turns .turn details.why[open]").count() == 2
    sizes = page.evaluate(MEASURE)
    assert sizes["documentWidth"] <= sizes["viewport"], sizes
    assert sizes["turnsScroll"] <= sizes["turnsClient"], sizes  # nothing cut off inside the column either
    assert sizes["rightmost"] <= sizes["viewport"], sizes
    assert sizes["documentHeight"] <= sizes["viewportHeight"], sizes  # only the turn list scrolls, not the page
    for scroller in page.locator("#turns .table-scroll, #turns .markdown pre, #turns .markdown .table").all():
        assert scroller.evaluate("node => node.getBoundingClientRect().right") <= sizes["viewport"]
    question = page.locator("#turns .turn .question").first
    assert question.bounding_box()["x"] + question.bounding_box()["width"] <= sizes["viewport"]
    page.screenshot(path=artifacts / f"why-wide-{width}-answer.png")
    page.locator("#turns .turn details.why").nth(1).locator("summary").evaluate(
        "node => node.scrollIntoView({block: 'start'})"
    )
    page.screenshot(path=artifacts / f"why-wide-{width}-panel.png")
    page.locator("#turns .turn details.why").nth(1).locator(".why-section").last.evaluate(
        "node => node.scrollIntoView({block: 'end'})"
    )
    page.screenshot(path=artifacts / f"why-wide-{width}-panel-end.png")

    page.locator("#turns .turn").nth(1).locator(".why button.link").first.click()  # the passage, in its dialog
    dialog = page.locator("#passage")
    assert dialog.is_visible()
    box = dialog.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= sizes["viewport"], box
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    page.screenshot(path=artifacts / f"why-wide-{width}-passage.png")


def test_memories_and_model_calls_read_as_words_dates_and_units(dev_server: ServiceProcess, open_page, artifacts):
    """The panel's memory and calls sections used to dump the trace: Unix timestamps, conversation_id,
    cache_write_tokens, prompt_tokens, first_token_ms, "current true"."""
    from anaphora.types import ModelCall, RecalledMemory

    recalled = RecalledMemory(
        id="m1", kind="fact", text="I run chart version 4.2 on the staging cluster.", conversation_id="c0ffee12",
        turns=[3], time=1796153902.966, current=False, score=0.81, similarity=0.64, why="same chart", injected=True,
    )  # fmt: skip
    calls = [
        ModelCall(purpose="rewrite", prompt_tokens=812, cached_tokens=640, completion_tokens=14, first_token_ms=95.4),
        ModelCall(purpose="answer", prompt_tokens=1930, cached_tokens=0, cache_write_tokens=1500, completion_tokens=88),
    ]
    trace = {"question": "q", "query": "q", "stages": [], "retrieved": [], "memory": [recalled.model_dump()],
             "calls": [c.model_dump() for c in calls], "answer_source": "model"}  # fmt: skip
    page, _ = open_page(dev_server, viewport=DESKTOP)
    page.goto("/")
    page.locator("#question").wait_for()
    text = page.evaluate(
        """async (trace) => {
      const { whyPanel } = await import("./ui/js/why.js");
      const panel = whyPanel(trace, [], () => {});
      panel.open = true;
      document.getElementById("turns").append(panel);
      return panel.innerText;
    }""",
        trace,
    )
    page.screenshot(path=artifacts / "why-memory-and-calls.png")
    for raw in ("conversation_id", "cache_write_tokens", "prompt_tokens", "first_token_ms", "completion_tokens",
                "current", "1796153902", "injected", "true", "false"):  # fmt: skip
        assert raw not in text, (raw, text)
    assert "turn 4 of conversation c0ffee12" in text and "2026" in text  # counted from 1; a date in the reader's locale
    assert "fact (since replaced)" in text and "64 %" in text
    assert "Query rewrite\t812 tokens\t640 tokens\t–\t14 tokens\t95 ms" in text, text
    assert "Answer\t1,930 tokens\t0 tokens\t1,500 tokens\t88 tokens\t–" in text, text


def test_a_long_document_list_is_collapsed_with_a_count_and_a_filter(dev_server: ServiceProcess, open_page) -> None:
    files = [
        ("files", (f"filler-{n:02d}.md", f"# Filler {n}\n\nApricot storage note {n}.\n".encode())) for n in range(10)
    ]
    job = httpx.post(f"{dev_server.url}/v1/documents", files=files, timeout=60).json()
    for _ in range(400):
        if httpx.get(f"{dev_server.url}/v1/jobs/{job['job_id']}").json()["status"] == "done":
            break
        time.sleep(0.05)
    total = len(httpx.get(f"{dev_server.url}/v1/documents").json()["data"])
    page, _ = open_page(dev_server, viewport=DESKTOP)
    page.goto("/")
    page.locator("#documents").wait_for()
    assert page.locator("#document-count").inner_text() == f"{total} documents"
    assert page.locator("#document-box").get_attribute("open") is None  # collapsed
    assert page.locator("#document-list").bounding_box() is None or not page.locator("#document-list").is_visible()
    page.locator("#document-count").click()
    page.locator("#document-filter").fill("FILLER-07")
    assert page.locator("#document-list li:not([hidden])").all_inner_texts() == ["filler-07.md 1 chunks"]
    assert page.locator("#document-shown").inner_text() == f"1 of {total} match"
    page.locator("#document-filter").fill("")
    assert page.locator("#document-list li:not([hidden])").count() == total
