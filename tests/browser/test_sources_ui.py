"""Published sources on the web page, in headless Chromium: an answer's sources open the published page in a new
tab (a safe http(s) link, no opener), and the documents panel lists the sources with their last sync."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.browser.test_web_ui import DESKTOP, FIRST, ask
from tests.conftest import SAMPLE_DOCS
from tests.integration.services import ServiceProcess, base_settings

pytestmark = [pytest.mark.integration, pytest.mark.slow]
BASE = "https://docs.example.com/kestrel/"


@pytest.fixture(scope="module")
def published_server(tmp_path_factory: pytest.TempPathFactory, browser_stack: None) -> Iterator[ServiceProcess]:
    """Dev mode (auth none) over the sample docs ingested with a base URL."""
    root = tmp_path_factory.mktemp("published")
    env = base_settings(root / "data", chat_model="fake:0.0", auth="none")
    children = {k: v for k, v in os.environ.items() if not k.startswith("ANAPHORA_")} | env
    command = [sys.executable, "-m", "anaphora", "ingest", "--base-url", BASE, "--generator", "mkdocs"]
    subprocess.run([*command, str(SAMPLE_DOCS)], env=children, check=True, capture_output=True, timeout=300)
    service = ServiceProcess(env, root, name="published").start()
    try:
        yield service
    finally:
        service.stop()


def test_sources_open_the_published_page_in_a_new_tab_and_the_panel_lists_them(
    published_server: ServiceProcess, open_page
) -> None:
    page, _ = open_page(published_server, viewport=DESKTOP)
    page.goto("/")
    page.locator("#question").wait_for()
    ask(page, FIRST)
    links = page.locator("#turns .turn .sources a.source-link")
    assert links.count() >= 1
    for n in range(links.count()):
        link = links.nth(n)
        assert link.get_attribute("href").startswith(BASE)
        assert link.get_attribute("target") == "_blank" and "noopener" in link.get_attribute("rel")
    page.locator("#source-box").wait_for()
    assert page.locator("#source-count").inner_text() == "1 source"
    page.locator("#source-count").click()  # the list opens
    row = page.locator("#source-list li").first.inner_text()
    assert "examples/docs" in row and BASE in row and "last sync 20" in row and "folder" in row
