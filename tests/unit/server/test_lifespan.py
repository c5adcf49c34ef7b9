"""The running service is one frozen value, made in the app's lifespan and gone with it; a start that fails undoes
what had started, and the routes say the service has not started rather than use half of one."""

from __future__ import annotations

import dataclasses

import pytest

from anaphora.errors import StoreError
from anaphora.server.app import create_app
from anaphora.server.state import Service
from tests.server_harness import components_for, serve, settings_for

pytestmark = pytest.mark.unit


def test_the_service_exists_only_while_the_app_runs(tmp_path) -> None:
    settings = settings_for(tmp_path, history_ttl_s=100)
    components = components_for(settings, ingest=False)
    app = create_app(settings, components=components)
    assert not hasattr(app.state, "service")  # nothing to use before start
    with serve(settings, components) as running, running.client("alice") as http:
        service = running.app.state.service
        assert isinstance(service, Service) and service.components is components
        with pytest.raises(dataclasses.FrozenInstanceError):
            service.runner = None  # type: ignore[misc]
        assert http.post("/v1/conversations").status_code == 201
        sweeper = service.sweeper
        assert sweeper is not None and sweeper.running
    assert not hasattr(running.app.state, "service") and not sweeper.running
    components.database.close()


async def test_a_start_that_fails_closes_what_it_opened(tmp_path) -> None:
    """A memory store that cannot open: the owned components' local files are closed, no service is left."""
    settings = settings_for(tmp_path)
    components = components_for(settings, ingest=False)
    entered: list[str] = []

    async def unreachable() -> None:
        raise StoreError("cannot connect to the memory store", hint="start it")

    components.memory.open = unreachable  # type: ignore[method-assign]
    app = create_app(settings, components=components, owns_components=True)
    with pytest.raises(StoreError, match="cannot connect"):
        async with app.router.lifespan_context(app):
            entered.append("started")
    assert not entered and not hasattr(app.state, "service")
    with pytest.raises(Exception, match="closed database"):
        components.database.query("SELECT 1")
