"""The Responses chain tests of tests/unit/server/test_response_chains.py (bounded input, turns stored whole or
not at all, paged reads), run with the conversations in PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from anaphora import Settings
from tests.server_harness import settings_for

pytestmark = pytest.mark.integration
pytest.importorskip("psycopg", reason="the postgres extra is not installed")

from tests.unit.server.test_response_chains import (  # noqa: E402,F401 - collected here, on PostgreSQL
    running,
    test_a_branch_is_stored_with_its_turn_under_the_id_the_stream_announced,
    test_a_failing_model_stores_no_branch_and_no_input_items,
    test_a_long_conversation_is_read_a_page_at_a_time,
    test_a_question_empty_after_sanitizing_stores_nothing_however_it_is_placed,
    test_a_turn_over_the_users_limit_is_refused_before_anything_is_written,
    test_input_is_capped_like_the_other_routes_and_refused_before_anything_is_stored,
    test_requests_continuing_the_same_response_at_once_each_follow_it,
)


@pytest.fixture
def server_settings(tmp_path, new_database) -> Callable[..., Settings]:
    url = new_database()
    return lambda **overrides: settings_for(tmp_path, conversation_store="postgres", postgres_url=url, **overrides)
