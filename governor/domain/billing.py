"""Reconciling the meter with what the provider billed.

The governor meters every few seconds; a provider's billing lags and rounds. Both are
compared over the same window: from the first billed figure that covers the pod's
registration to the latest one. Spend never goes below what was billed (the difference is
booked as a true-up), never below what was metered (no negative entries), and a
disagreement of more than DRIFT_SHARE says one of the two rates is wrong.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from governor.domain.money import ZERO, usd

DRIFT_SHARE = Decimal("0.05")
DRIFT_FLOOR_USD = Decimal("0.01")  # below a cent apart, rounding is not drift


@dataclass(frozen=True)
class Slice:
    """A charge for a period: a ledger entry as the reconciliation sees it."""

    amount: Decimal
    start: datetime
    end: datetime


@dataclass(frozen=True)
class Reconciliation:
    true_up: Decimal  # to add to the ledger so spend is at least what was billed
    drifting: bool  # more than DRIFT_SHARE and more than DRIFT_FLOOR_USD apart


def metered_within(slices: Iterable[Slice], start: datetime, end: datetime) -> Decimal:
    """What the meter charged between `start` and `end`, slices prorated at the edges."""
    total = ZERO
    for piece in slices:
        overlap = (min(piece.end, end) - max(piece.start, start)).total_seconds()
        length = (piece.end - piece.start).total_seconds()
        if overlap <= 0:
            continue
        total += piece.amount if overlap >= length else piece.amount * Decimal(overlap / length)
    return usd(total)


def reconcile(metered: Decimal, trued_up: Decimal, billed: Decimal) -> Reconciliation:
    """Compare what was metered and billed over one window; `trued_up` was booked already."""
    true_up = usd(max(ZERO, billed - metered - trued_up))
    apart = abs(billed - metered)
    drifting = apart > DRIFT_FLOOR_USD and apart > DRIFT_SHARE * max(billed, metered)
    return Reconciliation(true_up, drifting)
