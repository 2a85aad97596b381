"""GET /v1/status: the dashboard's read model as JSON (money as decimal strings, UTC times)."""

from __future__ import annotations

from governor.api.deps import Context, Now, Tx, Viewer
from governor.api.read_models import api_model
from governor.api.route import api_router
from governor.services.view import status
from governor.services.view.dashboard_model import Dashboard

router = api_router(tags=["status"])

StatusOut = api_model(Dashboard)


@router.get("/v1/status")
def get_status(caller: Viewer, ctx: Context, tx: Tx, now: Now) -> StatusOut:  # type: ignore[valid-type]
    """Everything the /status page shows of the budgets the caller may see, as one JSON
    document."""
    with tx.read() as session:
        return StatusOut.model_validate(status.dashboard(session, ctx.config, now, caller.teams))
