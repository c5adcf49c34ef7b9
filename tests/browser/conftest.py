"""Fixtures for the browser tests: Debian's Chromium driven by Playwright, kept off the network, against live
`anaphora serve` processes on loopback with the fake chat model (one in dev mode, one with JWT auth).

Every page records its requests, browser dialogs and console errors; after each test no request may have gone to
another host and no dialog (alert, confirm, prompt) may have opened. Screenshots go to ARTIFACTS."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import ROOT, SAMPLE_DOCS, unavailable
from tests.integration.services import ServiceProcess, base_settings

try:
    from playwright import sync_api as playwright_sync
except ImportError:
    playwright_sync = None

CHROMIUM = os.environ.get("ANAPHORA_TEST_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(os.environ.get("ANAPHORA_TEST_ARTIFACTS", ROOT / "tmp" / "artifacts" / "browser"))
# Off the network: no QUIC, no background or component updates, no sync, no first-run pings.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--metrics-recording-only",
]
TOKEN_DELAY_S = 0.02  # the fake model paces its words like a model generating them (deltas go out per sentence)


@pytest.fixture(scope="session", autouse=True)
def browser_stack() -> None:
    """Checked before any server starts: without a browser the tests skip at once, with the reason (under
    .ci/run, ANAPHORA_TEST_REQUIRE_SERVERS=1, they fail instead)."""
    if playwright_sync is None:
        unavailable("playwright is not installed (it comes with the `test` extra)")
    if not Path(CHROMIUM).exists():
        unavailable(
            f"no Chromium at {CHROMIUM}: `make install-test` installs Debian's package as root "
            "(else: sudo apt-get install -y chromium, or set ANAPHORA_TEST_CHROMIUM)"
        )


@pytest.fixture(scope="module")
def browser(browser_stack: None) -> Iterator[object]:
    """Module-scoped: Playwright's sync API runs an event loop in this thread while it is open, which the rest of
    the suite (pytest-asyncio, the synchronous library) must not find still running."""
    with playwright_sync.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


def ingest(env: dict[str, str], *paths: Path) -> None:
    """`anaphora ingest` in a child process: Playwright's sync API keeps an event loop running in this thread,
    where the synchronous library cannot run its own."""
    children = {k: v for k, v in os.environ.items() if not k.startswith("ANAPHORA_")} | env
    subprocess.run(
        [sys.executable, "-m", "anaphora", "ingest", *map(str, paths)],
        env=children,
        check=True,
        capture_output=True,
        timeout=300,
    )


def _serve(
    tmp_path_factory: pytest.TempPathFactory, name: str, *, token_delay_s: float = TOKEN_DELAY_S, **settings: object
) -> Iterator[ServiceProcess]:
    root = tmp_path_factory.mktemp(name)
    env = base_settings(root / "data", chat_model=f"fake:{token_delay_s}", **settings)
    ingest(env, SAMPLE_DOCS)
    service = ServiceProcess(env, root, name=name).start()
    try:
        yield service
    finally:
        service.stop()
    assert '"level": "ERROR"' not in service.log_tail(200_000), service.log_tail()


@pytest.fixture(scope="module")
def dev_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    """`anaphora serve` in dev mode (auth none): every request is user 'local', documents may be uploaded."""
    yield from _serve(tmp_path_factory, "dev", auth="none")


@pytest.fixture(scope="module")
def slow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    """Dev mode with a model that streams a word every 150 ms: a turn long enough to stop halfway."""
    yield from _serve(tmp_path_factory, "slow", auth="none", token_delay_s=0.15)


@pytest.fixture(scope="module")
def jwt_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    """`anaphora serve` with HS256 JWT auth (tests.server_harness.SECRET)."""
    yield from _serve(tmp_path_factory, "jwt", auth="jwt")


@dataclass
class Recorder:
    """What a page did that a test must check: every request URL, dialogs that opened, console errors."""

    origin: str
    requests: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    bytes_by_url: dict[str, int] = field(default_factory=dict)

    def attach(self, page) -> None:
        page.on("request", lambda request: self.requests.append(request.url))
        page.on("dialog", self._dialog)
        page.on("console", lambda message: message.type == "error" and self.console_errors.append(message.text))
        page.on("pageerror", lambda error: self.console_errors.append(f"uncaught: {error}"))

    def _dialog(self, dialog) -> None:
        self.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    def foreign_requests(self) -> list[str]:
        return [url for url in self.requests if not (url.startswith(self.origin + "/") or url.startswith("data:"))]


@pytest.fixture
def open_page(browser, artifacts: Path) -> Iterator:
    """``open_page(server, **context_options)`` -> (page, recorder); checks the recorders when the test ends."""
    contexts: list[tuple[object, Recorder]] = []

    def opener(server: ServiceProcess, **options):
        context = browser.new_context(base_url=server.url, **options)
        context.set_default_timeout(15_000)
        page = context.new_page()
        recorder = Recorder(server.url)
        recorder.attach(page)
        contexts.append((context, recorder))
        return page, recorder

    yield opener
    for context, recorder in contexts:
        context.close()
        assert recorder.dialogs == [], f"a dialog opened: {recorder.dialogs}"
        assert recorder.foreign_requests() == [], f"requests to another host: {recorder.foreign_requests()}"
        refused = [m for m in recorder.console_errors if "Content Security Policy" in m or "uncaught" in m]
        assert refused == [], f"CSP violations or uncaught errors: {refused}"


def keep_for_docs(screenshot: Path, name: str) -> None:
    """Copy a screenshot into docs/images when ANAPHORA_UPDATE_DOC_IMAGES=1 (the README shows them)."""
    if os.environ.get("ANAPHORA_UPDATE_DOC_IMAGES") == "1":
        target = ROOT / "docs" / "images" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(screenshot, target)
