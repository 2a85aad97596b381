from __future__ import annotations

from typing import Annotated

from fastapi import Query

from governor.api import views
from governor.api.deps import Tx, Viewer
from governor.api.route import api_router
from governor.api.safe_input import QueryTime
from governor.api.schemas import EventOut
from governor.db import repository as repo
from governor.domain.model import Category, Severity

router = api_router(tags=["events"])


@router.get("/v1/events")
def list_events(
    _: Viewer,
    tx: Tx,
    budget_id: str | None = None,
    severity: Severity | None = None,
    min_severity: Severity | None = None,
    category: Category | None = None,
    subject: str | None = None,
    since: QueryTime | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[EventOut]:
    """The event log, newest first. `severity`: that severity alone; `min_severity`: that
    or worse (`warning` brings warnings and critical events). `since` without a zone is
    taken as UTC."""
    with tx.read() as session:
        rows = repo.events(
            session,
            budget_id=budget_id,
            severity=severity,
            min_severity=min_severity,
            category=category,
            subject=subject,
            since=since,
            limit=limit,
        )
        return [views.event(r) for r in rows]
