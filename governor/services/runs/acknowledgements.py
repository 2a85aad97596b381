"""An operator's acknowledgement of a lost run: its job went silent and its pod stopped, and
someone has seen to it, so it leaves what needs an operator first. Audited as an event; asking
again changes nothing."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.tables import RunRow
from governor.domain.errors import Conflict
from governor.domain.model import Category, RunStatus, Severity
from governor.domain.run_lifecycle import awaits_acknowledgement
from governor.services import events
from governor.services.security.tokens import Principal


def acknowledge(
    session: Session, run_id: str, reason: str, now: datetime, *, by: Principal
) -> RunRow:
    """Acknowledge a lost run. One already acknowledged since it was lost is returned as it
    is; a run that is not lost has nothing to acknowledge (Conflict)."""
    run = repo.get_run(session, run_id)
    repo.get_budget(session, run.budget_id, lock=True)  # in the order the passes lock
    session.refresh(run)
    if awaits_acknowledgement(run.status, run.ended_at, run.acknowledged_at):
        run.acknowledged_at, run.acknowledged_by = now, by.said
        pod = repo.get_pod(session, run.pod_id)
        events.record(
            session,
            now,
            Severity.INFO,
            Category.OPERATOR,
            f"run:{run.id}",
            f"Lost run {run.name!r} on pod {pod.name!r} acknowledged by {by.said}: {reason}",
            budget_id=run.budget_id,
            evidence={"reason": reason, "by": by.evidence},
        )
        return run
    if run.status is RunStatus.LOST:
        return run
    live = "its job is expected to check in" if run.status.is_live else "it was not lost"
    raise Conflict(
        f"run {run.name!r} ({run.id}) is {run.status.value}: {live}, nothing to acknowledge "
        "(a lost run is: one whose job was silent when its pod stopped)"
    )
