"""GET /v1/status: the dashboard's read model as JSON (money as decimal strings, UTC times)."""

from __future__ import annotations

from governor.api.deps import Context, Now, Tx, Viewer
from governor.api.error_responses import errors
from governor.api.read_models import api_model
from governor.api.route import api_router
from governor.services.security.safe_input import QueryName
from governor.services.view import status
from governor.services.view.dashboard_model import Dashboard

router = api_router(tags=["status"])

StatusOut = api_model(Dashboard)


@router.get("/v1/status", responses=errors(404))
def get_status(
    caller: Viewer, ctx: Context, tx: Tx, now: Now, team: QueryName | None = None
) -> StatusOut:  # type: ignore[valid-type]
    """Everything the /status page shows, as one JSON document: for the organisation, or
    with `team` (its id or name) for that team alone."""
    with tx.read() as session:
        dashboard = status.dashboard(session, ctx.config, now, team=team, scope=caller.teams)
        return StatusOut.model_validate(dashboard)
