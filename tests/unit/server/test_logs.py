"""Request ids (X-Request-ID assigned or propagated) and JSON log lines that carry them."""

from __future__ import annotations

import asyncio
import io
import json
import logging

import pytest

from anaphora.server.logs import JsonFormatter, RequestIdFilter, configure_logging
from tests.server_harness import components_for, serve, settings_for

pytestmark = pytest.mark.unit
probe_log = logging.getLogger("anaphora.server.probe")


class Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self.addFilter(RequestIdFilter())

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def running(tmp_path):
    settings = settings_for(tmp_path, auth="none")
    with serve(settings, components_for(settings, ingest=False)) as server:

        async def probe() -> dict[str, str]:
            probe_log.warning("in the handler")
            await asyncio.to_thread(probe_log.warning, "in a worker thread")
            return {"ok": "yes"}

        server.app.add_api_route("/probe", probe)
        yield server


@pytest.fixture
def capture():
    handler = Capture()
    logger = logging.getLogger("anaphora.server")
    logger.addHandler(handler)
    previous = logger.level
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(previous)


def test_request_id_is_assigned_or_propagated(running) -> None:
    with running.client(None) as http:
        generated = http.get("/healthz").headers["X-Request-ID"]
        assert len(generated) == 32 and http.get("/healthz").headers["X-Request-ID"] != generated
        assert http.get("/healthz", headers={"X-Request-ID": "abc-123.x:y"}).headers["X-Request-ID"] == "abc-123.x:y"
        assert http.get("/v1/conversations/nope", headers={"X-Request-ID": "r1"}).headers["X-Request-ID"] == "r1"
        for bad in ("has space", "x" * 129, "new\\nline"):
            echoed = http.get("/healthz", headers={"X-Request-ID": bad}).headers["X-Request-ID"]
            assert echoed != bad and len(echoed) == 32  # not a safe token: replaced, never logged as given


def test_log_records_made_during_a_request_carry_its_id(running, capture) -> None:
    with running.client(None) as http:
        response = http.get("/probe", headers={"X-Request-ID": "req-42"})
        other = http.get("/probe").headers["X-Request-ID"]
    assert response.json() == {"ok": "yes"}
    mine = [r for r in capture.records if r.request_id == "req-42"]
    assert [r.getMessage() for r in mine if r.name == probe_log.name] == ["in the handler", "in a worker thread"]
    access = [r for r in mine if r.name == "anaphora.server.access"]
    assert len(access) == 1 and access[0].status == 200 and access[0].path == "/probe"
    assert {r.request_id for r in capture.records if r.name == probe_log.name} == {"req-42", other}
    line = json.loads(JsonFormatter().format(mine[0]))
    assert line["request_id"] == "req-42" and line["level"] == "WARNING" and line["message"] == "in the handler"
    outside = logging.LogRecord("x", logging.INFO, __file__, 1, "no request", None, None)
    assert RequestIdFilter().filter(outside) and outside.request_id is None


def test_json_logging_is_configured_only_on_demand() -> None:
    root = logging.getLogger()
    assert not any(isinstance(h.formatter, JsonFormatter) for h in root.handlers)  # importing configured nothing
    saved, level = list(root.handlers), root.level
    stream = io.StringIO()
    try:
        configure_logging(logging.INFO, stream)
        try:
            raise ValueError("boom")
        except ValueError:
            logging.getLogger("anaphora.server").exception("failed %s", "here", extra={"job": "j1"})
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in saved:
            root.addHandler(handler)
        root.setLevel(level)
    entry = json.loads(stream.getvalue().strip().splitlines()[-1])
    assert entry["message"] == "failed here" and entry["job"] == "j1" and entry["request_id"] is None
    assert entry["logger"] == "anaphora.server" and "ValueError: boom" in entry["exc_info"] and entry["ts"]
