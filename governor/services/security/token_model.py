"""A token as it is read (never the token itself, which is not kept), or as it is issued
(with the token, shown once); and the grants, listings and revocations that answer with it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db import team_scope
from governor.db import teams as team_queries
from governor.db.tables import TokenRow
from governor.domain.model import Role
from governor.domain.paging import Page, PageRequest
from governor.domain.teams import TeamScope
from governor.services.security import scopes, tokens
from governor.services.security.tokens import Principal

# the roles whose tokens may be scoped to teams (a job's and an agent's are bound instead)
SCOPED_ROLES = (Role.OPERATOR, Role.APPROVER, Role.VIEWER, Role.GATE)


@dataclass(frozen=True)
class TokenInfo:
    """A token on file: never the token itself, which is not kept."""

    id: str
    role: Role
    label: str | None
    run_id: str | None
    pod_id: str | None
    node: str | None
    teams: tuple[str, ...] | None = field(
        metadata={"doc": "the ids of the teams it is for; null: every team (org-wide)"}
    )
    bootstrap: bool = field(metadata={"doc": "adopted from GOVERNOR_OPERATOR_TOKEN"})
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None


@dataclass(frozen=True)
class IssuedToken:
    id: str
    role: Role
    label: str | None
    pod_id: str | None
    node: str | None
    teams: tuple[str, ...] | None = field(
        metadata={"doc": "the ids of the teams it is for; null: every team (org-wide)"}
    )
    expires_at: datetime | None
    token: str = field(metadata={"doc": "Shown once: store it now."})


def info(row: TokenRow, teams: tuple[str, ...] | None) -> TokenInfo:
    return TokenInfo(
        id=row.id,
        role=row.role,
        label=row.label,
        run_id=row.run_id,
        pod_id=row.pod_id,
        node=row.node,
        teams=teams,
        bootstrap=row.bootstrap,
        created_at=row.created_at,
        expires_at=row.expires_at,
        revoked_at=row.revoked_at,
    )


def page(session: Session, request: PageRequest, scope: TeamScope) -> Page[TokenInfo]:
    """A page of the tokens on file that `scope` may see, newest first."""
    rows = tokens.listing(session, request, scope)
    teams = team_scope.teams_of_tokens(session, [r.id for r in rows.items])
    return Page([info(r, teams.get(r.id)) for r in rows.items], rows.next_cursor)


def grant(
    session: Session,
    role: Role,
    now: datetime,
    *,
    by: Principal,
    label: str | None = None,
    pod_id: str | None = None,
    node: str | None = None,
    expires_at: datetime | None = None,
    teams: Sequence[str] | None = None,
) -> IssuedToken:
    """An operator creates a token (tokens.grant), for a pod that exists if for one; an
    operator's, approver's or viewer's for the `teams` named (ids or names; None: every
    team). A team's operator grants within its own teams only: a team, or a pod, outside
    them is not found, a token for every team or for a machine's node agent is Forbidden;
    without `teams` its token is for the granting operator's teams."""
    if pod_id is not None:
        repo.get_pod(session, pod_id)
        scopes.require_seen(session, by, {"pod_id": pod_id})
    if node is not None:
        by.require_org_wide("a node agent's token (its machine may run every team's pods)")
    team_ids = _team_ids(session, teams, by) if role in SCOPED_ROLES else None
    token, row = tokens.grant(
        session,
        role,
        now,
        by=by,
        label=label,
        pod_id=pod_id,
        node=node,
        expires_at=expires_at,
        team_ids=team_ids,
    )
    shown = None if team_ids is None else tuple(sorted(team_ids))
    return IssuedToken(row.id, role, label, pod_id, node, shown, expires_at, token)


def _team_ids(session: Session, refs: Sequence[str] | None, by: Principal) -> frozenset[str] | None:
    """The ids of the teams named, each one `by` may see (NotFound otherwise); None: every
    team, which only an org-wide operator grants (a team's operator grants its own)."""
    if not refs:
        return by.team_ids
    return frozenset(team_queries.find_team(session, ref, by.teams).id for ref in refs)


def revoke(session: Session, token_id: str, now: datetime, *, by: Principal) -> TokenInfo:
    """An operator ends a token (tokens.revoke)."""
    row = tokens.revoke(session, token_id, now, by=by)
    return info(row, team_scope.teams_of_tokens(session, [row.id]).get(row.id))
