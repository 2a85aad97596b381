"""A team's ceiling per period: declared once in writing, raised for one period only by an
approved extension. Each declaration, request and decision is an event naming who made it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from sqlalchemy.orm import Session

from governor.db import teams as team_queries
from governor.db.tables import TeamExtensionRow, TeamRow
from governor.domain.errors import Conflict
from governor.domain.model import Category, ExtensionState, Severity
from governor.domain.money import dollars, format_usd
from governor.domain.teams import PeriodKind, TeamScope
from governor.services import events
from governor.services.ids import new_id
from governor.services.money import team_money
from governor.services.security.tokens import Principal


@dataclass(frozen=True)
class CeilingDeclaration:
    ceiling_usd: Decimal
    period: PeriodKind
    period_days: int | None  # for PeriodKind.DAYS
    reason: str


def declare(
    session: Session,
    team_id: str,
    declaration: CeilingDeclaration,
    now: datetime,
    *,
    scope: TeamScope,
    by: Principal,
) -> TeamRow:
    """Write the team's ceiling down. It never changes afterwards: only an approved extension
    raises it, for the period it is approved in (409 if it is declared already)."""
    team = team_queries.get_team(session, team_id, scope, lock=True)
    if team.ceiling_usd is not None:
        raise Conflict(
            f"team {team.id} declared its ceiling of {dollars(team.ceiling_usd)} already: "
            "request an extension of it instead"
        )
    team.ceiling_usd = declaration.ceiling_usd
    team.period = declaration.period
    team.period_days = declaration.period_days if declaration.period is PeriodKind.DAYS else None
    team.ceiling_declared_at = now
    session.flush()
    period = team_money.period_of(team, now)
    assert period is not None  # the ceiling was just declared
    every = "calendar month" if team.period is PeriodKind.MONTH else f"{team.period_days} days"
    events.record(
        session,
        now,
        Severity.INFO,
        Category.OPERATOR,
        f"team:{team.id}",
        f"Team {team.name!r} declared a ceiling of {dollars(declaration.ceiling_usd)} every "
        f"{every} ({team.time_zone}) by {by.said}: {declaration.reason}",
        budget_id=None,
        evidence={
            "ceiling_usd": format_usd(declaration.ceiling_usd),
            "period": team.period.value,
            "period_days": team.period_days,
            "time_zone": team.time_zone,
            "period_start": period.start.isoformat(),
            "period_end": period.end.isoformat(),
            "reason": declaration.reason,
            "by": by.evidence,
        },
    )
    return team


def request_extension(
    session: Session,
    team_id: str,
    amount: Decimal,
    reason: str,
    now: datetime,
    *,
    scope: TeamScope,
    by: Principal,
) -> TeamExtensionRow:
    """Ask to raise the team's ceiling by `amount` for its current period."""
    team = team_queries.get_team(session, team_id, scope, lock=True)
    period = team_money.period_of(team, now)
    if period is None:
        raise Conflict(f"team {team.id} has no ceiling to extend: declare one first")
    row = TeamExtensionRow(
        id=new_id("text"),
        team_id=team.id,
        period_start=period.start,
        amount_usd=amount,
        reason=reason,
        requested_by=by.said,
        state=ExtensionState.PENDING,
        created_at=now,
    )
    session.add(row)
    session.flush()
    events.record(
        session,
        now,
        Severity.WARNING,
        Category.OPERATOR,
        f"team:{team.id}",
        f"Extension of {dollars(amount)} to team {team.name!r}'s ceiling for the period to "
        f"{period.end:%Y-%m-%d %H:%M} UTC requested by {by.said}: {reason}",
        budget_id=None,
        evidence={
            "extension": row.id,
            "amount_usd": format_usd(amount),
            "period_start": period.start.isoformat(),
            "reason": reason,
            "by": by.evidence,
        },
    )
    return row


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
) -> TeamExtensionRow:
    """Approve or deny a pending request (409 once decided, or once its period is over). An
    approval that puts the ceiling above the team's committed spend lifts its hold: its
    stopped pods stay stopped until an operator resumes them."""
    team = team_queries.get_team(session, team_id, scope, lock=True)
    row = team_queries.get_team_extension(session, team.id, extension_id)
    if row.state is not ExtensionState.PENDING:
        raise Conflict(f"extension {row.id} was already {row.state.value}")
    period = team_money.period_of(team, now)
    if period is None or row.period_start != period.start:
        raise Conflict(f"extension {row.id} was for a period that is over: request another")
    row.state = ExtensionState.APPROVED if approve else ExtensionState.DENIED
    row.decided_at, row.decided_by, row.decision_note = now, by.said, note
    session.flush()
    figures = team_money.figures(session, team, now)
    assert figures is not None  # the team has a ceiling (its period is current)
    lifted = approve and figures.held and figures.committed < figures.ceiling
    if lifted:
        team.held_from = None
    events.record(
        session,
        now,
        Severity.INFO,
        Category.OPERATOR,
        f"team:{team.id}",
        f"Extension of {dollars(row.amount_usd)} to team {team.name!r}'s ceiling "
        f"{row.state.value} by {by.said}"
        + (f": {note.rstrip('.')}." if note else ".")
        + (f" Ceiling this period now {dollars(figures.ceiling)}." if approve else "")
        + (" The team's hold is lifted; its stopped pods stay stopped." if lifted else ""),
        budget_id=None,
        evidence={
            "extension": row.id,
            "amount_usd": format_usd(row.amount_usd),
            "ceiling_usd": format_usd(figures.ceiling),
            "committed_usd": format_usd(figures.committed),
            "note": note,
            "by": by.evidence,
        },
    )
    return row
