"""A token as it is read (never the token itself, which is not kept), or as it is issued
(with the token, shown once); and the grants, listings and revocations that answer with it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.tables import TokenRow
from governor.domain.model import Role
from governor.domain.paging import Page, PageRequest
from governor.services.security import tokens
from governor.services.security.tokens import Principal


@dataclass(frozen=True)
class TokenInfo:
    """A token on file: never the token itself, which is not kept."""

    id: str
    role: Role
    label: str | None
    run_id: str | None
    pod_id: str | None
    node: str | None
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
    expires_at: datetime | None
    token: str = field(metadata={"doc": "Shown once: store it now."})


def info(row: TokenRow) -> TokenInfo:
    return TokenInfo(
        id=row.id,
        role=row.role,
        label=row.label,
        run_id=row.run_id,
        pod_id=row.pod_id,
        node=row.node,
        bootstrap=row.bootstrap,
        created_at=row.created_at,
        expires_at=row.expires_at,
        revoked_at=row.revoked_at,
    )


def page(session: Session, request: PageRequest) -> Page[TokenInfo]:
    """A page of the tokens on file, newest first."""
    rows = tokens.listing(session, request)
    return Page([info(r) for r in rows.items], rows.next_cursor)


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
) -> IssuedToken:
    """An operator creates a token (tokens.grant), for a pod that exists if for one."""
    if pod_id is not None:
        repo.get_pod(session, pod_id)
    token, row = tokens.grant(
        session,
        role,
        now,
        by=by,
        label=label,
        pod_id=pod_id,
        node=node,
        expires_at=expires_at,
    )
    return IssuedToken(row.id, role, label, pod_id, node, expires_at, token)


def revoke(session: Session, token_id: str, now: datetime, *, by: Principal) -> TokenInfo:
    """An operator ends a token (tokens.revoke)."""
    return info(tokens.revoke(session, token_id, now, by=by))
