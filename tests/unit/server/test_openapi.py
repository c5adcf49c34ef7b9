"""The committed OpenAPI document matches the app, and a property-based run of the whole API finds no 5xx, no
response the document does not declare (status, media type, body schema, headers, Allow on 405), no request the
document allows that the server refuses as invalid, and no request it forbids that the server takes."""

from __future__ import annotations

import json

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import (
    allow_header_conformance,
    content_type_conformance,
    negative_data_rejection,
    positive_data_acceptance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from anaphora.server import create_app
from anaphora.server.openapi import REGENERATE, spec
from tests.conftest import ROOT
from tests.server_harness import components_for, settings_for

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
    positive_data_acceptance,
    negative_data_rejection,
]
# Data the document allows must not get a 422 (the request schema's own refusal): a 422 for it means the document
# promises more than the server takes (NUL text, a user message without content). 400 stays allowed: input that
# fits the schema and that the service refuses for what it means (an empty question, a history not ending with
# the user). Data the document forbids must get a 4xx.
CONFIG = SchemathesisConfig.from_dict(
    {"checks": {"positive_data_acceptance": {"expected-statuses": ["2xx", "400", "401", "403", "404", "409", "429"]}}}
)
# the committed document (checked above), so generation does not need an app at import time
schema = schemathesis.openapi.from_dict(json.loads(COMMITTED.read_text(encoding="utf-8")), config=CONFIG)


@schema.parametrize()
@settings(
    max_examples=8,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_no_server_errors(case, app, tmp_path) -> None:
    body = case.body
    documents = case.method == "POST" and case.path == "/v1/documents" and isinstance(body, dict)
    path = body.get("path") if documents else None
    if isinstance(path, str) and 0 < len(path) <= 4096:  # else a refusal is what is tested
        body["path"] = str(tmp_path / "docs" / path.replace("/", "_")[:100])  # never "/"
    case.call_and_validate(app=app, checks=CHECKS)


def test_an_unknown_after_item_is_a_documented_400(app) -> None:
    """Found by schemathesis (issue 51): GET .../items?after=<no such item> answered a 400 the spec did not list."""
    from fastapi.testclient import TestClient

    documented = json.loads(COMMITTED.read_text(encoding="utf-8"))["paths"]
    assert "400" in documented["/v1/conversations/{conversation_id}/items"]["get"]["responses"]
    with TestClient(app) as client:
        conversation = client.post("/v1/conversations").json()["id"]
        listed = client.get(f"/v1/conversations/{conversation}/items", params={"after": "msg_nothing_0"})
    assert listed.status_code == 400 and listed.json()["error"]["param"] == "after"
