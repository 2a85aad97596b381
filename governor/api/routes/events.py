from __future__ import annotations

from governor.api.deps import Paging, Tx, Viewer
from governor.api.route import api_router
from governor.api.schemas import EventOut, page_of
from governor.domain.model import Category, Severity
from governor.domain.paging import Page
from governor.services import events
from governor.services.events import Event
from governor.services.security.safe_input import QueryTime

router = api_router(tags=["events"])


@router.get("/v1/events", response_model=page_of(EventOut))
def list_events(
    caller: Viewer,
    tx: Tx,
    paging: Paging,
    budget_id: str | None = None,
    severity: Severity | None = None,
    min_severity: Severity | None = None,
    category: Category | None = None,
    subject: str | None = None,
    since: QueryTime | None = None,
) -> Page[Event]:
    """The event log, newest first. `severity`: that severity alone; `min_severity`: that
    or worse (`warning` brings warnings and critical events). `since` without a zone is
    taken as UTC."""
    with tx.read() as session:
        return events.page(
            session,
            paging,
            budget_id=budget_id,
            severity=severity,
            min_severity=min_severity,
            category=category,
            subject=subject,
            since=since,
            scope=caller.teams,
        )
