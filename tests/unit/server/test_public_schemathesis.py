"""A bounded schemathesis run over the whole API as an anonymous visitor of public mode: no request, however odd,
gets a 5xx (the closed routes answer 403, the limits 429, the rest as for a user)."""

from __future__ import annotations

import json

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig

from anaphora.server import create_app
from anaphora.server.visitors import VisitorTokens
from tests.conftest import ROOT
from tests.server_harness import components_for, settings_for

pytestmark = pytest.mark.unit
SITE = "https://docs.example.com"
CONFIG = SchemathesisConfig.from_dict({})
schema = schemathesis.openapi.from_dict(
    json.loads((ROOT / "docs" / "openapi.json").read_text(encoding="utf-8")), config=CONFIG
)


@pytest.fixture
def app(tmp_path):
    configured = settings_for(
        tmp_path, public_mode=True, public_origins=[SITE], visitor_secret="v" * 40, visitor_turns_per_minute=1000
    )
    components = components_for(configured)
    try:
        app = create_app(configured, components=components)
        app.state.visitor_tokens = VisitorTokens(configured.public)  # signs as the service does (the same secret)
        yield app
    finally:
        components.database.close()


@schema.parametrize()
@settings(max_examples=5, deadline=None, database=None, suppress_health_check=list(HealthCheck))
def test_no_server_errors_as_a_visitor(case, app) -> None:
    token = app.state.visitor_tokens.issue(SITE).token
    headers = {**(case.headers or {}), "Authorization": f"Bearer {token}"}
    response = case.call(app=app, headers=headers)
    assert response.status_code < 500, (case.method, case.path, response.status_code, response.text[:500])
    if case.path.startswith(("/v1/memories", "/v1/documents", "/v1/jobs")):  # the run is a visitor's indeed
        # 405: a method schemathesis tries that the path does not take; 404: a path no route takes at all (a newline
        # inside "{source:path}": Starlette's path parameter stops at it), for a visitor as for anyone
        unroutable = response.status_code == 404 and "no route" in response.text
        assert response.status_code in (403, 405) or unroutable, (case.method, case.path, response.text[:300])
    case.validate_response(response, checks=[not_a_server_error])


def test_a_path_no_route_takes_is_a_404_for_a_visitor_and_a_managed_one_a_403(app) -> None:
    """The case a schemathesis run once drew: a document source with a newline inside is no route at all."""
    from fastapi.testclient import TestClient

    token = app.state.visitor_tokens.issue(SITE).token
    with TestClient(app) as client:
        closed = client.delete("/v1/documents/guide.md", headers={"Authorization": f"Bearer {token}"})
        unroutable = client.delete("/v1/documents/0%0Ax", headers={"Authorization": f"Bearer {token}"})
    assert closed.status_code == 403
    assert unroutable.status_code == 404 and "no route" in unroutable.text
