"""A budget as it is read: what was declared, with its figures as of one instant; and the
declarations, reads and closes that answer with it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from sqlalchemy.orm import Session

from governor.domain.model import BudgetState
from governor.domain.paging import Page, PageRequest
from governor.services.context import GovernorConfig
from governor.services.fleet import budgets
from governor.services.money.book import Book
from governor.services.security.tokens import Principal


@dataclass(frozen=True)
class Budget:
    id: str
    name: str
    state: BudgetState
    ceiling: Decimal
    approved_extensions: Decimal
    effective_ceiling: Decimal
    reserve: Decimal
    spent: Decimal
    committed: Decimal
    remaining: Decimal
    burn_rate_per_hour: Decimal
    projected_exhaustion_at: datetime | None
    storage_tail_hours: float
    alert_thresholds: tuple[int, ...]
    note: str | None
    require_plan: bool
    created_at: datetime
    closed_at: datetime | None


def budget(book: Book) -> Budget:
    row, f = book.budget, book.figures
    return Budget(
        id=row.id,
        name=row.name,
        state=row.state,
        ceiling=row.ceiling_usd,
        approved_extensions=f.effective_ceiling - row.ceiling_usd,
        effective_ceiling=f.effective_ceiling,
        reserve=row.reserve_usd,
        spent=f.spent,
        committed=f.committed,
        remaining=f.remaining,
        burn_rate_per_hour=f.burn_per_hour,
        projected_exhaustion_at=f.projected_exhaustion_at,
        storage_tail_hours=row.storage_tail_hours,
        alert_thresholds=tuple(row.alert_thresholds),
        note=row.note,
        require_plan=row.require_plan,
        created_at=row.created_at,
        closed_at=row.closed_at,
    )


def get(session: Session, config: GovernorConfig, budget_id: str, now: datetime) -> Budget:
    return budget(budgets.book(session, config, budget_id, now))


def page(
    session: Session,
    config: GovernorConfig,
    now: datetime,
    request: PageRequest,
    *,
    name: str | None = None,
) -> Page[Budget]:
    """A page of budgets, oldest first; with `name`, of the budgets so named."""
    books = budgets.books(session, config, now, request, name=name)
    return Page([budget(b) for b in books.items], books.next_cursor)


def declare(
    session: Session, config: GovernorConfig, declaration: budgets.Declaration, now: datetime
) -> Budget:
    """Declare a budget (budgets.declare): it, with its figures."""
    row = budgets.declare(session, declaration, now)
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
