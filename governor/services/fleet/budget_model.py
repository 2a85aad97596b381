"""A budget as it is read: what was declared, with its figures as of one instant; and the
declarations, reads and closes that answer with it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from sqlalchemy.orm import Session

from governor.domain.ledger import COMMITTED_DOC, RESERVE_DOC, SHUTDOWN_DOC, STORAGE_TAIL_DOC
from governor.domain.model import BudgetState
from governor.domain.paging import Page, PageRequest
from governor.domain.teams import EVERY_TEAM, TeamScope
from governor.services.context import GovernorConfig
from governor.services.fleet import budgets
from governor.services.fleet.budgets import ADOPT_LABELLED_PODS_DOC
from governor.services.money.book import Book
from governor.services.plans import admission, launches
from governor.services.plans.admission import HELD_FOR_PLANS_DOC
from governor.services.plans.launches import RESERVED_FOR_LAUNCHES_DOC
from governor.services.security.tokens import Principal


@dataclass(frozen=True)
class Budget:
    id: str
    name: str
    team_id: str
    state: BudgetState
    ceiling: Decimal
    approved_extensions: Decimal
    effective_ceiling: Decimal
    reserve: Decimal = field(metadata={"doc": RESERVE_DOC})
    spent: Decimal
    shutdown: Decimal = field(metadata={"doc": SHUTDOWN_DOC})
    storage_tail: Decimal = field(metadata={"doc": STORAGE_TAIL_DOC})
    committed: Decimal = field(metadata={"doc": COMMITTED_DOC})
    held_for_plans: Decimal = field(metadata={"doc": HELD_FOR_PLANS_DOC})
    reserved_for_launches: Decimal = field(metadata={"doc": RESERVED_FOR_LAUNCHES_DOC})
    remaining: Decimal
    burn_rate_per_hour: Decimal
    projected_exhaustion_at: datetime | None
    storage_tail_hours: float
    alert_thresholds: tuple[int, ...]
    note: str | None
    require_plan: bool
    adopt_labelled_pods: bool = field(metadata={"doc": ADOPT_LABELLED_PODS_DOC})
    created_at: datetime
    closed_at: datetime | None


def budget(book: Book, held_for_plans: Decimal, reserved_for_launches: Decimal) -> Budget:
    """The budget of `book`, with what its admitted plans hold back (`held_for_plans`) and
    what its accepted launches reserve (`reserved_for_launches`)."""
    row, f = book.budget, book.figures
    return Budget(
        id=row.id,
        name=row.name,
        team_id=row.team_id,
        state=row.state,
        ceiling=row.ceiling_usd,
        approved_extensions=f.effective_ceiling - row.ceiling_usd,
        effective_ceiling=f.effective_ceiling,
        reserve=f.reserve,
        spent=f.spent,
        shutdown=f.shutdown,
        storage_tail=f.storage_tail,
        committed=f.committed,
        held_for_plans=held_for_plans,
        reserved_for_launches=reserved_for_launches,
        remaining=f.remaining,
        burn_rate_per_hour=f.burn_per_hour,
        projected_exhaustion_at=f.projected_exhaustion_at,
        storage_tail_hours=row.storage_tail_hours,
        alert_thresholds=tuple(row.alert_thresholds),
        note=row.note,
        require_plan=row.require_plan,
        adopt_labelled_pods=row.adopt_labelled_pods,
        created_at=row.created_at,
        closed_at=row.closed_at,
    )


def get(session: Session, config: GovernorConfig, budget_id: str, now: datetime) -> Budget:
    [read] = with_plans(session, [budgets.book(session, config, budget_id, now)])
    return read


def with_plans(session: Session, books: Sequence[Book]) -> list[Budget]:
    """The budgets of these books, with what their admitted plans hold back and their
    accepted launches reserve (a read each)."""
    held = admission.held_for_plans(session, books)
    now = books[0].now if books else None
    launched = (
        launches.reserved_for_launches(session, [b.budget.id for b in books], now)
        if now is not None
        else {}
    )
    return [budget(b, held[b.budget.id], launched[b.budget.id]) for b in books]


def page(
    session: Session,
    config: GovernorConfig,
    now: datetime,
    request: PageRequest,
    *,
    name: str | None = None,
    scope: TeamScope = EVERY_TEAM,
) -> Page[Budget]:
    """A page of budgets (of the scope's teams), oldest first; with `name`, of the budgets so
    named."""
    books = budgets.books(session, config, now, request, name=name, scope=scope)
    return Page(with_plans(session, books.items), books.next_cursor)


def declare(
    session: Session,
    config: GovernorConfig,
    declaration: budgets.Declaration,
    now: datetime,
    *,
    scope: TeamScope,
) -> Budget:
    """Declare a budget (budgets.declare): it, with its figures."""
    row = budgets.declare(session, declaration, now, scope=scope)
    return get(session, config, row.id, now)


def close(
    session: Session,
    config: GovernorConfig,
    budget_id: str,
    reason: str,
    storage_deleted: bool,
    now: datetime,
    *,
    by: Principal,
) -> Budget:
    """Close a budget (budgets.close): it, with its figures."""
    budgets.close(session, budget_id, reason, storage_deleted, now, by=by)
    return get(session, config, budget_id, now)


def adopt_labelled_pods(
    session: Session,
    config: GovernorConfig,
    budget_id: str,
    adopt: bool,
    reason: str,
    now: datetime,
    *,
    by: Principal,
) -> Budget:
    """Let the budget's label alone register pods, or stop it (budgets.adopt_labelled_pods):
    the budget, with its figures."""
    budgets.adopt_labelled_pods(session, budget_id, adopt, reason, now, by=by)
    return get(session, config, budget_id, now)
