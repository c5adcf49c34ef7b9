"""The hostile-text checks of tests/unit/server/test_hostile_text.py on PostgreSQL (conversations, memory and
passages), where a NUL in an id or a user id used to be a 500 (issue 51)."""

from __future__ import annotations

import pytest

from tests.server_harness import components_for, serve, settings_for
from tests.unit.server.test_hostile_text import (  # collected here again, against this module's `running`
    test_a_lone_surrogate_in_a_json_key_is_refused_before_anything_is_stored,
    test_a_nul_in_a_path_id_is_404_on_every_route,
    test_a_title_holding_a_nul_is_refused_and_the_old_title_kept,
    test_a_token_whose_sub_holds_a_lone_surrogate_or_a_nul_is_401_on_every_route,
)

pytestmark = pytest.mark.integration
__all__ = [
    "test_a_lone_surrogate_in_a_json_key_is_refused_before_anything_is_stored",
    "test_a_nul_in_a_path_id_is_404_on_every_route",
    "test_a_title_holding_a_nul_is_refused_and_the_old_title_kept",
    "test_a_token_whose_sub_holds_a_lone_surrogate_or_a_nul_is_401_on_every_route",
]


@pytest.fixture(scope="module")
def running(tmp_path_factory, new_database):
    url = new_database()
    settings = settings_for(
        tmp_path_factory.mktemp("hostile-pg"), conversation_store="postgres", passage_store="postgres", postgres_url=url
    )
    with serve(settings, components_for(settings)) as server:
        yield server


def test_the_postgres_stores_answer_not_found_for_a_nul_id_in_the_library_too(running) -> None:
    import asyncio

    from anaphora.errors import MemoryNotFoundError, NotFoundError
    from anaphora.memory.forget import forget

    components = running.components

    async def attempts() -> None:
        with pytest.raises(NotFoundError):
            await components.conversations.get("alice", "conv\x00x")
        with pytest.raises(MemoryNotFoundError):
            await forget(components.memory, "alice", "mem\x00x")

    asyncio.run(attempts())
