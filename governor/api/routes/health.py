from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from governor.api.deps import Context, Now
from governor.services.health import readiness

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz")
def readyz(ctx: Context, now: Now) -> JSONResponse:
    """Ready when the database is reachable and at head and the periodic passes are ticking."""
    result = readiness(ctx.engine, ctx.ticks, now)
    return JSONResponse(
        {"status": "ready" if result.ready else "not ready", "checks": result.checks},
        status_code=200 if result.ready else 503,
    )
