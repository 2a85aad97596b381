"""What the core needs from the outside world, stated as protocols the shell implements."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from enum import StrEnum
from typing import Protocol

from governor.domain.model import PodState


class Clock(Protocol):
    def now(self) -> datetime:
        """The current instant, timezone-aware UTC."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


@dataclass(frozen=True)
class PodDescription:
    """What a provider says about one pod. `None` means the provider does not say."""

    state: PodState
    hourly_rate_usd: Decimal | None
    storage_gb: Decimal | None = None


class StopOutcome(StrEnum):
    DONE = "done"  # stopped, already stopped, or already gone
    PENDING = "pending"  # accepted, not finished yet: ask again later
    RETRYABLE = "retryable"  # failed in a way that may pass (timeouts, 429, 5xx)
    PERMANENT = "permanent"  # failed in a way that will not pass by retrying


@dataclass(frozen=True)
class StopResult:
    outcome: StopOutcome
    detail: str = ""


class ProviderError(Exception):
    """A provider call that failed; `retryable` says whether trying again may help, and
    `retry_after_s` how long the provider asked to wait first (None: it did not say)."""

    def __init__(
        self, message: str, *, retryable: bool, retry_after_s: float | None = None
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after_s = retry_after_s


class PodController(Protocol):
    """A provider that can stop a pod while keeping its persistent workspace.

    `stop` is idempotent: a pod that is already stopped, or already gone, is DONE.
    It never terminates or deletes anything.
    """

    stop_latency_s: float

    def describe(self, ref: str) -> PodDescription: ...

    def stop(self, ref: str) -> StopResult: ...
