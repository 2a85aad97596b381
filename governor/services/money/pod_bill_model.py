"""A pod's bill as its provider last gave it, measured from the first bill read after the
pod was registered (billing.py keeps both)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from governor.db.tables import PodRow


@dataclass(frozen=True)
class PodBill:
    """The pod's bill as its provider last gave it: what it billed since the pod's
    registration (for a bill read a window at a time, over that window) and the instant the
    bill runs to; both None while no bill was read (or the provider gives none)."""

    billed: Decimal | None
    through: datetime | None = field(metadata={"api": "billed_through"})


def bill_of(pod: PodRow) -> PodBill:
    if pod.billed_usd is None or pod.billed_baseline_usd is None:
        return PodBill(None, None)
    return PodBill(pod.billed_usd - pod.billed_baseline_usd, pod.billed_through)
