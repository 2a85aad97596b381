from __future__ import annotations

from governor.api import views
from governor.api.deps import Paging, Tx, Viewer
from governor.api.route import api_router
from governor.api.safe_input import QueryTime
from governor.api.schemas import EventOut, Page
from governor.db import repository as repo
from governor.domain.model import Category, Severity

router = api_router(tags=["events"])


@router.get("/v1/events")
def list_events(
    _: Viewer,
    tx: Tx,
    paging: Paging,
    budget_id: str | None = None,
    severity: Severity | None = None,
    min_severity: Severity | None = None,
    category: Category | None = None,
    subject: str | None = None,
    since: QueryTime | None = None,
) -> Page[EventOut]:
    """The event log, newest first. `severity`: that severity alone; `min_severity`: that
    or worse (`warning` brings warnings and critical events). `since` without a zone is
    taken as UTC."""
    with tx.read() as session:
        page = repo.events_page(
            session,
            paging,
            budget_id=budget_id,
            severity=severity,
            min_severity=min_severity,
            category=category,
            subject=subject,
            since=since,
        )
        return Page[EventOut].of(page, views.event)
