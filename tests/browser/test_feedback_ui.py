"""The page's votes, support link and report view, in Debian's Chromium against `anaphora serve` (dev mode, the
fake model, a support link set): a vote and its comment survive a reload and reach the API, pressing the vote again
withdraws it, a refused answer offers the support link, and the report lists the gap and the thumbs-down."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.browser.conftest import _serve
from tests.browser.test_web_ui import DESKTOP, ask, conversation_id
from tests.integration.services import ServiceProcess

pytestmark = pytest.mark.integration
SUPPORT = "https://support.example.com/new-ticket"
ANSWERED = "How do I install Kestrel on Kubernetes?"
REFUSED = "How do I configure the Zanzibar flux capacitor quorum?"
PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def feedback_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    """Dev mode (everyone may read the report) with a support link, at the hashing embedder's relevance floor
    that refuses what the sample documents do not cover (tests/unit/report)."""
    yield from _serve(tmp_path_factory, "feedback", auth="none", support_url=SUPPORT, similarity_threshold="0.2")


def test_votes_the_support_link_and_the_report(feedback_server: ServiceProcess, open_page, artifacts: Path) -> None:
    page, _ = open_page(feedback_server, viewport=DESKTOP)
    page.goto("/")
    page.locator("#question").wait_for()
    ask(page, ANSWERED)
    cid = conversation_id(page)
    first = page.locator("#turns .turn").nth(0)
    assert first.locator(".handoff").count() == 0  # answered with support: no link
    first.get_by_role("button", name="Not helpful").click()
    first.locator(".feedback-comment textarea").fill("The ARM steps are missing")
    first.get_by_role("button", name="Send comment").click()
    page.wait_for_function("() => document.querySelector('.feedback-status').textContent.includes('Thanks')")
    stored = httpx.get(f"{feedback_server.url}/v1/conversations/{cid}").json()["turns"][0]["feedback"]
    assert (stored["vote"], stored["comment"]) == ("down", "The ARM steps are missing")

    ask(page, REFUSED)
    refused = page.locator("#turns .turn").nth(1)
    link = refused.locator(".handoff a")
    assert link.get_attribute("href") == SUPPORT and link.inner_text() == "Contact support"
    assert "did not answer" in refused.locator(".handoff").inner_text()

    page.reload()
    page.locator("#turns .turn .feedback").nth(1).wait_for()
    first = page.locator("#turns .turn").nth(0)
    assert first.get_by_role("button", name="Not helpful").get_attribute("aria-pressed") == "true"
    assert first.get_by_role("button", name="Helpful", exact=True).get_attribute("aria-pressed") == "false"
    assert first.locator(".feedback-comment textarea").input_value() == "The ARM steps are missing"
    assert page.locator("#turns .turn").nth(1).locator(".handoff a").get_attribute("href") == SUPPORT
    page.screenshot(path=artifacts / "feedback.png")

    page.locator("#open-report").click()
    report = page.locator("#report")
    report.get_by_role("heading", name="Documentation gaps").wait_for()
    tables = report.inner_text()
    assert REFUSED in tables and "The ARM steps are missing" in tables and "install-kubernetes.md" in tables
    page.screenshot(path=artifacts / "report-1280.png")
    phone, _ = open_page(feedback_server, viewport=PHONE)
    phone.goto("/")
    phone.locator("#question").wait_for()
    phone.locator("#toggle-sidebar").click()
    phone.locator("#open-report").click()
    phone.locator("#report").get_by_role("heading", name="Thumbs down").wait_for()
    wide = phone.evaluate("() => document.querySelector('#report').scrollWidth <= window.innerWidth")
    assert wide, "the report is wider than the phone's screen"
    phone.screenshot(path=artifacts / "report-390.png")
    page.keyboard.press("Escape")

    first.get_by_role("button", name="Not helpful").click()  # pressed again: withdrawn
    page.wait_for_function("() => document.querySelector('.feedback-status').textContent.includes('withdrawn')")
    assert httpx.get(f"{feedback_server.url}/v1/conversations/{cid}").json()["turns"][0]["feedback"] is None
