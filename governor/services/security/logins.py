"""Dashboard sign-in: a viewer, approver or operator token is checked once, then known by
its id.

The page's session remembers the token's id, never the token; every request asks again
whether that token is still in force, so a revoked or expired token ends its sessions too.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from governor.db.tables import TokenRow
from governor.domain.model import Role
from governor.services.security import tokens
from governor.services.security.tokens import Principal

PAGE_ROLES = (Role.OPERATOR, Role.APPROVER, Role.VIEWER)


@dataclass(frozen=True)
class Login:
    token_id: str
    role: Role


def sign_in(caller: Principal) -> Login:
    """The sign-in of a pasted token's caller (`callers.identify`); Forbidden if its role may
    not see the page."""
    caller.require(*PAGE_ROLES)
    assert caller.token_id is not None  # a token found on file
    return Login(caller.token_id, caller.role)


def role_of(session: Session, token_id: str, now: datetime) -> Role | None:
    """The role of a token still in force, if it is one that may see the page."""
    row = session.get(TokenRow, token_id)
    if row is None or row.revoked_at is not None or row.role not in PAGE_ROLES:
        return None
    return None if row.expires_at is not None and row.expires_at <= now else row.role


def person_of(session: Session, token_id: str) -> str | None:
    """Who a token signed in through the identity provider is for (their e-mail, else their
    subject); None for any other token."""
    row = session.get(TokenRow, token_id)
    return None if row is None else row.email or row.subject


def page_caller(session: Session, token_id: str, now: datetime) -> Principal | None:
    """Who a page session calls as, where the page's cookie also opens an API route: its
    token, while still in force for the page."""
    role = role_of(session, token_id, now)
    return None if role is None else tokens.holder(session, token_id)
