"""People signed in through an identity provider: who they are, what their groups grant.

The identity provider (OpenID Connect) says who a person is and which groups they are in; the
server's group map says what each group may do: a role (`operator` or `viewer`), org-wide or
for named teams. A person in several mapped groups gets the strongest role among them, over
the union of those groups' teams (org-wide if any of them is org-wide); a person in none may
not sign in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from governor.domain.model import Role

# the roles a person may sign in as, strongest first
PERSON_ROLES = (Role.OPERATOR, Role.VIEWER)


@dataclass(frozen=True)
class Identity:
    """A person as the identity provider vouched for them just now."""

    issuer: str
    subject: str
    email: str | None
    groups: tuple[str, ...]

    @property
    def said(self) -> str:
        """How an event names them: the e-mail address, else the subject."""
        return self.email or self.subject


@dataclass(frozen=True)
class Vouched:
    """A sign-in or refresh the provider answered: who, and the refresh token to ask again
    with (None where it issued none)."""

    identity: Identity
    refresh_token: str | None


@dataclass(frozen=True)
class Authorization:
    """Where to send the browser to sign in, and what its return is checked against."""

    url: str
    state: str
    code_verifier: str
    nonce: str


@dataclass(frozen=True)
class DeviceCode:
    """A device sign-in under way: the person confirms `user_code` at `verification_uri`."""

    device_code: str
    user_code: str
    verification_uri: str
    verification_uri_complete: str | None
    expires_in: int
    interval: int


@dataclass(frozen=True)
class GroupGrant:
    """What one group grants: a role, org-wide (`teams` None) or for the named teams."""

    role: Role
    teams: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.role not in PERSON_ROLES:
            wanted = " or ".join(r.value for r in PERSON_ROLES)
            raise ValueError(f"a group grants {wanted}, not {self.role.value!r}")
        if self.teams is not None and not self.teams:
            raise ValueError("teams, where given, names at least one team (omit it: org-wide)")


def grant_of(groups: Iterable[str], group_map: Mapping[str, GroupGrant]) -> GroupGrant | None:
    """What a person in `groups` may do: the strongest role their mapped groups grant, over
    the union of those groups' teams (None: org-wide); None when no group of theirs is mapped."""
    grants = [group_map[g] for g in groups if g in group_map]
    if not grants:
        return None
    role = min((g.role for g in grants), key=PERSON_ROLES.index)
    of_role = [g for g in grants if g.role is role]
    if any(g.teams is None for g in of_role):
        return GroupGrant(role)
    return GroupGrant(role, tuple(sorted({t for g in of_role for t in g.teams or ()})))
