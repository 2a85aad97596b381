"""A refused role says which token it needs, in English; a team's token sees its teams."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from governor.domain.errors import Forbidden
from governor.domain.model import Role
from governor.services.security.page_sessions import PageSession
from governor.services.security.tokens import Principal


@pytest.mark.parametrize(
    ("role", "needed", "message"),
    [
        (
            Role.JOB,
            (Role.OPERATOR, Role.VIEWER),
            "this needs an operator or viewer token; yours is a job token",
        ),
        (Role.AGENT, (Role.VIEWER,), "this needs a viewer token; yours is an agent token"),
        (Role.VIEWER, (Role.OPERATOR,), "this needs an operator token; yours is a viewer token"),
    ],
)
def test_a_refused_role_is_named_with_its_article(
    role: Role, needed: tuple[Role, ...], message: str
) -> None:
    with pytest.raises(Forbidden) as refused:
        Principal(role).require(*needed)
    assert refused.value.message == message


def test_a_teams_token_sees_its_teams_and_is_refused_what_reaches_every_team() -> None:
    org, team = Principal(Role.APPROVER), Principal(Role.APPROVER, team_ids=frozenset({"t_a"}))
    assert org.teams.sees("t_b") and team.teams.sees("t_a") and not team.teams.sees("t_b")
    org.require_org_wide("making a team")
    with pytest.raises(Forbidden) as refused:
        team.require_org_wide("making a team")
    assert refused.value.message == (
        "making a team needs an org-wide approver token; yours is for team(s) t_a only"
    )


@pytest.mark.parametrize(
    ("role", "decides", "operates"),
    [(Role.OPERATOR, True, True), (Role.APPROVER, True, False), (Role.VIEWER, False, False)],
)
def test_on_the_dashboard_an_approver_decides_and_only_an_operator_resumes_or_revokes(
    role: Role, decides: bool, operates: bool
) -> None:
    page = PageSession("s", "tok", datetime(2026, 1, 1, tzinfo=UTC), role, "csrf")
    assert (page.can_decide, page.can_operate) == (decides, operates)
