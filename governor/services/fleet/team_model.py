"""A team as it is read, and the makes and reads that answer with it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from governor.db.tables import TeamRow
from governor.domain.paging import Page, PageRequest
from governor.domain.teams import TeamScope
from governor.services.fleet import teams
from governor.services.security.tokens import Principal


@dataclass(frozen=True)
class Team:
    id: str
    name: str
    time_zone: str
    created_at: datetime


def team(row: TeamRow) -> Team:
    return Team(id=row.id, name=row.name, time_zone=row.time_zone, created_at=row.created_at)


def create(
    session: Session, declaration: teams.TeamDeclaration, now: datetime, *, by: Principal
) -> Team:
    return team(teams.create(session, declaration, now, by=by))


def get(session: Session, team_id: str, scope: TeamScope) -> Team:
    return team(teams.get(session, team_id, scope))


def page(session: Session, request: PageRequest, scope: TeamScope) -> Page[Team]:
    rows = teams.page(session, request, scope)
    return Page([team(r) for r in rows.items], rows.next_cursor)
