"""What a person's groups grant: the strongest role among their mapped groups, over the union
of those groups' teams, org-wide if any of them is; nothing for a person in no mapped group."""

from __future__ import annotations

import pytest

from governor.domain.identity import GroupGrant, grant_of
from governor.domain.model import Role

GROUPS = {
    "admins": GroupGrant(Role.OPERATOR),
    "team-a": GroupGrant(Role.OPERATOR, ("team-a",)),
    "team-b": GroupGrant(Role.OPERATOR, ("team-b",)),
    "finance": GroupGrant(Role.VIEWER),
    "a-watchers": GroupGrant(Role.VIEWER, ("team-a",)),
}


@pytest.mark.parametrize(
    ("groups", "granted"),
    [
        (["admins"], GroupGrant(Role.OPERATOR)),
        (["team-a"], GroupGrant(Role.OPERATOR, ("team-a",))),
        (["team-b", "team-a"], GroupGrant(Role.OPERATOR, ("team-a", "team-b"))),
        (["team-a", "admins"], GroupGrant(Role.OPERATOR)),
        (["finance", "team-b"], GroupGrant(Role.OPERATOR, ("team-b",))),  # the stronger role
        (["a-watchers"], GroupGrant(Role.VIEWER, ("team-a",))),
        (["a-watchers", "finance"], GroupGrant(Role.VIEWER)),
        (["everyone", "finance"], GroupGrant(Role.VIEWER)),
        (["everyone"], None),
        ([], None),
    ],
)
def test_groups_grant(groups: list[str], granted: GroupGrant | None) -> None:
    assert grant_of(groups, GROUPS) == granted


@pytest.mark.parametrize(
    ("role", "teams", "said"),
    [
        (Role.JOB, None, "not 'job'"),
        (Role.AGENT, ("team-a",), "not 'agent'"),
        (Role.OPERATOR, (), "at least one team"),
    ],
)
def test_a_group_grants_a_person_role(role: Role, teams: tuple[str, ...] | None, said: str) -> None:
    with pytest.raises(ValueError, match=said):
        GroupGrant(role, teams)
