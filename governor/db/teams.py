"""Queries over the teams. Never commits: the unit of work does."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from sqlalchemy import Select, or_, select
from sqlalchemy.orm import Session

from governor.db.keyset import Keyset
from governor.db.tables import BudgetRow, EventRow, TeamExtensionRow, TeamRow
from governor.domain.errors import NotFound
from governor.domain.paging import Page, PageRequest
from governor.domain.teams import TeamScope

TEAMS = Keyset("teams", (TeamRow.created_at, TeamRow.id))


def _not_found(ref: str) -> NotFound:
    return NotFound(f"no team {ref!r}")


def get_team(session: Session, team_id: str, scope: TeamScope, *, lock: bool = False) -> TeamRow:
    """The team with this id, if `scope` sees it (a team it does not see is not found); with
    `lock`, held for update until the transaction ends."""
    row = session.get(TeamRow, team_id, with_for_update=lock or None)
    if row is None or not scope.sees(row.id):
        raise _not_found(team_id)
    return row


def team_named(session: Session, name: str) -> TeamRow | None:
    return session.scalars(select(TeamRow).where(TeamRow.name == name)).first()


def find_team(session: Session, ref: str, scope: TeamScope) -> TeamRow:
    """The team whose id, or else whose name, is `ref`, if `scope` sees it."""
    row = session.get(TeamRow, ref) or team_named(session, ref)
    if row is None or not scope.sees(row.id):
        raise _not_found(ref)
    return row


def _seen(scope: TeamScope) -> Select[TeamRow]:
    query = select(TeamRow)
    if scope.team_ids is not None:
        query = query.where(TeamRow.id.in_(scope.team_ids))
    return query


def teams_page(session: Session, request: PageRequest, scope: TeamScope) -> Page[TeamRow]:
    """A page of the teams `scope` sees, oldest first."""
    return TEAMS.page(session, _seen(scope), request)


def get_team_extension(session: Session, team_id: str, extension_id: str) -> TeamExtensionRow:
    row = session.get(TeamExtensionRow, extension_id)
    if row is None or row.team_id != team_id:
        raise NotFound(f"no extension {extension_id!r} of team {team_id!r}")
    return row


def budget_teams(session: Session) -> list[tuple[str, str]]:
    """Every budget's id with its team's, oldest budget first."""
    query = select(BudgetRow.id, BudgetRow.team_id).order_by(BudgetRow.created_at, BudgetRow.id)
    return [(budget_id, team_id) for budget_id, team_id in session.execute(query)]


def team_events(
    session: Session, team_ids: Collection[str], budget_ids: Collection[str], limit: int
) -> Sequence[EventRow]:
    """The latest events, newest first, of these teams and of these budgets."""
    query = select(EventRow).where(
        or_(
            EventRow.budget_id.in_(list(budget_ids)),
            EventRow.subject.in_([f"team:{t}" for t in team_ids]),
        )
    )
    return session.scalars(query.order_by(EventRow.id.desc()).limit(limit)).all()


def every_team(session: Session, scope: TeamScope) -> list[TeamRow]:
    """Every team `scope` sees, oldest first."""
    return list(session.scalars(TEAMS.ordered(_seen(scope))))


def with_ceilings(session: Session, team_ids: Collection[str]) -> list[TeamRow]:
    """Those of these teams that have a ceiling, in one statement."""
    query = select(TeamRow).where(TeamRow.id.in_(list(team_ids)), TeamRow.ceiling_usd.is_not(None))
    return list(session.scalars(query))


def held_teams(session: Session, *, lock: bool = False) -> list[TeamRow]:
    """The teams under a hold (of their current period or of one that has ended), in one
    statement; with `lock`, held for update until the transaction ends."""
    query = select(TeamRow).where(TeamRow.held_from.is_not(None)).order_by(TeamRow.id)
    return list(session.scalars(query.with_for_update() if lock else query))
