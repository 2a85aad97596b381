from __future__ import annotations

from governor.api.deps import Now, Operator, Paging, Tx, Viewer
from governor.api.error_responses import errors
from governor.api.route import api_router
from governor.api.schemas import TeamIn, TeamOut, page_of
from governor.domain.paging import Page
from governor.services.fleet import team_model, teams
from governor.services.fleet.team_model import Team

router = api_router(prefix="/v1/teams", tags=["teams"])


@router.post("", status_code=201, response_model=TeamOut, responses=errors(409))
def create(body: TeamIn, caller: Operator, tx: Tx, now: Now) -> Team:
    """Make a team: it holds budgets, and its periods run in its time zone. Its name is
    unique (409 otherwise)."""
    declaration = teams.TeamDeclaration(
        name=body.name.strip(), time_zone=body.time_zone, note=body.note
    )
    with tx() as session:
        return team_model.create(session, declaration, now, by=caller)


@router.get("", response_model=page_of(TeamOut))
def list_teams(caller: Viewer, tx: Tx, paging: Paging) -> Page[Team]:
    """The teams the caller may see, oldest first (the default team among them)."""
    with tx.read() as session:
        return team_model.page(session, paging, caller.teams)


@router.get("/{team_id}", response_model=TeamOut)
def get_team(team_id: str, caller: Viewer, tx: Tx) -> Team:
    with tx.read() as session:
        return team_model.get(session, team_id, caller.teams)
