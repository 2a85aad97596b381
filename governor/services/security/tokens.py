"""Bearer tokens: random, shown once, stored as a SHA-256 hash, compared in constant time.

A token ends when it is revoked (by an operator; a job's when its run takes up a new attempt;
an agent's when its pod is gone) or when it expires. The operator token adopted from the
server's settings is the bootstrap token: rotating it revokes every earlier one.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.orm import Session, sessionmaker

from governor.db import repository as repo
from governor.db import team_scope
from governor.db.engine import read_only
from governor.db.tables import TokenRow
from governor.domain.errors import Conflict, Forbidden, Unauthenticated
from governor.domain.model import Category, Role, Severity
from governor.domain.paging import Page, PageRequest
from governor.domain.teams import TeamScope
from governor.services import events
from governor.services.ids import new_id

# How much further back than its last check the token cache asks for revocations.
REVOKED_OVERLAP = timedelta(minutes=10)

PREFIX = {
    Role.OPERATOR: "gov_op_",
    Role.APPROVER: "gov_appr_",
    Role.VIEWER: "gov_view_",
    Role.JOB: "gov_job_",
    Role.AGENT: "gov_agent_",
    Role.GATE: "gov_gate_",
}


def _a(word: str) -> str:
    """The word with its article: "an operator", "a viewer"."""
    return f"{'an' if word[:1] in 'aeiou' else 'a'} {word}"


@dataclass(frozen=True)
class Principal:
    role: Role
    run_id: str | None = None
    budget_id: str | None = None
    pod_id: str | None = None
    node: str | None = None
    token_id: str | None = None
    expires_at: datetime | None = None
    label: str | None = None
    bootstrap: bool = False  # adopted from GOVERNOR_OPERATOR_TOKEN
    # a person signed in through the identity provider: who they are there
    subject: str | None = None
    email: str | None = None
    # the teams an operator, approver or viewer token is for; None: every team (org-wide).
    # A job's or agent's token is bound to its run or pod instead and is never scoped here.
    team_ids: frozenset[str] | None = None

    @property
    def teams(self) -> TeamScope:
        """The teams this caller may see and act in."""
        return TeamScope(self.team_ids)

    def require_org_wide(self, what: str) -> None:
        """Forbidden unless the token is for every team: `what` needs an org-wide one."""
        if self.team_ids is not None:
            raise Forbidden(
                f"{what} needs an org-wide {self.role.value} token; yours is for team(s) "
                f"{', '.join(sorted(self.team_ids))} only"
            )

    @property
    def said(self) -> str:
        """Who acted, as an event's reader wants it: the person, or the token's label (what
        people call it), and its id (what `governor token revoke` takes)."""
        if self.subject is not None:
            return f"{self.email or self.subject} ({self.role.value}, signed in; {self.token_id})"
        if self.bootstrap:
            return f"the bootstrap {self.role.value} token ({self.token_id})"
        if self.label:
            return f"{self.role.value} token {self.label!r} ({self.token_id})"
        return f"{self.role.value} token {self.token_id}"

    @property
    def evidence(self) -> dict[str, object]:
        """Who acted, for an event's evidence (`by`)."""
        said: dict[str, object] = {
            "token_id": self.token_id,
            "role": self.role.value,
            "label": self.label,
            "bootstrap": self.bootstrap,
            "teams": None if self.team_ids is None else sorted(self.team_ids),
        }
        if self.subject is not None:
            said.update(subject=self.subject, email=self.email)
        return said

    def expired(self, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= now

    def require(self, *roles: Role) -> None:
        if self.role not in roles:
            wanted = " or ".join(r.value for r in roles)
            raise Forbidden(f"this needs {_a(wanted)} token; yours is {_a(self.role.value)} token")

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
    expires_at: datetime | None = None,
    teams: frozenset[str] | None = None,
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
        expires_at=expires_at,
        teams=teams,
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
    expires_at: datetime | None = None,
    bootstrap: bool = False,
    teams: frozenset[str] | None = None,
) -> None:
    """Store a token chosen elsewhere (the bootstrap operator token); idempotent. `teams`:
    the teams an operator's, approver's or viewer's token is for (None: every team)."""
    hashed = digest(token)
    if repo.token_by_hash(session, hashed) is not None:
        return
    token_id = new_id("tok")
    session.add(
        TokenRow(
            id=token_id,
            role=role,
            token_hash=hashed,
            label=label,
            run_id=run_id,
            budget_id=budget_id,
            pod_id=pod_id,
            node=node,
            created_at=now,
            expires_at=expires_at,
            bootstrap=bootstrap,
        )
    )
    if teams is not None:
        session.flush()  # the token's row before the rows that name it
        team_scope.scope_token(session, token_id, teams)


def authenticate(session: Session, token: str | None, now: datetime) -> Principal:
    return _live(_principal(session, _digest_of(token)), now)


def _live(principal: Principal, now: datetime) -> Principal:
    if principal.expired(now):
        assert principal.expires_at is not None
        raise Unauthenticated(f"this token expired at {principal.expires_at:%Y-%m-%d %H:%M} UTC")
    return principal


def _digest_of(token: str | None) -> str:
    if not token:
        raise Unauthenticated("missing bearer token: send 'Authorization: Bearer <token>'")
    return digest(token)


def _principal(session: Session, hashed: str) -> Principal:
    row = repo.token_by_hash(session, hashed)
    if row is None or not hmac.compare_digest(row.token_hash, hashed):
        raise Unauthenticated("unknown or revoked token")
    if row.revoked_at is not None:
        raise Unauthenticated(f"this token was revoked at {row.revoked_at:%Y-%m-%d %H:%M:%S} UTC")
    return _of(session, row)


def _of(session: Session, row: TokenRow) -> Principal:
    """The token's caller. Only an operator's, approver's or viewer's token can be scoped to
    teams: a job's or an agent's is looked up with no second statement."""
    bound = row.role in (Role.JOB, Role.AGENT)
    return Principal(
        role=row.role,
        run_id=row.run_id,
        budget_id=row.budget_id,
        pod_id=row.pod_id,
        node=row.node,
        token_id=row.id,
        expires_at=row.expires_at,
        label=row.label,
        bootstrap=row.bootstrap,
        subject=row.subject,
        email=row.email,
        team_ids=None if bound else team_scope.token_teams(session, row.id),
    )


def holder(session: Session, token_id: str) -> Principal:
    """Whose token this is, by its id: the dashboard knows its signed-in token that way."""
    return _of(session, repo.get_token(session, token_id))


class TokenCache:
    """Whom a token belongs to, for at most `size` tokens (the least recently used let go):
    most requests authenticate with no database round trip at all.

    It learns of revocations by asking the database, once every `check_s` seconds, which
    tokens were revoked lately (one query, however many tokens it remembers), so a token
    revoked on any replica stops working here within `check_s` of the revocation; the server
    sets `check_s` to one enforcement interval. A revocation made here is forgotten at once
    (`forget`). Tokens are revoked, never changed otherwise, and an expired token is refused
    by its remembered expiry. Unknown and revoked tokens are never remembered: each use
    looks them up.
    """

    def __init__(
        self,
        check_s: float = 5.0,
        size: int = 10_000,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._check_s, self._size, self._monotonic = check_s, size, monotonic
        self._known: OrderedDict[str, Principal] = OrderedDict()
        self._lock = threading.Lock()
        self._checking = threading.Lock()  # one thread at a time asks for revocations
        self._checked_at: float | None = None  # when it last asked (monotonic)
        self._revoked_since: datetime | None = None  # what it asks for next time

    def remembered(self, token: str | None, now: datetime) -> Principal | None:
        """The token's caller if it is remembered and revocations were asked for within
        `check_s` (no database round trip, no I/O at all), else None: `authenticate` then
        asks."""
        return None if self.stale() else self._remembered(_digest_of(token), now)

    def authenticate(
        self, sessions: sessionmaker[Session], token: str | None, now: datetime
    ) -> Principal:
        hashed = _digest_of(token)
        self.refresh(sessions, now)
        remembered = self._remembered(hashed, now)
        if remembered is not None:
            return remembered
        with read_only(sessions) as session:
            principal = _principal(session, hashed)
        with self._lock:
            self._known[hashed] = principal
            while len(self._known) > self._size:
                self._known.popitem(last=False)
        return _live(principal, now)

    def forget(self, matches: Callable[[Principal], bool]) -> None:
        """Stop remembering the tokens that `matches` (they were revoked here): their next use
        looks them up again."""
        with self._lock:
            for hashed in [h for h, p in self._known.items() if matches(p)]:
                del self._known[hashed]

    def stale(self) -> bool:
        """Is it time to ask for revocations (`refresh`)? Until then `remembered` answers."""
        return self._checked_at is None or self._monotonic() - self._checked_at >= self._check_s

    def _remembered(self, hashed: str, now: datetime) -> Principal | None:
        with self._lock:
            principal = self._known.get(hashed)
            if principal is None:
                return None
            self._known.move_to_end(hashed)
        return _live(principal, now)

    def refresh(self, sessions: sessionmaker[Session], now: datetime) -> None:
        """If it is time (`stale`), forget the tokens revoked since the last check, on any
        replica: one query, however many tokens it remembers. The window reaches
        `REVOKED_OVERLAP` further back, for a revocation committed late or stamped by a
        replica whose clock runs behind; forgetting a token twice costs nothing."""
        if not self.stale():
            return
        with self._checking:
            if not self.stale():
                return  # another thread asked meanwhile
            tick = self._monotonic()
            since = (self._revoked_since or now) - REVOKED_OVERLAP
            with read_only(sessions) as session:
                revoked = set(repo.revoked_hashes(session, since))
            with self._lock:
                for hashed in revoked & self._known.keys():
                    del self._known[hashed]
            self._revoked_since, self._checked_at = now, tick


def revoke_of_run(session: Session, run_id: str, now: datetime) -> None:
    """End the job tokens of a run (its attempt has ended; the next one gets its own)."""
    _revoke(repo.tokens_of(session, Role.JOB, run_id=run_id), now)


def revoke_of_pod(session: Session, pod_id: str, now: datetime) -> None:
    """End the agent tokens of a pod (it is gone)."""
    _revoke(repo.tokens_of(session, Role.AGENT, pod_id=pod_id), now)


def _revoke(rows: Sequence[TokenRow], now: datetime) -> None:
    for row in rows:
        if row.revoked_at is None:
            row.revoked_at = now


def listing(session: Session, request: PageRequest, scope: TeamScope) -> Page[TokenRow]:
    """A page of the tokens on file that `scope` may see, newest first: never the token
    itself, which is not kept."""
    return repo.tokens(session, request, scope)


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
    team_ids: frozenset[str] | None = None,
) -> tuple[str, TokenRow]:
    """An operator creates a token: it is recorded who did (the token itself never is)."""
    token = issue(
        session,
        role,
        now,
        label=label,
        pod_id=pod_id,
        node=node,
        expires_at=expires_at,
        teams=team_ids,
    )
    row = repo.token_by_hash(session, digest(token))
    assert row is not None  # issued just now
    events.record(
        session,
        now,
        Severity.INFO,
        Category.OPERATOR,
        f"token:{row.id}",
        f"Token {row.id} ({_kind(row)}) created by {by.said}.",
        budget_id=None,
        evidence={
            "role": row.role.value,
            "label": row.label,
            "pod_id": pod_id,
            "node": node,
            "teams": None if team_ids is None else sorted(team_ids),
            "expires_at": None if expires_at is None else expires_at.isoformat(),
            "by": by.evidence,
        },
    )
    return token, row


def _kind(row: TokenRow) -> str:
    return row.role.value + (f", {row.label}" if row.label else "")


def revoke(session: Session, token_id: str, now: datetime, *, by: Principal) -> TokenRow:
    """An operator ends a token. The bootstrap token is rotated instead, never revoked here
    (that would lock out whoever relies on the server's setting)."""
    row = repo.get_token(session, token_id)
    if row.bootstrap:
        raise Conflict(
            "this is the bootstrap operator token from GOVERNOR_OPERATOR_TOKEN: set a new value "
            "and run 'governor token rotate-bootstrap' to end it"
        )
    if row.revoked_at is None:
        row.revoked_at = now
        events.record(
            session,
            now,
            Severity.WARNING,
            Category.OPERATOR,
            f"token:{row.id}",
            f"Token {row.id} ({_kind(row)}) revoked by {by.said}.",
            budget_id=row.budget_id,
            evidence={"role": row.role.value, "label": row.label, "by": by.evidence},
        )
    return row


def rotate_bootstrap(session: Session, configured: str, now: datetime) -> int:
    """Make `configured` the one bootstrap operator token: adopt it, and revoke every earlier
    one. Returns how many were revoked."""
    bootstrap_operator(session, configured, now)
    keep = digest(configured)
    ended = [r for r in repo.bootstrap_tokens(session) if r.token_hash != keep]
    _revoke(ended, now)
    if ended:
        events.record(
            session,
            now,
            Severity.WARNING,
            Category.OPERATOR,
            "token:bootstrap",
            f"The bootstrap operator token was rotated: {len(ended)} earlier one(s) revoked.",
            budget_id=None,
            evidence={"revoked": [r.id for r in ended]},
        )
    return len(ended)


def bootstrap_operator(session: Session, configured: str | None, now: datetime) -> str | None:
    """Make sure an operator can log in. Returns a newly generated token, to be shown once.

    A configured token is adopted as a bootstrap token; an earlier one stays valid until
    `rotate_bootstrap` (replicas in a rolling update must not revoke each other's)."""
    if configured:
        adopt(
            session,
            configured,
            Role.OPERATOR,
            now,
            label="GOVERNOR_OPERATOR_TOKEN",
            bootstrap=True,
        )
        return None
    if repo.has_operator_token(session):
        return None
    return issue(session, Role.OPERATOR, now, label="generated at first start")
