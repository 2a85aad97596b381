"""Teams made, listed and read: an organisation holds teams, a team holds budgets.

Every read takes the `TeamScope` of the teams its caller may see: a team outside it is not
found, and lists leave it out."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from governor.db import teams as team_queries
from governor.db.tables import TeamRow
from governor.domain.errors import Conflict
from governor.domain.model import Category, Severity
from governor.domain.paging import Page, PageRequest
from governor.domain.teams import DEFAULT_TIME_ZONE, TeamScope
from governor.services import events
from governor.services.ids import new_id
from governor.services.security.tokens import Principal


@dataclass(frozen=True)
class TeamDeclaration:
    name: str
    time_zone: str = DEFAULT_TIME_ZONE  # an IANA name, checked at the edge
    note: str | None = None


def create(
    session: Session, declaration: TeamDeclaration, now: datetime, *, by: Principal
) -> TeamRow:
    """A new team; its name is unique among all teams (409 otherwise)."""
    _refuse_a_taken_name(session, declaration.name)
    team = TeamRow(
        id=new_id("team"), name=declaration.name, time_zone=declaration.time_zone, created_at=now
    )
    try:
        with session.begin_nested():  # a team of the same name may have just committed
            session.add(team)
    except IntegrityError:
        _refuse_a_taken_name(session, declaration.name)
        raise
    events.record(
        session,
        now,
        Severity.INFO,
        Category.OPERATOR,
        f"team:{team.id}",
        f"Team {team.name!r} made by {by.said} (time zone {team.time_zone}).",
        budget_id=None,
        evidence={"time_zone": team.time_zone, "note": declaration.note, "by": by.evidence},
    )
    return team


def _refuse_a_taken_name(session: Session, name: str) -> None:
    taken = team_queries.team_named(session, name)
    if taken is not None:
        raise Conflict(f"team {taken.id} is already named {name!r}: choose another name")


def get(session: Session, team_id: str, scope: TeamScope) -> TeamRow:
    return team_queries.get_team(session, team_id, scope)


def find(session: Session, ref: str, scope: TeamScope) -> TeamRow:
    """The team `ref` names, by id or else by name."""
    return team_queries.find_team(session, ref, scope)


def page(session: Session, request: PageRequest, scope: TeamScope) -> Page[TeamRow]:
    return team_queries.teams_page(session, request, scope)
