"""A team's money in its current period: its ceiling with the extensions approved in the
period, its budgets' spend in the period (the ledger's hourly entries, each in the period its
hour starts in, in the team's time zone), and the margin stopping its pods still costs; the
hold a team at its ceiling is under until its next period starts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from sqlalchemy import case, func, select, type_coerce
from sqlalchemy.orm import Session

from governor.db import teams as team_queries
from governor.db.tables import BudgetRow, LedgerEntryRow, TeamExtensionRow, TeamRow
from governor.db.types import MicroUSD
from governor.domain.errors import Conflict
from governor.domain.ledger import Figures
from governor.domain.model import BudgetState, Category, ExtensionState, Severity
from governor.domain.money import ZERO, dollars, format_usd
from governor.domain.teams import EVERY_TEAM, Period, TeamFigures, period_at
from governor.services import events


def period_of(team: TeamRow, now: datetime) -> Period | None:
    """The team's current period; None for a team without a ceiling."""
    if team.ceiling_usd is None or team.period is None or team.ceiling_declared_at is None:
        return None
    return period_at(now, team.time_zone, team.period, team.period_days, team.ceiling_declared_at)


def held(team: TeamRow, now: datetime) -> bool:
    """The team reached its ceiling in its current period: its budgets take no new pod, run
    or resume, and their pods are stopped, until the next period starts."""
    period = period_of(team, now)
    return period is not None and team.held_from == period.start


def spent_in(session: Session, team_id: str, period: Period) -> Decimal:
    """What the team's budgets spent in the period, from the ledger's hourly entries."""
    total = session.scalar(
        select(func.sum(LedgerEntryRow.amount_usd))
        .join(BudgetRow, BudgetRow.id == LedgerEntryRow.budget_id)
        .where(
            BudgetRow.team_id == team_id,
            LedgerEntryRow.period_start >= period.start,
            LedgerEntryRow.period_start < period.end,
        )
    )
    return ZERO if total is None else total


def extended_in(session: Session, team_id: str, period: Period) -> Decimal:
    """What extensions approved for the period add to the team's ceiling."""
    total = session.scalar(
        select(func.sum(TeamExtensionRow.amount_usd)).where(
            TeamExtensionRow.team_id == team_id,
            TeamExtensionRow.period_start == period.start,
            TeamExtensionRow.state == ExtensionState.APPROVED,
        )
    )
    return ZERO if total is None else total


@dataclass(frozen=True)
class LiveBudget:
    """A budget's figures as an enforcement pass has just computed them, and its ledger's
    running total (their difference: what its pods cost since their last entry)."""

    figures: Figures
    recorded: Decimal


def figures(
    session: Session,
    team: TeamRow,
    now: datetime,
    live: Mapping[str, LiveBudget] | None = None,
) -> TeamFigures | None:
    """The team's figures now (None without a ceiling): the ledger's entries in the period,
    with what each open budget's pods cost since their last entry, the margin stopping them
    costs and their burn, as the latest enforcement pass kept them on each budget, or, for
    the budgets in `live` (a pass's own books), as it has just computed them."""
    period = period_of(team, now)
    if period is None or team.ceiling_usd is None:
        return None
    live = live or {}
    since_entry = BudgetRow.figures_spent_usd - BudgetRow.recorded_usd
    query = select(
        type_coerce(func.sum(case((since_entry > 0, since_entry), else_=0)), MicroUSD),
        func.sum(BudgetRow.figures_shutdown_usd),
        func.sum(BudgetRow.figures_burn_usd_per_hour),
    ).where(BudgetRow.team_id == team.id, BudgetRow.state != BudgetState.CLOSED)
    if live:
        query = query.where(BudgetRow.id.not_in(list(live)))
    unaccrued, shutdown, burn = session.execute(query).one()
    unaccrued = (unaccrued or ZERO) + sum(
        (b.figures.spent - b.recorded for b in live.values()), ZERO
    )
    return TeamFigures(
        ceiling=team.ceiling_usd + extended_in(session, team.id, period),
        spent=spent_in(session, team.id, period) + unaccrued,
        shutdown=(shutdown or ZERO) + sum((b.figures.shutdown for b in live.values()), ZERO),
        burn_per_hour=(burn or ZERO) + sum((b.figures.burn_per_hour for b in live.values()), ZERO),
        period=period,
        held=team.held_from == period.start,
    )


def of_books(
    session: Session, budgets: Sequence[tuple[str, str, LiveBudget]], now: datetime
) -> dict[str, TeamFigures]:
    """The figures of each team with a ceiling among these budgets' (id, team id, live
    figures): an enforcement pass's, whose own figures count for its budgets."""
    by_team: dict[str, dict[str, LiveBudget]] = {}
    for budget_id, team_id, live in budgets:
        by_team.setdefault(team_id, {})[budget_id] = live
    found: dict[str, TeamFigures] = {}
    for team in team_queries.with_ceilings(session, by_team):
        team_figures = figures(session, team, now, by_team[team.id])
        if team_figures is not None:
            found[team.id] = team_figures
    return found


def hold(session: Session, team_id: str, team_figures: TeamFigures, now: datetime) -> None:
    """The team reached its ceiling: held until its period ends (told once a period)."""
    team = team_queries.get_team(session, team_id, EVERY_TEAM)
    if team.held_from == team_figures.period.start:
        return
    team.held_from = team_figures.period.start
    events.record(
        session,
        now,
        Severity.CRITICAL,
        Category.BUDGET,
        f"team:{team.id}",
        f"Team {team.name!r} reached its ceiling {dollars(team_figures.ceiling)} for the period "
        f"to {team_figures.period.end:%Y-%m-%d %H:%M} UTC: committed "
        f"{dollars(team_figures.committed)} (spent {dollars(team_figures.spent)} + shutdown "
        f"{dollars(team_figures.shutdown)}). Its pods are stopped after a save; its budgets "
        "take no new pod, run or resume until the next period starts, or an extension of its "
        "ceiling is approved.",
        budget_id=None,
        evidence={
            "ceiling_usd": format_usd(team_figures.ceiling),
            "spent_usd": format_usd(team_figures.spent),
            "shutdown_usd": format_usd(team_figures.shutdown),
            "period_start": team_figures.period.start.isoformat(),
            "period_end": team_figures.period.end.isoformat(),
        },
        always=True,
    )


def holds_over(session: Session, now: datetime) -> bool:
    """Some team's hold is of a period that has ended (one statement)."""
    return any(not held(team, now) for team in team_queries.held_teams(session))


def clear_past_holds(session: Session, now: datetime) -> list[str]:
    """Clear the hold of every team whose next period has started, each told in an event;
    the ids of those cleared. Nothing the hold stopped resumes by itself."""
    cleared = []
    for team in team_queries.held_teams(session, lock=True):
        if held(team, now):
            continue
        ended, team.held_from = team.held_from, None
        period = period_of(team, now)
        cleared.append(team.id)
        events.record(
            session,
            now,
            Severity.INFO,
            Category.BUDGET,
            f"team:{team.id}",
            f"Team {team.name!r}'s hold is cleared: the period in which it reached its ceiling "
            "is over. Its budgets take new pods, runs and resumes again; the pods it stopped "
            "stay stopped until an operator resumes them.",
            budget_id=None,
            evidence={
                "held_from": None if ended is None else ended.isoformat(),
                "period_start": None if period is None else period.start.isoformat(),
                "period_end": None if period is None else period.end.isoformat(),
            },
            always=True,
        )
    return cleared


def refuse_if_held(session: Session, team_id: str, what: str, now: datetime) -> None:
    """A held team's budgets take no new pod, run or resume (409 saying until when)."""
    team = team_queries.get_team(session, team_id, EVERY_TEAM)
    if held(team, now):
        period = period_of(team, now)
        assert period is not None  # held implies a period
        raise Conflict(
            f"team {team.name!r} ({team.id}) reached its ceiling this period: no {what} until "
            f"its next period starts at {period.end:%Y-%m-%d %H:%M} UTC, or an extension of "
            "its ceiling is approved"
        )


def refuse_beyond_left(
    session: Session, team_id: str, what: str, amount: Decimal, now: datetime
) -> None:
    """A budget's ceiling (or an extension of it) fits in what its team has left in the
    period, or is refused with the arithmetic (409)."""
    team = team_queries.get_team(session, team_id, EVERY_TEAM)
    team_figures = figures(session, team, now)
    if team_figures is None:
        return
    refusal = team_figures.refusal(what, amount)
    if refusal is not None:
        raise Conflict(f"team {team.name!r} ({team.id}): {refusal}")
