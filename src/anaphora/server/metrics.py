"""HTTP metrics, registered in the engine's registry so that ``/metrics`` shows the pipeline and the service."""

from __future__ import annotations

import weakref
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Scope

from anaphora.server.asgi import ExchangeObserver

HTTP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


_BY_REGISTRY: weakref.WeakKeyDictionary[CollectorRegistry, HttpMetrics] = weakref.WeakKeyDictionary()


class HttpMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "anaphora_http_requests",
            "HTTP requests by method, route template and status",
            ["method", "route", "status"],
            registry=registry,
        )
        self.seconds = Histogram(
            "anaphora_http_request_seconds",
            "HTTP request duration, to the end of the response body (streams included)",
            ["method", "route"],
            buckets=HTTP_BUCKETS,
            registry=registry,
        )
        self.turns_in_flight = Gauge(
            "anaphora_http_turns_in_flight", "Turns started over HTTP and not finished yet", registry=registry
        )

    @classmethod
    def of(cls, registry: CollectorRegistry) -> HttpMetrics:
        """One set per registry: several apps over the same components share it."""
        metrics = _BY_REGISTRY.get(registry)
        if metrics is None:
            metrics = _BY_REGISTRY[registry] = cls(registry)
        return metrics


class MetricsMiddleware(ExchangeObserver):
    """Counts every HTTP request, labelled by route template (bounded cardinality), status and duration."""

    def __init__(self, app: ASGIApp, metrics: Callable[[], HttpMetrics | None]) -> None:
        super().__init__(app)
        self.metrics = metrics

    def finished(self, scope: Scope, status: int, seconds: float, context: None) -> None:
        metrics = self.metrics()
        if metrics is not None:
            route = scope["route"].path if isinstance(scope.get("route"), BaseRoute) else "unmatched"
            method = scope.get("method", "")
            metrics.requests.labels(method=method, route=route, status=str(status)).inc()
            metrics.seconds.labels(method=method, route=route).observe(seconds)
