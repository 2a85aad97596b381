"""An extension request as it is read, and the requests and decisions that answer with it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.tables import ExtensionRow
from governor.domain.model import ExtensionState, Requester
from governor.domain.paging import Page, PageRequest
from governor.domain.teams import EVERY_TEAM, TeamScope
from governor.services.context import GovernorConfig
from governor.services.money import extensions
from governor.services.security.tokens import Principal


@dataclass(frozen=True)
class Extension:
    id: str
    budget_id: str
    amount: Decimal
    reason: str
    requested_by: Requester
    run_id: str | None
    state: ExtensionState
    created_at: datetime
    decided_at: datetime | None
    decision_note: str | None


def extension(row: ExtensionRow) -> Extension:
    return Extension(
        id=row.id,
        budget_id=row.budget_id,
        amount=row.amount_usd,
        reason=row.reason,
        requested_by=row.requested_by,
        run_id=row.run_id,
        state=row.state,
        created_at=row.created_at,
        decided_at=row.decided_at,
        decision_note=row.decision_note,
    )


def page(
    session: Session,
    request: PageRequest,
    *,
    budget_id: str | None = None,
    state: ExtensionState | None = None,
    scope: TeamScope = EVERY_TEAM,
) -> Page[Extension]:
    """A page of extension requests (of the scope's teams), oldest first, narrowed by budget
    and state where given."""
    rows = repo.extensions_page(session, request, budget_id=budget_id, state=state, scope=scope)
    return Page([extension(r) for r in rows.items], rows.next_cursor)


def request(
    session: Session,
    budget_id: str,
    amount: Decimal,
    reason: str,
    requester: Requester,
    now: datetime,
    *,
    run_id: str | None = None,
) -> Extension:
    """Ask for more budget (extensions.request): pending until an operator decides."""
    return extension(
        extensions.request(session, budget_id, amount, reason, requester, now, run_id=run_id)
    )


def decide(
    session: Session,
    config: GovernorConfig,
    extension_id: str,
    approve: bool,
    note: str | None,
    now: datetime,
    *,
    by: Principal,
) -> Extension:
    """Approve or deny a pending request (extensions.decide), once."""
    return extension(extensions.decide(session, config, extension_id, approve, note, now, by=by))
