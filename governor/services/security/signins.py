"""Sign-in through the identity provider (OpenID Connect): a person becomes a token.

A person the provider vouches for gets the role and teams their groups grant (`grant_of`),
as a token that names them (subject, e-mail), so every action they take records who they
are. On the dashboard that token lives as long as the session (`session_s`) and is checked
again with the provider at least every `recheck_s` (its refresh token): a person the provider
no longer vouches for, or whose groups no longer grant anything, loses it then; a change of
groups changes the role. On the command line the token is short-lived (`cli_token_s`, at most
an hour) and is not checked again: it simply ends.

The provider is asked outside any transaction; a re-check is claimed first (`claimed_at`), so
that of the requests that find a session due, one asks and the others go on as before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from governor.db import team_scope
from governor.db import teams as team_queries
from governor.db.tables import SigninRow, TeamRow, TokenRow
from governor.domain.errors import Forbidden, Unauthenticated, Unavailable
from governor.domain.identity import GroupGrant, Identity, Vouched, grant_of
from governor.domain.model import Category, Role, Severity
from governor.domain.ports import IdentityProvider
from governor.services import events
from governor.services.ids import new_id
from governor.services.security import tokens
from governor.services.security.signin_model import DeviceOutcome, DeviceSignin

UnitOfWork = Callable[[], AbstractContextManager[Session]]

MAX_RECHECK_S = 900.0  # sessions are checked with the provider at least every 15 minutes
MAX_CLI_TOKEN_S = 3600.0  # a token minted by the command line's sign-in ends within the hour
CLAIM_S = 60.0  # how long a re-check under way holds off the others


@dataclass(frozen=True)
class SigninConfig:
    """The group map, and how long what a sign-in opens lasts."""

    group_map: Mapping[str, GroupGrant] = field(default_factory=dict)
    recheck_s: float = MAX_RECHECK_S
    session_s: float = 12 * 3600.0
    cli_token_s: float = MAX_CLI_TOKEN_S
    public_url: str | None = None  # where the provider sends browsers back to, if not asked
    provider_name: str = "your identity provider"  # what the sign-in button calls it


@dataclass(frozen=True)
class _Granted:
    """A grant with its teams found: their ids (for the token) and names (for people)."""

    role: Role
    team_ids: tuple[str, ...] | None
    team_names: tuple[str, ...] | None

    @property
    def scope(self) -> str:
        return " org-wide" if self.team_names is None else f" for {', '.join(self.team_names)}"


def _granted(session: Session, grant: GroupGrant) -> _Granted | None:
    """The grant's teams (named by id or name) as the governor has them; None when it names
    teams and the governor has none of them."""
    if grant.teams is None:
        return _Granted(grant.role, None, None)
    found = {}
    for ref in grant.teams:
        row = session.get(TeamRow, ref) or team_queries.team_named(session, ref)
        if row is not None:
            found[row.id] = row.name
    if not found:
        return None
    ids = tuple(sorted(found))
    return _Granted(grant.role, ids, tuple(found[i] for i in ids))


def _grant(session: Session, identity: Identity, config: SigninConfig) -> _Granted:
    grant = grant_of(identity.groups, config.group_map)
    if grant is None:
        raise Forbidden(
            f"{identity.said} is in none of the groups the governor maps to a role: ask an "
            "administrator to add you to one"
        )
    granted = _granted(session, grant)
    if granted is None:
        raise Forbidden(
            f"the teams {identity.said}'s groups grant ({', '.join(grant.teams or ())}) are "
            "none the governor has: ask an administrator to create them or fix the group map"
        )
    return granted


def _mint(
    session: Session,
    identity: Identity,
    grant: _Granted,
    now: datetime,
    lifetime_s: float,
    how: str,
) -> tuple[str, TokenRow]:
    token = tokens.issue(
        session,
        grant.role,
        now,
        label=f"{how}: {identity.said}"[:200],
        expires_at=now + timedelta(seconds=lifetime_s),
        teams=None if grant.team_ids is None else frozenset(grant.team_ids),
    )
    row = session.scalars(select(TokenRow).where(TokenRow.token_hash == tokens.digest(token))).one()
    row.subject, row.email = identity.subject, identity.email
    events.record(
        session,
        now,
        Severity.INFO,
        Category.OPERATOR,
        f"token:{row.id}",
        f"{identity.said} signed in ({how}) as {grant.role.value}"
        f"{grant.scope}: token {row.id} until {row.expires_at:%Y-%m-%d %H:%M} UTC.",
        budget_id=None,
        evidence={"by": tokens.holder(session, row.id).evidence, "groups": list(identity.groups)},
    )
    return token, row


def open_page_session(
    session: Session, vouched: Vouched, config: SigninConfig, now: datetime
) -> str:
    """A person signed in on the dashboard: the id of the token their page session acts with.
    Forbidden when no group of theirs is mapped."""
    grant = _grant(session, vouched.identity, config)
    _, row = _mint(session, vouched.identity, grant, now, config.session_s, "dashboard")
    if vouched.refresh_token is not None:
        session.add(
            SigninRow(
                id=new_id("sgn"),
                token_id=row.id,
                refresh_token=vouched.refresh_token,
                checked_at=now,
                created_at=now,
            )
        )
    else:  # nothing to check again with: the session lasts one re-check interval
        row.expires_at = now + timedelta(seconds=min(config.recheck_s, config.session_s))
    return row.id


def start_device(provider: IdentityProvider) -> DeviceSignin:
    """A device sign-in started at the provider (for `governor login`)."""
    code = provider.start_device()
    return DeviceSignin(
        device_code=code.device_code,
        user_code=code.user_code,
        verification_uri=code.verification_uri,
        verification_uri_complete=code.verification_uri_complete,
        expires_in_s=code.expires_in,
        interval_s=code.interval,
    )


def finish_device(
    unit_of_work: UnitOfWork,
    provider: IdentityProvider,
    config: SigninConfig,
    device_code: str,
    now: datetime,
) -> DeviceOutcome:
    """A device sign-in polled: pending, or the person's short-lived token (shown once).
    Forbidden when no group of theirs is mapped."""
    vouched = provider.poll_device(device_code)
    if vouched is None:
        return DeviceOutcome(status="pending")
    with unit_of_work() as session:
        grant = _grant(session, vouched.identity, config)
        token, row = _mint(
            session, vouched.identity, grant, now, config.cli_token_s, "command line"
        )
        expires_at = row.expires_at
        token_id = row.id
    return DeviceOutcome(
        status="signed_in",
        token=token,
        token_id=token_id,
        role=grant.role,
        teams=grant.team_names,
        person=vouched.identity.said,
        expires_at=expires_at,
    )


def keep_checked(
    unit_of_work: UnitOfWork,
    provider: IdentityProvider | None,
    config: SigninConfig | None,
    token_id: str,
    now: datetime,
) -> None:
    """If the page session acting with `token_id` is due a re-check, ask the provider: the
    session goes on with the role its groups grant now, or ends (its token revoked). Raises
    Unavailable when the provider does not answer (the session is kept; the next request
    asks again)."""
    if provider is None or config is None:
        return
    with unit_of_work() as session:
        claimed = _claim(session, token_id, now, config)
    if claimed is None:
        return
    signin_id, refresh_token, subject = claimed
    try:
        vouched = provider.refresh(refresh_token, subject)
    except Unauthenticated as exc:
        with unit_of_work() as session:
            _end(
                session, signin_id, now, f"the identity provider no longer vouches for them ({exc})"
            )
        return
    except Unavailable:
        with unit_of_work() as session:
            session.execute(
                update(SigninRow).where(SigninRow.id == signin_id).values(claimed_at=None)
            )
        raise
    with unit_of_work() as session:
        _renew(session, signin_id, vouched, config, now)


def _claim(
    session: Session, token_id: str, now: datetime, config: SigninConfig
) -> tuple[str, str, str] | None:
    row = session.scalars(select(SigninRow).where(SigninRow.token_id == token_id)).one_or_none()
    if row is None or row.checked_at + timedelta(seconds=config.recheck_s) > now:
        return None
    if row.claimed_at is not None and row.claimed_at + timedelta(seconds=CLAIM_S) > now:
        return None  # another request is asking
    token = session.get(TokenRow, token_id)
    if token is None or token.revoked_at is not None or token.subject is None:
        return None
    unclaimed = (
        SigninRow.claimed_at.is_(None)
        if row.claimed_at is None
        else SigninRow.claimed_at == row.claimed_at
    )
    claimed = session.execute(
        update(SigninRow).where(SigninRow.id == row.id, unclaimed).values(claimed_at=now)
    )
    if claimed.rowcount != 1:  # type: ignore[attr-defined]
        return None
    return row.id, row.refresh_token, token.subject


def _renew(
    session: Session, signin_id: str, vouched: Vouched, config: SigninConfig, now: datetime
) -> None:
    row = session.get(SigninRow, signin_id)
    if row is None:
        return
    grant = grant_of(vouched.identity.groups, config.group_map)
    if grant is None:
        _end(session, signin_id, now, "no group of theirs is mapped to a role any more")
        return
    granted = _granted(session, grant)
    if granted is None:
        _end(session, signin_id, now, "none of the teams their groups grant exists any more")
        return
    token = session.get(TokenRow, row.token_id)
    assert token is not None  # a sign-in's token is never deleted
    teams = None if granted.team_ids is None else frozenset(granted.team_ids)
    if (token.role, team_scope.token_teams(session, token.id)) != (granted.role, teams):
        events.record(
            session,
            now,
            Severity.WARNING,
            Category.OPERATOR,
            f"token:{token.id}",
            f"{vouched.identity.said} is now {granted.role.value}{granted.scope} (their "
            "groups changed at the identity provider).",
            budget_id=None,
            evidence={"groups": list(vouched.identity.groups), "was": token.role.value},
        )
        token.role = granted.role
        team_scope.rescope_token(session, token.id, teams)
    token.email = vouched.identity.email
    row.refresh_token = vouched.refresh_token or row.refresh_token
    row.checked_at, row.claimed_at = now, None


def _end(session: Session, signin_id: str, now: datetime, why: str) -> None:
    row = session.get(SigninRow, signin_id)
    if row is None:
        return
    token = session.get(TokenRow, row.token_id)
    session.delete(row)
    if token is None or token.revoked_at is not None:
        return
    token.revoked_at = now
    events.record(
        session,
        now,
        Severity.WARNING,
        Category.OPERATOR,
        f"token:{token.id}",
        f"The dashboard session of {token.email or token.subject} ended: {why}.",
        budget_id=None,
        evidence={"by": tokens.holder(session, token.id).evidence},
    )


def sign_out(session: Session, token_id: str, now: datetime) -> None:
    """A person signs out of the dashboard: the token their session acted with ends
    everywhere (a token pasted at sign-in is left as it is)."""
    row = session.scalars(select(SigninRow).where(SigninRow.token_id == token_id)).one_or_none()
    if row is not None:
        _end(session, row.id, now, "they signed out")
