"""The v1 HTTP API: thin routes over the use cases."""

from fastapi import APIRouter

from governor.api.heartbeat import route as heartbeat
from governor.api.routes import (
    budgets,
    costs,
    events,
    extensions,
    gates,
    health,
    metrics,
    plans,
    pods,
    report,
    runs,
    signin,
    status,
    teams,
    telemetry,
    tokens,
)


def routers() -> tuple[APIRouter, ...]:
    """The API's routers, each to be included by the app itself: a request is matched against
    them in this order (the probes, then the heartbeat, the busiest route by far, then the
    runs' other routes), and a router nested in another would cost every request a level more
    of matching."""
    return tuple(
        module.router
        for module in (
            health,
            heartbeat,
            runs,
            budgets,
            pods,
            extensions,
            plans,
            events,
            telemetry,
            tokens,
            gates,
            status,
            metrics,
            report,
            teams,
            costs,
            signin,
        )
    )
