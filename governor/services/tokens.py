"""Bearer tokens: random, shown once, stored as a SHA-256 hash, compared in constant time."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session, sessionmaker

from governor.db import repository as repo
from governor.db.engine import read_only
from governor.db.tables import TokenRow
from governor.domain.errors import Forbidden, Unauthenticated
from governor.domain.model import Role
from governor.services.ids import new_id

PREFIX = {
    Role.OPERATOR: "gov_op_",
    Role.VIEWER: "gov_view_",
    Role.JOB: "gov_job_",
    Role.AGENT: "gov_agent_",
}


@dataclass(frozen=True)
class Principal:
    role: Role
    run_id: str | None = None
    budget_id: str | None = None
    pod_id: str | None = None
    node: str | None = None

    def require(self, *roles: Role) -> None:
        if self.role not in roles:
            wanted = " or ".join(r.value for r in roles)
            raise Forbidden(f"this needs a {wanted} token; yours is a {self.role.value} token")

    def require_run(self, run_id: str) -> None:
        """Operators may act on any run; a job token only on its own."""
        if self.role is Role.JOB and self.run_id != run_id:
            raise Forbidden("a job token works only for its own run")
        self.require(Role.OPERATOR, Role.JOB)

    def require_pod(self, pod_id: str) -> None:
        """Operators may report for any pod; an agent token only for its own."""
        if self.role is Role.AGENT and self.pod_id != pod_id:
            raise Forbidden("an agent token works only for its own pod")
        self.require(Role.OPERATOR, Role.AGENT)

    def require_node(self, node: str) -> None:
        """Operators may report for any machine; a node agent's token only for its own."""
        if self.role is Role.AGENT and self.node != node:
            raise Forbidden("an agent token works only for its own node")
        self.require(Role.OPERATOR, Role.AGENT)

    def require_budget(self, budget_id: str) -> None:
        if self.role is Role.JOB and self.budget_id != budget_id:
            raise Forbidden("a job token works only for its own run's budget")
        self.require(Role.OPERATOR, Role.JOB)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def issue(
    session: Session,
    role: Role,
    now: datetime,
    *,
    label: str | None = None,
    run_id: str | None = None,
    budget_id: str | None = None,
    pod_id: str | None = None,
    node: str | None = None,
) -> str:
    """Create a token and return it: the only time it exists in plain text."""
    token = PREFIX[role] + secrets.token_urlsafe(32)
    adopt(
        session,
        token,
        role,
        now,
        label=label,
        run_id=run_id,
        budget_id=budget_id,
        pod_id=pod_id,
        node=node,
    )
    return token


def adopt(
    session: Session,
    token: str,
    role: Role,
    now: datetime,
    *,
    label: str | None = None,
    run_id: str | None = None,
    budget_id: str | None = None,
    pod_id: str | None = None,
    node: str | None = None,
) -> None:
    """Store a token chosen elsewhere (the bootstrap operator token); idempotent."""
    hashed = digest(token)
    if repo.token_by_hash(session, hashed) is not None:
        return
    session.add(
        TokenRow(
            id=new_id("tok"),
            role=role,
            token_hash=hashed,
            label=label,
            run_id=run_id,
            budget_id=budget_id,
            pod_id=pod_id,
            node=node,
            created_at=now,
        )
    )


def authenticate(session: Session, token: str | None) -> Principal:
    return _principal(session, _digest_of(token))


def _digest_of(token: str | None) -> str:
    if not token:
        raise Unauthenticated("missing bearer token: send 'Authorization: Bearer <token>'")
    return digest(token)


def _principal(session: Session, hashed: str) -> Principal:
    row = repo.token_by_hash(session, hashed)
    if row is None or not hmac.compare_digest(row.token_hash, hashed):
        raise Unauthenticated("unknown or revoked token")
    return Principal(
        role=row.role,
        run_id=row.run_id,
        budget_id=row.budget_id,
        pod_id=row.pod_id,
        node=row.node,
    )


class TokenCache:
    """Whom a token belongs to, remembered for `ttl_s` seconds, for at most `size` tokens.

    Most requests then authenticate without a database round trip. A token taken out of the
    database keeps working for at most `ttl_s` more seconds on any replica (each replica
    remembers on its own); the server sets `ttl_s` to one enforcement interval. Unknown
    tokens are never remembered: each is looked up.
    """

    def __init__(
        self,
        ttl_s: float = 5.0,
        size: int = 10_000,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl_s, self._size, self._monotonic = ttl_s, size, monotonic
        self._known: OrderedDict[str, tuple[float, Principal]] = OrderedDict()
        self._lock = threading.Lock()

    def authenticate(self, sessions: sessionmaker[Session], token: str | None) -> Principal:
        hashed = _digest_of(token)
        now = self._monotonic()
        with self._lock:
            known = self._known.get(hashed)
            if known is not None and now - known[0] < self._ttl_s:
                return known[1]
        with read_only(sessions) as session:
            principal = _principal(session, hashed)
        with self._lock:
            self._known[hashed] = (now, principal)
            self._known.move_to_end(hashed)
            while len(self._known) > self._size:
                self._known.popitem(last=False)
        return principal


def bootstrap_operator(session: Session, configured: str | None, now: datetime) -> str | None:
    """Make sure an operator can log in. Returns a newly generated token, to be shown once."""
    if configured:
        adopt(session, configured, Role.OPERATOR, now, label="GOVERNOR_OPERATOR_TOKEN")
        return None
    if repo.has_operator_token(session):
        return None
    return issue(session, Role.OPERATOR, now, label="generated at first start")
