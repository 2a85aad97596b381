"""Page sessions: a signed, expiring cookie that names a token by its id, and a CSRF token.

The cookie holds `session id . token id . expiry . HMAC-SHA256` under a secret every replica
shares (configured, or kept in the database), so a restart or another replica signs no one
out. It never holds the bearer token. The CSRF token is an HMAC of the session id under the
same secret: per session, nothing to store. Signing out ends the session id on the replica
that served it until it would have expired anyway; the cookie itself is cleared.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta

from governor.domain.model import Role

COOKIE = "governor_session"
LIFETIME = timedelta(hours=12)
# a sign-in through the identity provider under way: its state, PKCE verifier and nonce
PENDING_COOKIE = "governor_signin"
PENDING_LIFETIME = timedelta(minutes=10)


@dataclass(frozen=True)
class PageSession:
    session_id: str
    token_id: str
    expires_at: datetime
    role: Role
    csrf: str
    person: str | None = None  # who signed in through the identity provider

    @property
    def can_decide(self) -> bool:
        """May decide extension requests: an operator or an approver."""
        return self.role in (Role.OPERATOR, Role.APPROVER)

    @property
    def can_operate(self) -> bool:
        """May resume pods and manage tokens: an operator alone."""
        return self.role is Role.OPERATOR


class Keys:
    """The secret behind every cookie and CSRF token, shared by every replica."""

    def __init__(self, secret: bytes) -> None:
        self._secret = secret
        self._ended: dict[str, datetime] = {}
        self._lock = threading.Lock()

    def _mac(self, text: str) -> str:
        return hmac.new(self._secret, text.encode(), hashlib.sha256).hexdigest()

    def issue(
        self, token_id: str, now: datetime, lifetime: timedelta = LIFETIME
    ) -> tuple[str, int]:
        """A new cookie value for the token, and its lifetime in seconds."""
        lifetime = min(lifetime, LIFETIME)
        expires = int((now + lifetime).timestamp())
        body = f"{secrets.token_urlsafe(18)}.{token_id}.{expires}"
        return f"{body}.{self._mac('cookie:' + body)}", int(lifetime.total_seconds())

    def read(self, cookie: str | None, now: datetime) -> tuple[str, str, datetime] | None:
        """(session id, token id, expiry) of a genuine, unexpired, not ended cookie."""
        if not cookie or cookie.count(".") != 3:
            return None
        session_id, token_id, expires, mac = cookie.split(".")
        body = f"{session_id}.{token_id}.{expires}"
        if not hmac.compare_digest(mac, self._mac("cookie:" + body)) or not expires.isdigit():
            return None
        expires_at = datetime.fromtimestamp(int(expires), tz=now.tzinfo)
        if expires_at <= now:
            return None
        with self._lock:
            if session_id in self._ended:
                return None
        return session_id, token_id, expires_at

    def issue_pending(self, state: str, code_verifier: str, nonce: str, now: datetime) -> str:
        """A cookie for a sign-in sent to the identity provider: what its return is checked
        against (signed, so the browser cannot change it; it holds nothing that signs in)."""
        expires = int((now + PENDING_LIFETIME).timestamp())
        body = f"{state}.{code_verifier}.{nonce}.{expires}"
        return f"{body}.{self._mac('pending:' + body)}"

    def read_pending(self, cookie: str | None, now: datetime) -> tuple[str, str, str] | None:
        """(state, code verifier, nonce) of a genuine, unexpired sign-in cookie."""
        if not cookie or cookie.count(".") != 4:
            return None
        state, verifier, nonce, expires, mac = cookie.split(".")
        body = f"{state}.{verifier}.{nonce}.{expires}"
        if not hmac.compare_digest(mac, self._mac("pending:" + body)) or not expires.isdigit():
            return None
        if datetime.fromtimestamp(int(expires), tz=now.tzinfo) <= now:
            return None
        return state, verifier, nonce

    def csrf(self, session_id: str) -> str:
        return self._mac("csrf:" + session_id)

    def csrf_ok(self, session: PageSession, sent: str | None) -> bool:
        return bool(sent) and hmac.compare_digest(session.csrf, sent or "")

    def end(self, session: PageSession, now: datetime) -> None:
        """Sign out: the cookie stops working here even if a copy of it survives."""
        with self._lock:
            self._ended = {k: v for k, v in self._ended.items() if v > now}
            self._ended[session.session_id] = session.expires_at
