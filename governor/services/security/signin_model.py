"""What the command line's sign-in is answered: a device sign-in started, then its outcome."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from governor.domain.model import Role


@dataclass(frozen=True)
class DeviceSignin:
    """A device sign-in under way: the person opens `verification_uri` (or the complete one),
    confirms `user_code` and signs in there; the command line polls with `device_code`."""

    device_code: str
    user_code: str
    verification_uri: str
    verification_uri_complete: str | None
    expires_in_s: int
    interval_s: int = field(metadata={"doc": "how long to wait between polls"})


@dataclass(frozen=True)
class DeviceOutcome:
    """`pending` until the person has signed in; then `signed_in` with their token (shown
    once, ending within the hour), its role and teams (null: org-wide), and who they are."""

    status: str = field(metadata={"doc": "pending or signed_in"})
    token: str | None = None
    token_id: str | None = None
    role: Role | None = None
    teams: tuple[str, ...] | None = None
    person: str | None = None
    expires_at: datetime | None = None
