from __future__ import annotations

from governor.api.deps import (
    CeilingDecider,
    CeilingSetter,
    Now,
    Operator,
    OrgOperator,
    Paging,
    Tx,
    Viewer,
)
from governor.api.error_responses import errors
from governor.api.route import api_router
from governor.api.schemas import (
    DecisionIn,
    ExtensionIn,
    TeamCeilingIn,
    TeamExtensionOut,
    TeamIn,
    TeamOut,
    TeamReportOut,
    page_of,
)
from governor.domain.paging import Page
from governor.services.fleet import team_model, teams
from governor.services.fleet.team_model import Team, TeamExtension
from governor.services.money.team_ceilings import CeilingDeclaration
from governor.services.security.safe_input import ClientDate
from governor.services.view import team_report
from governor.services.view.team_report import TeamReport

router = api_router(prefix="/v1/teams", tags=["teams"])


@router.post("", status_code=201, response_model=TeamOut, responses=errors(409))
def create(body: TeamIn, caller: OrgOperator, tx: Tx, now: Now) -> Team:
    """Make a team: it holds budgets, and its periods run in its time zone. Its name is
    unique (409 otherwise). An org-wide operator's alone (403 for a team's)."""
    declaration = teams.TeamDeclaration(
        name=body.name.strip(),
        time_zone=body.time_zone,
        note=body.note,
        org_approval_over_usd=body.org_approval_over_usd,
    )
    with tx() as session:
        return team_model.create(session, declaration, now, by=caller)


@router.get("", response_model=page_of(TeamOut))
def list_teams(caller: Viewer, tx: Tx, now: Now, paging: Paging) -> Page[Team]:
    """The teams the caller may see, oldest first (the default team among them), each with
    its money in its current period."""
    with tx.read() as session:
        return team_model.page(session, paging, caller.teams, now)


@router.get("/{team_id}", response_model=TeamOut)
def get_team(team_id: str, caller: Viewer, tx: Tx, now: Now) -> Team:
    with tx.read() as session:
        return team_model.get(session, team_id, caller.teams, now)


@router.post("/{team_id}/ceiling", response_model=TeamOut, responses=errors(409))
def declare_ceiling(
    team_id: str, body: TeamCeilingIn, caller: CeilingSetter, tx: Tx, now: Now
) -> Team:
    """Declare the team's ceiling per period, in writing, once: afterwards only an approved
    extension raises it, for one period (409 if it is declared already)."""
    declaration = CeilingDeclaration(body.ceiling_usd, body.period, body.period_days, body.reason)
    with tx() as session:
        return team_model.declare_ceiling(
            session, team_id, declaration, now, scope=caller.teams, by=caller
        )


@router.post(
    "/{team_id}/extensions",
    status_code=201,
    response_model=TeamExtensionOut,
    responses=errors(409),
)
def request_extension(
    team_id: str, body: ExtensionIn, caller: Operator, tx: Tx, now: Now
) -> TeamExtension:
    """Ask to raise the team's ceiling for its current period; nothing changes until an
    org-wide operator or approver decides."""
    with tx() as session:
        return team_model.request_extension(
            session, team_id, body.amount_usd, body.reason, now, scope=caller.teams, by=caller
        )


@router.post(
    "/{team_id}/extensions/{extension_id}/approve",
    response_model=TeamExtensionOut,
    responses=errors(409),
)
def approve_extension(
    team_id: str,
    extension_id: str,
    caller: CeilingDecider,
    tx: Tx,
    now: Now,
    body: DecisionIn | None = None,
) -> TeamExtension:
    """Approve: the team's ceiling is raised for the period the request was made in; a hold
    the raise covers is lifted (its stopped pods stay stopped until resumed)."""
    with tx() as session:
        return team_model.decide_extension(
            session, team_id, extension_id, True, _note(body), now, scope=caller.teams, by=caller
        )


@router.post(
    "/{team_id}/extensions/{extension_id}/deny",
    response_model=TeamExtensionOut,
    responses=errors(409),
)
def deny_extension(
    team_id: str,
    extension_id: str,
    caller: CeilingDecider,
    tx: Tx,
    now: Now,
    body: DecisionIn | None = None,
) -> TeamExtension:
    with tx() as session:
        return team_model.decide_extension(
            session, team_id, extension_id, False, _note(body), now, scope=caller.teams, by=caller
        )


def _note(body: DecisionIn | None) -> str | None:
    return None if body is None else body.note


@router.get("/{team_id}/report", response_model=TeamReportOut, responses=errors(409))
def get_report(
    team_id: str, caller: Viewer, tx: Tx, now: Now, period: ClientDate | None = None
) -> TeamReport:
    """The team's report for the period that holds the day `period` (YYYY-MM-DD, in the
    team's time zone; unset: the current period; a team without a ceiling has calendar
    months): its ceiling, each budget's spend in the period, its extensions. 409 for a period
    not begun."""
    with tx.read() as session:
        return team_report.report(session, team_id, period, now, scope=caller.teams)
