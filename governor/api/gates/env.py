"""What an accepted launch's job finds in its environment: the governor's address and its
one-time claim secret, which `governor.client` exchanges for its run's id and job token."""

from __future__ import annotations

from dataclasses import dataclass

CLAIM_ENV = "GOVERNOR_CLAIM"
URL_ENV = "GOVERNOR_URL"


@dataclass(frozen=True)
class Env:
    url: str  # the governor's address as the launcher reached it
    claim: str
