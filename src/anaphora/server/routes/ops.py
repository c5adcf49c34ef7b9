"""Liveness, readiness and Prometheus metrics; no authentication on these."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from anaphora.server.routes.deps import Svc

router = APIRouter(tags=["operations"])


@router.get("/healthz", summary="The process is alive")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="The stores answer (SQLite, and the networked conversation and memory stores if any)")
async def readyz(svc: Svc) -> JSONResponse:
    checks: dict[str, str] = {}
    components = svc.components
    try:
        components.database.query("SELECT 1")
        await components.conversations.ping()
        await components.memory.ping()
        checks["store"] = "ok"
    except Exception as exc:
        checks["store"] = f"error: {type(exc).__name__}"
    ready = all(value == "ok" for value in checks.values())
    return JSONResponse(
        {"status": "ready" if ready else "not ready", "checks": checks}, status_code=200 if ready else 503
    )


@router.get("/metrics", summary="Prometheus metrics of the pipeline and the HTTP service")
async def metrics(svc: Svc) -> Response:
    return Response(generate_latest(svc.components.engine.metrics.registry), media_type=CONTENT_TYPE_LATEST)
