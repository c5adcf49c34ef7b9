"""Hostile text where the text policy did not look (issue 51), on the SQLite store: a lone surrogate in a JSON key
is a 422 that stores nothing (streamed too), a token whose ``sub`` holds a lone surrogate or a NUL is a 401 on every
route, a NUL in a path id is a 404 on every route. tests/integration/test_hostile_text_postgres.py runs the same
checks on PostgreSQL."""

from __future__ import annotations

import pytest

from tests import hostile_requests as hostile
from tests.server_harness import components_for, serve, settings_for

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    settings = settings_for(tmp_path_factory.mktemp("hostile"))
    with serve(settings, components_for(settings)) as server:
        yield server


def test_a_lone_surrogate_in_a_json_key_is_refused_before_anything_is_stored(running) -> None:
    before = hostile.stored_conversations(running)
    seen = dict(hostile.surrogate_keys_refused(running))
    assert seen == {
        "responses metadata": 422,
        "responses metadata, streamed": 422,
        "responses unknown key": 422,  # a key that is no string: refused before it is looked at
        "conversation metadata": 422,
        "chat unknown key": 200,  # ignored, as OpenAI's extras are; a chat completion stores nothing
    }
    assert hostile.stored_conversations(running) == before, "a refused request stored nothing"


def test_a_token_whose_sub_holds_a_lone_surrogate_or_a_nul_is_401_on_every_route(running) -> None:
    seen = hostile.subjects_refused(running)
    for name, statuses in seen.items():
        assert statuses and set(statuses) == {401}, (name, statuses)


def test_a_nul_in_a_path_id_is_404_on_every_route(running) -> None:
    seen = hostile.nul_ids_not_found(running)
    assert len(seen) >= 10
    assert {status for _, _, status in seen} == {404}, [s for s in seen if s[2] != 404]


def test_a_title_holding_a_nul_is_refused_and_the_old_title_kept(running) -> None:
    """Renaming took any string: a NUL was stored as it came (SQLite) or changed to U+FFFD (PostgreSQL)."""
    with running.client("alice") as http:
        conversation = http.post("/v1/conversations", json={"title": "kept"}).json()["id"]
        renamed = hostile.post_json(http, f"/v1/conversations/{conversation}", {"title": "a\x00b"}, method="PATCH")
        assert renamed.status_code == 422 and renamed.json()["error"]["param"] == "title", renamed.text
        assert http.get(f"/v1/conversations/{conversation}").json()["title"] == "kept"
