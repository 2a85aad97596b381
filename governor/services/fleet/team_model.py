"""A team as it is read, with its money in its current period, and the makes, reads,
declarations and extensions that answer with it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from sqlalchemy.orm import Session

from governor.db.tables import TeamExtensionRow, TeamRow
from governor.domain.model import ExtensionState
from governor.domain.paging import Page, PageRequest
from governor.domain.teams import PeriodKind, TeamScope
from governor.services.fleet import teams
from governor.services.money import team_ceilings, team_money
from governor.services.security.tokens import Principal


@dataclass(frozen=True)
class TeamPeriod:
    """The team's money in its current period."""

    start: datetime
    end: datetime
    ceiling: Decimal = field(
        metadata={"doc": "the declared ceiling with the extensions approved for this period"}
    )
    spent: Decimal = field(metadata={"doc": "what the team's budgets spent in the period"})
    shutdown: Decimal = field(
        metadata={"doc": "what stopping its pods that bill compute will still cost"}
    )
    committed: Decimal
    remaining: Decimal = field(metadata={"doc": "ceiling less committed spend"})
    left: Decimal = field(
        metadata={
            "doc": "ceiling less spend: what a budget may still be declared with, or extended by"
        }
    )
    burn_rate_per_hour: Decimal
    forecast: Decimal = field(
        metadata={"doc": "the period's spend at its end, at the current burn"}
    )
    held: bool = field(
        metadata={
            "doc": "the team reached its ceiling this period: its "
            "budgets take no new pod, run or resume until the next"
        }
    )


@dataclass(frozen=True)
class Team:
    id: str
    name: str
    time_zone: str
    created_at: datetime
    ceiling: Decimal | None
    period_kind: PeriodKind | None
    period_days: int | None
    ceiling_declared_at: datetime | None
    period: TeamPeriod | None  # null while no ceiling is declared
    org_approval_over: Decimal | None = field(
        metadata={"doc": "an extension of more than this needs an org-wide approver"}
    )


@dataclass(frozen=True)
class TeamExtension:
    id: str
    team_id: str
    period_start: datetime
    amount: Decimal
    reason: str
    requested_by: str
    state: ExtensionState
    created_at: datetime
    decided_at: datetime | None
    decided_by: str | None
    decision_note: str | None


def team(session: Session, row: TeamRow, now: datetime) -> Team:
    f = team_money.figures(session, row, now)
    period = (
        None
        if f is None
        else TeamPeriod(
            start=f.period.start,
            end=f.period.end,
            ceiling=f.ceiling,
            spent=f.spent,
            shutdown=f.shutdown,
            committed=f.committed,
            remaining=f.remaining,
            left=f.left,
            burn_rate_per_hour=f.burn_per_hour,
            forecast=f.forecast(now),
            held=f.held,
        )
    )
    return Team(
        id=row.id,
        name=row.name,
        time_zone=row.time_zone,
        created_at=row.created_at,
        ceiling=row.ceiling_usd,
        period_kind=row.period,
        period_days=row.period_days,
        ceiling_declared_at=row.ceiling_declared_at,
        period=period,
        org_approval_over=row.org_approval_over_usd,
    )


def extension(row: TeamExtensionRow) -> TeamExtension:
    return TeamExtension(
        id=row.id,
        team_id=row.team_id,
        period_start=row.period_start,
        amount=row.amount_usd,
        reason=row.reason,
        requested_by=row.requested_by,
        state=row.state,
        created_at=row.created_at,
        decided_at=row.decided_at,
        decided_by=row.decided_by,
        decision_note=row.decision_note,
    )


def create(
    session: Session, declaration: teams.TeamDeclaration, now: datetime, *, by: Principal
) -> Team:
    return team(session, teams.create(session, declaration, now, by=by), now)


def get(session: Session, team_id: str, scope: TeamScope, now: datetime) -> Team:
    return team(session, teams.get(session, team_id, scope), now)


def page(session: Session, request: PageRequest, scope: TeamScope, now: datetime) -> Page[Team]:
    rows = teams.page(session, request, scope)
    return Page([team(session, r, now) for r in rows.items], rows.next_cursor)


def all_of(session: Session, scope: TeamScope, now: datetime) -> tuple[Team, ...]:
    """Every team `scope` sees, oldest first."""
    return tuple(team(session, r, now) for r in teams.every(session, scope))


def declare_ceiling(
    session: Session,
    team_id: str,
    declaration: team_ceilings.CeilingDeclaration,
    now: datetime,
    *,
    scope: TeamScope,
    by: Principal,
) -> Team:
    row = team_ceilings.declare(session, team_id, declaration, now, scope=scope, by=by)
    return team(session, row, now)


def request_extension(
    session: Session,
    team_id: str,
    amount: Decimal,
    reason: str,
    now: datetime,
    *,
    scope: TeamScope,
    by: Principal,
) -> TeamExtension:
    row = team_ceilings.request_extension(session, team_id, amount, reason, now, scope=scope, by=by)
    return extension(row)


def decide_extension(
    session: Session,
    team_id: str,
    extension_id: str,
    approve: bool,
    note: str | None,
    now: datetime,
    *,
    scope: TeamScope,
    by: Principal,
) -> TeamExtension:
    row = team_ceilings.decide_extension(
        session, team_id, extension_id, approve, note, now, scope=scope, by=by
    )
    return extension(row)
