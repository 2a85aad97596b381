"""A team's report for one period: its ceiling (as declared, and with the extensions approved
for the period), what each of its budgets spent in the period, and its extensions."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from decimal import Decimal

from sqlalchemy import case, func, select, type_coerce
from sqlalchemy.orm import Session

from governor.db.tables import BudgetRow, LedgerEntryRow, TeamExtensionRow
from governor.db.types import MicroUSD
from governor.domain.errors import Conflict
from governor.domain.money import ZERO
from governor.domain.teams import Period, PeriodKind, TeamScope, period_at, time_zone
from governor.services.fleet import team_model, teams
from governor.services.fleet.team_model import Team, TeamExtension
from governor.services.money import team_money


@dataclass(frozen=True)
class BudgetSpend:
    budget_id: str
    name: str
    spent: Decimal


@dataclass(frozen=True)
class TeamReport:
    team: Team
    period_start: datetime
    period_end: datetime
    current: bool  # the period now running: its spend runs to now
    # the declared ceiling with the extensions approved for the period; none: no ceiling
    ceiling: Decimal | None
    spent: Decimal
    budgets: tuple[BudgetSpend, ...]  # the team's budgets that spent in the period, most first
    extensions: tuple[TeamExtension, ...]


def report(
    session: Session, team_id: str, asked: date | None, now: datetime, *, scope: TeamScope
) -> TeamReport:
    """The team's report for the period that holds `asked` (a day, in the team's time zone;
    none: the current period); a team without a ceiling has calendar months. 409 for a
    period not begun."""
    row = teams.get(session, team_id, scope)
    kind = row.period or PeriodKind.MONTH  # a team without a ceiling reports by the month
    declared = row.ceiling_declared_at or row.created_at
    current = period_at(now, row.time_zone, kind, row.period_days, declared)
    period = current
    if asked is not None:
        zone = time_zone(row.time_zone)
        noon = datetime.combine(asked, time(12), tzinfo=zone).astimezone(UTC)
        period = period_at(noon, row.time_zone, kind, row.period_days, declared)
        if period.start > current.start:
            raise Conflict(f"the period holding {asked.isoformat()} has not begun")
    is_current = period == current
    spends = _spends(session, row.id, period, is_current)
    return TeamReport(
        team=team_model.team(session, row, now),
        period_start=period.start,
        period_end=period.end,
        current=is_current,
        ceiling=None
        if row.ceiling_usd is None
        else row.ceiling_usd + team_money.extended_in(session, row.id, period),
        spent=sum((s.spent for s in spends), ZERO),
        budgets=spends,
        extensions=tuple(
            team_model.extension(e)
            for e in session.scalars(
                select(TeamExtensionRow)
                .where(
                    TeamExtensionRow.team_id == row.id,
                    TeamExtensionRow.period_start == period.start,
                )
                .order_by(TeamExtensionRow.created_at, TeamExtensionRow.id)
            )
        ),
    )


def _spends(
    session: Session, team_id: str, period: Period, current: bool
) -> tuple[BudgetSpend, ...]:
    """Each budget's spend in the period from the ledger's hourly entries; in the current
    period, with what its pods cost since their last entry (as the latest pass kept it)."""
    in_period = (
        select(LedgerEntryRow.budget_id, func.sum(LedgerEntryRow.amount_usd).label("spent"))
        .where(
            LedgerEntryRow.period_start >= period.start,
            LedgerEntryRow.period_start < period.end,
        )
        .group_by(LedgerEntryRow.budget_id)
        .subquery()
    )
    since_entry = BudgetRow.figures_spent_usd - BudgetRow.recorded_usd
    rows = session.execute(
        select(
            BudgetRow.id,
            BudgetRow.name,
            in_period.c.spent,
            type_coerce(case((since_entry > 0, since_entry), else_=0), MicroUSD),
        )
        .outerjoin(in_period, in_period.c.budget_id == BudgetRow.id)
        .where(BudgetRow.team_id == team_id)
    ).all()
    spends = []
    for row in rows:
        entries: Decimal | None = row[2]
        unaccrued: Decimal | None = row[3]
        spent = (entries or ZERO) + ((unaccrued or ZERO) if current else ZERO)
        if spent > 0:
            spends.append(BudgetSpend(row[0], row[1], spent))
    return tuple(sorted(spends, key=lambda s: (-s.spent, s.name)))
