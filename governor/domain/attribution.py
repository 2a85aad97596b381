"""Which phase of a run each dollar went to: ledger charges split over the phase history.

A pod's charge for a period is split in proportion to the time the pod's run spent in
each phase during it. Storage billed after the pod stopped is its own bucket; time with
no run, or before the job said which phase it is in, is `unphased`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from itertools import pairwise

from governor.domain.ledger import Charge
from governor.domain.model import Phase
from governor.domain.money import ZERO, usd

STOPPED_STORAGE = "stopped_storage"
UNPHASED = "unphased"
BUCKETS = (*(p.value for p in Phase), STOPPED_STORAGE, UNPHASED)


@dataclass(frozen=True)
class PhaseSpan:
    phase: Phase
    start: datetime
    end: datetime | None  # None: the run is still in it

    def covers(self, instant: datetime) -> bool:
        return self.start <= instant and (self.end is None or instant < self.end)


def spans_of(
    changes: Sequence[tuple[datetime, Phase]], ended_at: datetime | None
) -> list[PhaseSpan]:
    """A run's phase history as spans: each phase lasts until the next, the last until the end."""
    ordered = sorted(changes, key=lambda c: c[0])
    ends: list[datetime | None] = [*(at for at, _ in ordered[1:]), ended_at] if ordered else []
    return [PhaseSpan(phase, at, end) for (at, phase), end in zip(ordered, ends, strict=True)]


def phase_at(spans: Sequence[PhaseSpan], instant: datetime) -> str:
    """The pod's phase at `instant`: the most recent phase any of its runs was in."""
    current = [s for s in spans if s.covers(instant)]
    return max(current, key=lambda s: s.start).phase.value if current else UNPHASED


def attribute(
    charges: Iterable[Charge], spans: Sequence[PhaseSpan], stopped_at: datetime | None
) -> dict[str, Decimal]:
    """Every charge of one pod, split by phase. The parts add up to the charges, exactly."""
    totals = dict.fromkeys(BUCKETS, ZERO)
    for charge in charges:
        for bucket, amount in _split(charge, spans, stopped_at).items():
            totals[bucket] += amount
    return totals


def _split(
    charge: Charge, spans: Sequence[PhaseSpan], stopped_at: datetime | None
) -> dict[str, Decimal]:
    if stopped_at is not None and charge.start >= stopped_at:
        return {STOPPED_STORAGE: charge.amount}
    edges = {charge.start, charge.end}
    for span in spans:
        edges |= {
            t for t in (span.start, span.end) if t is not None and charge.start < t < charge.end
        }
    seconds: dict[str, float] = {}
    for start, end in pairwise(sorted(edges)):
        bucket = phase_at(spans, start)
        seconds[bucket] = seconds.get(bucket, 0.0) + (end - start).total_seconds()
    total = sum(seconds.values())
    if total <= 0:
        return {phase_at(spans, charge.start): charge.amount}
    parts = {b: usd(charge.amount * Decimal(s / total)) for b, s in seconds.items()}
    largest = max(parts, key=lambda b: seconds[b])
    parts[largest] += charge.amount - sum(parts.values(), ZERO)
    return parts
