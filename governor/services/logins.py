"""Dashboard sign-in: a viewer or operator token is checked once, then known by its id.

The page's session remembers the token's id, never the token; every request asks again
whether that token still exists, so a revoked token ends its sessions too.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.tables import TokenRow
from governor.domain.model import Role
from governor.services import tokens

PAGE_ROLES = (Role.OPERATOR, Role.VIEWER)


@dataclass(frozen=True)
class Login:
    token_id: str
    role: Role


def sign_in(session: Session, token: str) -> Login:
    """Check a pasted token. Unauthenticated if unknown; Forbidden if not a page role."""
    tokens.authenticate(session, token.strip()).require(*PAGE_ROLES)
    row = repo.token_by_hash(session, tokens.digest(token.strip()))
    assert row is not None  # authenticate found it
    return Login(row.id, row.role)


def role_of(session: Session, token_id: str) -> Role | None:
    """The role of a token still on file, if it is one that may see the page."""
    row = session.get(TokenRow, token_id)
    return row.role if row is not None and row.role in PAGE_ROLES else None
