"""Notifications: an event worth telling someone about, and what a sink made of it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from typing import Protocol

from governor.domain.ledger import Figures
from governor.domain.model import Category, Severity

RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.CRITICAL: 2}


def at_least(severity: Severity, minimum: Severity) -> bool:
    return RANK[severity] >= RANK[minimum]


@dataclass(frozen=True)
class Money:
    """A budget's figures as of the latest enforcement pass, for a reader deciding what to do:
    committed spend and its parts, against the ceiling."""

    figures: Figures

    @property
    def spent(self) -> Decimal:
        return self.figures.spent

    @property
    def committed(self) -> Decimal:
        return self.figures.committed

    @property
    def ceiling(self) -> Decimal:
        """The effective ceiling: declared plus approved extensions."""
        return self.figures.effective_ceiling

    @property
    def remaining(self) -> Decimal:
        """The ceiling minus committed spend."""
        return self.figures.remaining


@dataclass(frozen=True)
class Notice:
    """One recorded event, as it leaves the governor.

    `always`: every sink is told, whatever its minimum severity (a completed stop: the end of
    something each sink was told about)."""

    event_id: int
    at: datetime
    severity: Severity
    category: Category
    subject: str
    message: str
    budget_id: str | None
    evidence: Mapping[str, object] = field(default_factory=dict)
    budget_name: str | None = None
    money: Money | None = None
    always: bool = False

    @property
    def fingerprint(self) -> tuple[str, str, str, str]:
        """What makes two notices the same message to a reader."""
        return (self.severity.value, self.category.value, self.subject, self.message)


class Outcome(StrEnum):
    DELIVERED = "delivered"
    RETRYABLE = "retryable"  # the receiver may take it later: try again after a while
    PERMANENT = "permanent"  # the receiver refuses it: trying again would not help


@dataclass(frozen=True)
class Delivery:
    outcome: Outcome
    detail: str = ""


class Sink(Protocol):
    """Somewhere notices go.

    `send` makes one attempt and never raises: every failure comes back as a Delivery that
    says whether another attempt could succeed. It is not idempotent on the receiving side
    (an answer lost on the way back means the receiver has it twice), so every delivery
    carries the event's id for the receiver to recognise a repeat.
    """

    @property
    def name(self) -> str:
        """For logs: says where, without the secret part of an address."""
        ...

    def send(self, notice: Notice) -> Delivery: ...

    def close(self) -> None: ...
