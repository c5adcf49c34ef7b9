"""The committed OpenAPI document matches the app, and a property-based run of the whole API finds no 5xx and no
response the document does not declare (status, media type, body schema, headers, Allow on 405)."""

from __future__ import annotations

import json

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    allow_header_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from anaphora.server import create_app
from anaphora.server.openapi import REGENERATE, spec
from tests.conftest import ROOT
from tests.unit.test_server_harness import components_for, settings_for

pytestmark = pytest.mark.unit
COMMITTED = ROOT / "docs" / "openapi.json"


def test_committed_spec_matches_the_app() -> None:
    committed = json.loads(COMMITTED.read_text(encoding="utf-8"))
    assert committed == spec(), f"docs/openapi.json is stale: regenerate it with `{REGENERATE}`"


@pytest.fixture
def app(tmp_path):
    configured = settings_for(tmp_path, auth="none", dev_allowed_hosts=["testserver"])  # the ASGI client's Host
    components = components_for(configured)
    try:
        yield create_app(configured, components=components)
    finally:
        components.database.close()


CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
    allow_header_conformance,
]
# the committed document (checked above), so generation does not need an app at import time
schema = schemathesis.openapi.from_dict(json.loads(COMMITTED.read_text(encoding="utf-8")))


@schema.parametrize()
@settings(
    max_examples=8,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_no_server_errors(case, app, tmp_path) -> None:
    if case.method == "POST" and case.path == "/v1/documents" and isinstance(case.body, dict) and "path" in case.body:
        case.body["path"] = str(tmp_path / "docs" / str(case.body["path"]).replace("/", "_")[:100])  # never "/"
    case.call_and_validate(app=app, checks=CHECKS)
