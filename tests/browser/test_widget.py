"""The embeddable widget in a real browser (issue 49, item 1): docs pages on other 127.0.0.1 origins (small static
servers on their own ports) include /widget.js from a live `anaphora serve` in public mode. A conversation with a
follow-up streams and cites; a page on an origin not in the allow-list gets no answer; the page's CSS does not
change the widget and the widget's does not change the page; the keyboard works (Tab stays in the panel, Esc
closes it); screenshots at 390 and 1280 px."""

from __future__ import annotations

import functools
import html
import http.server
import json
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser.conftest import _serve
from tests.integration.services import ServiceProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FIRST = "How do I install Kestrel on Kubernetes?"
FOLLOW_UP = "And on ARM?"
SCREENSHOTS = Path(os.environ.get("ANAPHORA_TEST_WIDGET_SCREENSHOTS", "/tmp"))
PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Kestrel documentation</title><link rel="stylesheet" href="{css}"></head>
<body><header><h1>Kestrel documentation</h1></header>
<main><p class="intro">Kestrel is a small web server. This page is a docs site that embeds the assistant.</p>
<button class="cta" type="button">Download</button><div class="box">A box of the page</div></main>
{script}</body></html>"""
NEUTRAL_CSS = "body { margin: 24px; font: 16px/1.5 Georgia, serif; } .box { width: 300px; padding: 8px; }"
# the kind of page-wide rules a docs theme carries, made as aggressive as rules can be
HOSTILE_CSS = (
    NEUTRAL_CSS
    + """
* { font-family: "Comic Sans MS", cursive !important; color: #c00 !important; background: yellow !important;
    letter-spacing: 3px !important; line-height: 3 !important; box-sizing: content-box !important; }
button, iframe, div, span, svg { padding: 40px !important; margin: 30px !important; border: 9px dashed green !important;
    border-radius: 0 !important; width: 20px !important; height: 20px !important; transform: rotate(10deg) !important; }
[data-anaphora-widget] { display: none !important; opacity: 0 !important; }
iframe { display: none !important; }
"""
)
LAUNCHER = "document.querySelector('[data-anaphora-widget]').shadowRoot.querySelector('.launcher')"
STYLE_PROPS = ["font-family", "color", "background-color", "padding", "margin", "border", "width", "height", "display"]
PROPS_JS = json.dumps(STYLE_PROPS)
COMPUTED = (
    "(nodes) => nodes.map((node) => { const s = getComputedStyle(node); const r = node.getBoundingClientRect();"
    f" return {PROPS_JS}.map((p) => s.getPropertyValue(p)).concat([r.x, r.y, r.width, r.height]); }})"
)


class StaticSite:
    """A docs site: a directory served over HTTP on 127.0.0.1 and a port of its own (so its own web origin)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        handler = functools.partial(QuietHandler, directory=str(root))
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def page(self, name: str, css: str, widget: str | None, **data: str) -> str:
        """Write a page (and its stylesheet) that embeds the widget from ``widget`` (None: no widget)."""
        (self.root / f"{name}.css").write_text(css, encoding="utf-8")
        attributes = "".join(f' data-{key}="{value}"' for key, value in data.items())
        script = f'<script src="{widget}/widget.js"{attributes}></script>' if widget else ""
        (self.root / f"{name}.html").write_text(PAGE.format(css=f"{name}.css", script=script), encoding="utf-8")
        return f"{self.origin}/{name}.html"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args) -> None:
        return


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StaticSite, StaticSite]]:
    """The docs site in the allow-list, and another one that is not."""
    docs = StaticSite(tmp_path_factory.mktemp("docs-site"))
    other = StaticSite(tmp_path_factory.mktemp("other-site"))
    yield docs, other
    docs.close()
    other.close()


@pytest.fixture(scope="module")
def assistant(tmp_path_factory, sites) -> Iterator[ServiceProcess]:
    """`anaphora serve` with JWT auth and public mode for the docs site only."""
    docs, _ = sites
    yield from _serve(
        tmp_path_factory,
        "widget",
        auth="jwt",
        public_mode="true",
        public_origins=f'["{docs.origin}"]',
        visitor_secret="s" * 40,
    )


@pytest.fixture
def context(browser) -> Iterator:
    """A fresh browser context whose requests are recorded (none may leave 127.0.0.1)."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 860})
    ctx.set_default_timeout(15_000)
    ctx.requests = []
    ctx.errors = []
    ctx.on("request", lambda request: ctx.requests.append(request.url))
    yield ctx
    ctx.close()
    foreign = [u for u in ctx.requests if not u.startswith(("http://127.0.0.1:", "data:", "about:", "chrome-error:"))]
    assert foreign == [], f"requests to another host: {foreign}"
    assert not [e for e in ctx.errors if "uncaught" in e], ctx.errors


def watch(page) -> None:
    page.on("pageerror", lambda error: page.context.errors.append(f"uncaught: {error}"))


def widget_frame(page, assistant: ServiceProcess):
    """The panel's frame (waits up to 15 s for it to be attached)."""
    for _ in range(300):
        frame = next((f for f in page.frames if f.url.startswith(f"{assistant.url}/widget")), None)
        if frame is not None:
            return frame
        page.wait_for_timeout(50)
    raise AssertionError(f"no widget frame: {[f.url for f in page.frames]}")


STREAM_WATCH = """() => {
  window.__lengths = [];
  const list = document.getElementById("turns");
  new MutationObserver(() => {
    const turn = list.querySelector(".turn:last-child.streaming .answer");
    if (turn && turn.textContent.length && !window.__lengths.includes(turn.textContent.length)) {
      window.__lengths.push(turn.textContent.length);
    }
  }).observe(list, { subtree: true, childList: true, characterData: true });
}"""


def ask(frame, question: str) -> None:
    done = frame.locator("#turns .turn:not(.streaming) .sources li")
    before = frame.locator("#turns .turn").count()
    frame.locator("#question").fill(question)
    frame.locator("#question").press("Enter")
    frame.locator("#turns .turn:not(.streaming)").nth(before).wait_for()  # the frame's CSP forbids eval'd waits
    assert done.count() >= 1


def open_widget(page, assistant: ServiceProcess):
    launcher = page.get_by_role("button", name="Ask the docs")
    launcher.click()
    return launcher, opened_frame(page, assistant)


def opened_frame(page, assistant: ServiceProcess):
    """The panel's frame, once it has its visitor session and takes a question."""
    frame = widget_frame(page, assistant)
    frame.locator("#question:not([disabled])").wait_for()
    return frame


PUBLISHED = "https://docs.example.com/install/kubernetes/#installing-kestrel-on-kubernetes"


def with_published_urls(route) -> None:
    """The stored conversation as if its sources carried their published pages' URLs (a site crawl's sources do):
    the first turn's citations an https URL, the second's a javascript: one."""
    response = route.fetch()
    conversation = response.json()
    for turn, url in zip(conversation.get("turns", []), [PUBLISHED, "javascript:alert(1)"], strict=False):
        for citation in turn["citations"]:
            citation["url"] = url
    route.fulfill(response=response, json=conversation)


def test_a_docs_page_on_another_origin_asks_a_follow_up_that_streams_and_cites(
    assistant: ServiceProcess, sites, context
) -> None:
    docs, _ = sites
    url = docs.page("guide", NEUTRAL_CSS, assistant.url, title="Kestrel docs assistant", why="on")
    page = context.new_page()
    watch(page)
    page.goto(url)
    assert not [u for u in context.requests if u.startswith(assistant.url + "/v1/")]  # nothing until opened
    launcher, frame = open_widget(page, assistant)
    assert launcher.get_attribute("aria-expanded") == "true"
    assert frame.locator("#widget-title").inner_text() == "Kestrel docs assistant"
    assert frame.evaluate("document.activeElement.id") == "question"  # focus moved into the panel
    frame.evaluate(STREAM_WATCH)
    ask(frame, FIRST)
    assert frame.evaluate("window.__lengths"), "no answer text was shown while the turn streamed"
    ask(frame, FOLLOW_UP)
    turns = frame.locator("#turns .turn")
    assert turns.count() == 2
    for n in range(2):
        assert turns.nth(n).locator(".sources li").count() >= 1
        assert turns.nth(n).locator(".answer .cite").count() >= 1
    assert turns.nth(0).locator(".answer").get_attribute("aria-live") == "polite"
    why = turns.nth(1).locator("details.why")
    why.locator("summary").click()
    query = why.get_by_test_id("retrieval-query").inner_text()
    assert FOLLOW_UP.strip("?") in query and query.strip('“”"') != FOLLOW_UP  # resolved from the conversation
    page.screenshot(path=SCREENSHOTS / "widget-1280-follow-up.png")
    visitor_requests = [u for u in context.requests if u.startswith(assistant.url)]
    assert not [u for u in visitor_requests if "token" in u or "av1." in u]  # the token never in a URL

    turns.nth(0).locator(".answer .cite").first.click()  # no published URL here: the passage opens
    assert frame.locator("#passage").is_visible()
    frame.locator("#passage").press("Escape")
    assert not frame.locator("#passage").is_visible()
    assert not page.locator("[data-anaphora-widget] .panel").first.is_hidden()  # Esc closed the passage only

    context.route(f"{assistant.url}/v1/conversations/*", with_published_urls)
    page.reload()  # another page of the docs site, same tab: the conversation is still there
    launcher, frame = open_widget(page, assistant)
    frame.locator("#turns .turn").nth(1).wait_for()
    assert frame.locator("#turns .turn").count() == 2
    link = frame.locator("#turns .turn").nth(0).locator("a.source")
    assert link.get_attribute("href") == PUBLISHED and link.get_attribute("target") == "_blank"
    assert "noopener" in link.get_attribute("rel")
    assert frame.locator("#turns .turn").nth(0).locator("a.cite").first.get_attribute("href") == PUBLISHED
    unsafe = frame.locator("#turns .turn").nth(1)  # a javascript: URL is no link: the passage opens instead
    assert unsafe.locator("a").count() == 0 and unsafe.locator("button.source").count() >= 1
    frame.locator("#new-conversation").click()
    assert frame.locator("#turns .turn").count() == 0 and frame.locator("#empty").is_visible()


HOSTILE_ANSWER = '<img src=x onerror="alert(1)"><script>alert(2)</script> [open](javascript:alert(3)) **bold**'


def with_hostile_answer(route) -> None:
    """The stored conversation as if its answer held markup and a javascript: link (answers are untrusted)."""
    response = route.fetch()
    conversation = response.json()
    for turn in conversation.get("turns", []):
        turn["answer"] = HOSTILE_ANSWER
    route.fulfill(response=response, json=conversation)


def test_untrusted_text_stays_inert(assistant: ServiceProcess, sites, context) -> None:
    docs, _ = sites
    page = context.new_page()
    watch(page)
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    title = '<img src=x onerror="alert(4)">'
    page.goto(docs.page("inert", NEUTRAL_CSS, assistant.url, title=html.escape(title, quote=True)))
    _, frame = open_widget(page, assistant)
    assert frame.locator("#widget-title").inner_text() == title  # the host's title, as text
    ask(frame, FIRST)
    context.route(f"{assistant.url}/v1/conversations/*", with_hostile_answer)
    page.reload()
    _, frame = open_widget(page, assistant)
    answer = frame.locator("#turns .turn .answer").first
    answer.wait_for()
    assert "<img" in answer.inner_text() and "<script>" in answer.inner_text()
    assert frame.locator("#turns img, #turns script, #widget-title img").count() == 0
    assert frame.locator("#turns a[href^='javascript']").count() == 0
    assert answer.locator("strong").inner_text() == "bold"  # Markdown still renders
    page.wait_for_timeout(300)
    assert dialogs == []


def test_keyboard_tab_stays_in_the_panel_and_escape_returns_to_the_launcher(
    assistant: ServiceProcess, sites, context
) -> None:
    docs, _ = sites
    page = context.new_page()
    watch(page)
    page.goto(docs.page("keys", NEUTRAL_CSS, assistant.url))
    launcher = page.get_by_role("button", name="Ask the docs")
    launcher.focus()
    page.keyboard.press("Enter")
    frame = opened_frame(page, assistant)
    seen = set()
    for _ in range(12):
        page.keyboard.press("Tab")
        seen.add(frame.evaluate("document.activeElement.id || document.activeElement.tagName"))
    assert {"question", "new-conversation", "close"} <= seen, seen
    assert frame.evaluate("document.hasFocus()")  # focus never left the panel for the page
    page.keyboard.press("Escape")
    page.wait_for_function(f"{LAUNCHER}.getAttribute('aria-expanded') === 'false'")
    assert launcher.get_attribute("aria-expanded") == "false"
    assert page.locator("[data-anaphora-widget] .panel").is_hidden()
    assert launcher.evaluate("node => node.getRootNode().activeElement === node")


def test_a_page_on_an_origin_not_in_the_list_gets_no_answer(assistant: ServiceProcess, sites, context) -> None:
    _, other = sites
    page = context.new_page()
    page.goto(other.page("elsewhere", NEUTRAL_CSS, assistant.url))
    page.get_by_role("button", name="Ask the docs").click()
    page.wait_for_timeout(1500)
    frames = [f for f in page.frames if f.url.startswith(f"{assistant.url}/widget")]
    # frame-ancestors: Chromium refuses to show the panel (it shows its error page instead of the widget)
    assert all(f.locator("#question").count() == 0 for f in frames)
    assert not [u for u in context.requests if u.startswith(f"{assistant.url}/v1/")]
    direct = page.evaluate(
        """async (url) => {
          try {
            const r = await fetch(url + "/v1/visitor/session", {
              method: "POST",
              headers: {"Content-Type": "application/json"},
              body: JSON.stringify({site: location.origin}),
            });
            return "status " + r.status;
          } catch (e) { return "refused"; }
        }""",
        assistant.url,
    )
    assert direct == "refused"  # the API refuses the origin (403 without CORS): the page cannot read anything


def styles(page, selector: str) -> list:
    return page.locator(selector).evaluate_all(COMPUTED)


def test_styles_do_not_leak_in_or_out(assistant: ServiceProcess, sites, context) -> None:
    docs, _ = sites
    page = context.new_page()
    watch(page)
    page.goto(docs.page("bare", HOSTILE_CSS, None))
    page_without = styles(page, "h1, p, button, div.box, body")
    page.goto(docs.page("hostile", HOSTILE_CSS, assistant.url))
    _, frame = open_widget(page, assistant)
    page_with = styles(page, "h1, p, button.cta, div.box, body")
    assert page_with == page_without, "the widget changed the page's styles"
    hostile = (styles(page, "[data-anaphora-widget] >> .launcher"), styles(page, "[data-anaphora-widget] >> iframe"))
    inside = styles(frame, "#widget-title, #question, #send")
    page.goto(docs.page("plain", NEUTRAL_CSS, assistant.url))
    _, frame = open_widget(page, assistant)
    neutral = (styles(page, "[data-anaphora-widget] >> .launcher"), styles(page, "[data-anaphora-widget] >> iframe"))
    assert hostile == neutral, "the page's CSS changed the launcher or the panel"
    assert styles(frame, "#widget-title, #question, #send") == inside
    page.goto(docs.page("hostile", HOSTILE_CSS, assistant.url))
    open_widget(page, assistant)
    page.screenshot(path=SCREENSHOTS / "widget-hostile-page.png")
    assert "Comic" not in hostile[0][0][0] and hostile[1][0][-1] > 300  # the panel is shown, full size


@pytest.mark.parametrize("width", [390, 1280, 1920])
def test_screenshots_at_phone_and_desktop_width(assistant: ServiceProcess, sites, context, width: int) -> None:
    docs, _ = sites
    page = context.new_page()
    page.set_viewport_size({"width": width, "height": {390: 844, 1280: 860, 1920: 1080}[width]})
    page.goto(docs.page(f"shot-{width}", NEUTRAL_CSS, assistant.url, why="on"))
    page.screenshot(path=SCREENSHOTS / f"widget-{width}-closed.png")
    _, frame = open_widget(page, assistant)
    ask(frame, FIRST)
    box = page.locator("[data-anaphora-widget] >> iframe").bounding_box()
    if width == 390:
        assert box["width"] == 390 and box["x"] == 0  # the panel takes the phone's screen
    else:
        assert 380 <= box["width"] <= 420 and box["x"] > width / 2  # a panel in the corner, the page still visible
    overflow = frame.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0, "the panel scrolls sideways"
    page.screenshot(path=SCREENSHOTS / f"widget-{width}.png")
    artifacts = Path(os.environ.get("ANAPHORA_TEST_ARTIFACTS", "tmp/artifacts/browser"))
    artifacts.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SCREENSHOTS / f"widget-{width}.png", artifacts / f"widget-{width}.png")
