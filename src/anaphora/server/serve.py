"""``anaphora serve``: refuse unsafe or self-referential set-ups, then run uvicorn (one process, or several
workers behind one port)."""

from __future__ import annotations

import ipaddress
import json
import os
from typing import Any
from urllib.parse import urlsplit

from anaphora.errors import ConfigurationError
from anaphora.settings import Settings, load_settings

OVERRIDES_ENV = "ANAPHORA_SERVE_OVERRIDES"  # the CLI's settings overrides, handed to each worker process
# uvicorn kills a worker that does not answer its health check in time (5 s by default) and starts another; a worker
# loading its models on a busy machine holds the GIL for longer than that, and was restarted in a loop
WORKER_HEALTHCHECK_S = 60


def is_loopback(host: str) -> bool:
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name we will not resolve here, or "": assume it is reachable from outside


def check(settings: Settings, *, force_insecure: bool = False) -> None:
    host, port = settings.server.server_host, settings.server.server_port
    if settings.server.auth == "none" and not is_loopback(host) and not force_insecure:
        raise ConfigurationError(
            f"refusing to serve on {host or 'all interfaces'} without authentication (auth is 'none'): anyone who "
            "can reach this address would act as user 'local' and read or delete every conversation",
            hint="listen on 127.0.0.1 (--host 127.0.0.1), or configure JWT auth (ANAPHORA_AUTH=jwt with "
            "ANAPHORA_JWT_SECRET or ANAPHORA_JWT_PUBLIC_KEY), or pass --force-insecure on a network you trust",
        )
    if settings.models.chat_model.startswith("openai:"):
        upstream = urlsplit(settings.models.openai_base_url)
        same_port = (upstream.port or (443 if upstream.scheme == "https" else 80)) == port
        same_host = upstream.hostname == host or (is_loopback(upstream.hostname or "") and is_loopback(host))
        if same_port and same_host:
            raise ConfigurationError(
                f"the chat model's endpoint {settings.models.openai_base_url} is this server's own address",
                hint="point ANAPHORA_OPENAI_BASE_URL at the model server, or serve on another --port",
            )


def check_workers(settings: Settings, workers: int) -> None:
    """Several worker processes must share what orders a conversation's turns; sessions kept in one process's
    memory would start over whenever a request lands on another worker."""
    from anaphora.server.coordination import turn_lock_kind

    if workers > 1 and turn_lock_kind(settings) == "process":
        raise ConfigurationError(
            f"{workers} workers cannot share the turn lock 'process': two workers could run one conversation's "
            "turns at once",
            hint="set ANAPHORA_TURN_LOCK=redis (with ANAPHORA_REDIS_URL) or postgres (with ANAPHORA_POSTGRES_URL), "
            "or serve with --workers 1",
        )
    public = settings.public
    if workers > 1 and public.public_mode and not public.visitor_secret.get_secret_value():
        raise ConfigurationError(
            f"{workers} workers cannot share visitor sessions signed with a key of each process (visitor_secret "
            "is empty)",
            hint="set ANAPHORA_VISITOR_SECRET to a random secret of at least 32 bytes (openssl rand -hex 32), "
            "or serve with --workers 1",
        )
    if workers > 1 and settings.server.session_store == "memory":
        raise ConfigurationError(
            f"{workers} workers cannot share sessions kept in memory (session_store 'memory')",
            hint="set ANAPHORA_SESSION_STORE=redis (with ANAPHORA_REDIS_URL), or serve with --workers 1",
        )


def worker_app():
    """The app of one worker process (``uvicorn --factory``): the settings the CLI was given, its own components."""
    from anaphora.server.app import create_app
    from anaphora.server.logs import configure_logging

    configure_logging()
    return create_app(load_settings(**json.loads(os.environ.get(OVERRIDES_ENV) or "{}")))


def run_workers(settings: Settings, overrides: dict[str, Any], workers: int, *, force_insecure: bool = False) -> None:
    """Serve with ``workers`` processes behind one port (uvicorn's workers). Each builds its own components from
    the same settings (``overrides``: what the CLI was given on top of the environment and the TOML file)."""
    check(settings, force_insecure=force_insecure)
    check_workers(settings, workers)
    from anaphora.app import build_components
    from anaphora.server.auth import build_authenticator

    build_authenticator(settings.server)
    build_components(settings).database.close()  # a broken store or settings fail here, as a CLI error
    os.environ[OVERRIDES_ENV] = json.dumps({k: v for k, v in overrides.items() if v is not None}, default=str)
    _uvicorn(
        settings,
        "anaphora.server.serve:worker_app",
        factory=True,
        workers=workers,
        timeout_worker_healthcheck=WORKER_HEALTHCHECK_S,
    )


def run(settings: Settings, *, force_insecure: bool = False) -> None:
    """Check the set-up and the auth settings, build the components (so that errors surface as CLI errors, not as
    a failed ASGI startup), then serve until interrupted; shutdown drains the turns and closes the components."""
    check(settings, force_insecure=force_insecure)
    from anaphora.app import build_components
    from anaphora.server.app import create_app
    from anaphora.server.auth import build_authenticator
    from anaphora.server.logs import configure_logging

    build_authenticator(settings.server)  # fail on bad auth settings before opening anything
    app = create_app(settings, components=build_components(settings), owns_components=True)
    configure_logging()  # JSON lines with request ids; the app logs each request itself
    _uvicorn(settings, app)


def _uvicorn(settings: Settings, app: Any, **options: Any) -> None:
    import uvicorn

    uvicorn.run(
        app,
        host=settings.server.server_host,
        port=settings.server.server_port,
        timeout_graceful_shutdown=settings.server.shutdown_grace_s,
        log_level="info",
        log_config=None,
        access_log=False,
        **options,
    )
