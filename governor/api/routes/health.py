from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi.responses import JSONResponse

from governor.api.deps import Context, Now
from governor.api.route import api_router
from governor.services.replica import leadership
from governor.services.replica.health import readiness

router = api_router(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz", responses={503: {"description": "not ready: the failing checks"}})
def readyz(ctx: Context, now: Now) -> JSONResponse:
    """Ready when the database is reachable and at head: this replica can serve.

    Beside it: this replica, who leads the periodic work (term, since when), and each of the
    leader's passes judged against its own interval. None of that takes a replica out of
    service: a stuck pass is raised as a critical event and a metric instead."""
    result = readiness(ctx.engine, ctx.writes.failing())
    body: dict[str, Any] = {
        "status": "ready" if result.ready else "not ready",
        "checks": result.checks,
        "replica": ctx.replica,
        "leading": ctx.leading(),
        "scheduler": "on" if ctx.ticks.enabled else "disabled in this process",
    }
    if result.ready:
        with ctx.read_only() as session:
            body["leader"] = _leader(leadership.current(session), now)
    return JSONResponse(body, status_code=200 if result.ready else 503)


def _leader(leader: leadership.Leader, now: datetime) -> dict[str, Any] | None:
    if not leader.live(now):
        return None
    states = leader.pass_states(now)
    return {
        "replica": leader.holder,
        "term": leader.term,
        "since": leader.since.isoformat() if leader.since else None,
        "expires_at": leader.expires_at.isoformat() if leader.expires_at else None,
        "passes": {
            task: {
                "last_finished": tick.at.isoformat() if tick.at else None,
                "every_s": tick.every_s,
                "state": states[task],
            }
            for task, tick in sorted(leader.ticks.items())
        },
    }
