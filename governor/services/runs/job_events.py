"""What a job reports on its run, a failure or a note, recorded in the event log."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.domain.model import Category, Severity
from governor.services import events
from governor.services.events import Event

OOM = "oom"  # the kind of an out-of-memory report


def report(
    session: Session,
    run_id: str,
    now: datetime,
    *,
    severity: Severity,
    category: Category,
    kind: str | None,
    message: str,
    evidence: Mapping[str, object] | None,
) -> Event:
    """The job's report, as an event on its run and budget, its `kind` in the evidence; a
    note (info) is routine: the retention may fold it into its day's count once old. An
    out-of-memory report (`kind` "oom") marks the run: its measured floors are of a run that
    ran out of memory."""
    run = repo.get_run(session, run_id)
    if kind == OOM:
        run.out_of_memory = True
    row = events.record(
        session,
        now,
        severity,
        category,
        f"run:{run.id}",
        message,
        budget_id=run.budget_id,
        evidence={**(evidence or {}), "kind": kind, "reported_by": "job"},
        routine=True,
    )
    session.flush()
    [shown] = events.listed(session, [row])
    return shown
