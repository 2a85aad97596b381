"""The v1 HTTP API: thin routes over the use cases."""

from fastapi import APIRouter

from governor.api.routes import (
    budgets,
    events,
    extensions,
    health,
    metrics,
    plans,
    pods,
    report,
    runs,
    status,
    telemetry,
    tokens,
)


def build_router() -> APIRouter:
    router = APIRouter()
    # A request is matched against the routes in this order: the probes, then the runs,
    # whose heartbeat (the busiest route by far) is their first.
    for module in (health, runs, budgets, pods, extensions, plans, events, telemetry, tokens):
        router.include_router(module.router)
    router.include_router(status.router)
    router.include_router(metrics.router)
    router.include_router(report.router)
    return router
