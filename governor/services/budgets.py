"""Declaring budgets and reading them back with their figures."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.tables import BudgetRow
from governor.domain.model import BudgetState, Category, Severity
from governor.domain.money import dollars, format_usd
from governor.services import events
from governor.services.book import Book, open_book, open_books
from governor.services.context import GovernorConfig
from governor.services.ids import new_id

DEFAULT_THRESHOLDS = (50, 80, 90)


@dataclass(frozen=True)
class Declaration:
    name: str
    ceiling_usd: Decimal
    reserve_usd: Decimal = Decimal(0)
    storage_tail_hours: float = 0.0
    alert_thresholds: tuple[int, ...] = DEFAULT_THRESHOLDS
    note: str | None = None


def declare(session: Session, declaration: Declaration, now: datetime) -> BudgetRow:
    """Write the ceiling down before any pod is registered. It never changes afterwards."""
    budget = BudgetRow(
        id=new_id("bud"),
        name=declaration.name,
        ceiling_usd=declaration.ceiling_usd,
        reserve_usd=declaration.reserve_usd,
        storage_tail_hours=declaration.storage_tail_hours,
        alert_thresholds=sorted(set(declaration.alert_thresholds)),
        note=declaration.note,
        state=BudgetState.OPEN,
        alerted_pct=0,
        created_at=now,
    )
    session.add(budget)
    session.flush()
    events.record(
        session,
        now,
        Severity.INFO,
        Category.OPERATOR,
        f"budget:{budget.id}",
        f"Budget {budget.name!r} declared with a hard ceiling of {dollars(budget.ceiling_usd)}.",
        budget_id=budget.id,
        evidence={
            "ceiling_usd": format_usd(budget.ceiling_usd),
            "reserve_usd": format_usd(budget.reserve_usd),
            "storage_tail_hours": budget.storage_tail_hours,
            "alert_thresholds": budget.alert_thresholds,
            "note": budget.note,
        },
    )
    return budget


def book(session: Session, config: GovernorConfig, budget_id: str, now: datetime) -> Book:
    return open_book(session, budget_id, now, config)


def books(session: Session, config: GovernorConfig, now: datetime) -> list[Book]:
    return open_books(session, repo.budget_ids(session), now, config)
