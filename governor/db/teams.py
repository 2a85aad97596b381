"""Queries over the teams. Never commits: the unit of work does."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from governor.db.keyset import Keyset
from governor.db.tables import TeamRow
from governor.domain.errors import NotFound
from governor.domain.paging import Page, PageRequest
from governor.domain.teams import TeamScope

TEAMS = Keyset("teams", (TeamRow.created_at, TeamRow.id))


def _not_found(ref: str) -> NotFound:
    return NotFound(f"no team {ref!r}")


def get_team(session: Session, team_id: str, scope: TeamScope) -> TeamRow:
    """The team with this id, if `scope` sees it (a team it does not see is not found)."""
    row = session.get(TeamRow, team_id)
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


def teams_page(session: Session, request: PageRequest, scope: TeamScope) -> Page[TeamRow]:
    """A page of the teams `scope` sees, oldest first."""
    query = select(TeamRow)
    if scope.team_ids is not None:
        query = query.where(TeamRow.id.in_(scope.team_ids))
    return TEAMS.page(session, query, request)
