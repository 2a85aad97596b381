"""The v1 HTTP API: thin routes over the use cases."""

from fastapi import APIRouter

from governor.api.routes import (
    budgets,
    events,
    extensions,
    health,
    plans,
    pods,
    runs,
    telemetry,
    tokens,
)


def build_router() -> APIRouter:
    router = APIRouter()
    for module in (health, budgets, pods, runs, extensions, plans, events, telemetry, tokens):
        router.include_router(module.router)
    return router
