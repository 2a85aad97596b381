"""Metering and the budget's figures: pure folds over pods, ledger totals and the clock."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from decimal import ROUND_FLOOR, Decimal
from functools import lru_cache
from typing import Any

from governor.domain.model import ChargeKind, PodState
from governor.domain.money import (
    CENT,
    SECONDS_PER_HOUR,
    ZERO,
    charge,
    dollars,
    per_hour_from_month,
    usd,
)

_RATES = ("compute_per_hour", "storage_per_hour", "stopped_storage_per_hour", "burn_per_hour")


@lru_cache(maxsize=1024)
def _rates(
    state: PodState,
    hourly_rate: Decimal,
    storage_gb: Decimal,
    storage_usd_per_gb_month: Decimal,
    stopped_storage_usd_per_gb_month: Decimal,
) -> tuple[Decimal, Decimal, Decimal, Decimal]:
    """A meter's hourly rates (`_RATES`), remembered: a fleet's pods share a handful of them."""
    if state is PodState.GONE:
        stopped_storage = storage = ZERO
    else:
        stopped_storage = per_hour_from_month(stopped_storage_usd_per_gb_month, storage_gb)
        storage = (
            per_hour_from_month(storage_usd_per_gb_month, storage_gb)
            if state.bills_compute
            else stopped_storage
        )
    compute = hourly_rate if state.bills_compute else ZERO
    return compute, storage, stopped_storage, compute + storage


@dataclass(frozen=True)
class PodMeter:
    """What one pod costs per hour in its current state, and how far it has been charged.

    Its rates are worked out when the meter is made, however many figures read them, and
    remembered for the next meter with the same state, rates and storage (`_rates`)."""

    state: PodState
    hourly_rate: Decimal
    storage_gb: Decimal
    storage_usd_per_gb_month: Decimal
    stopped_storage_usd_per_gb_month: Decimal
    accrued_until: datetime
    stop_latency_s: float
    compute_per_hour: Decimal = field(init=False)
    storage_per_hour: Decimal = field(init=False)
    stopped_storage_per_hour: Decimal = field(init=False)
    burn_per_hour: Decimal = field(init=False)

    def __post_init__(self) -> None:
        rates = _rates(
            self.state,
            self.hourly_rate,
            self.storage_gb,
            self.storage_usd_per_gb_month,
            self.stopped_storage_usd_per_gb_month,
        )
        for name, rate in zip(_RATES, rates, strict=True):
            object.__setattr__(self, name, rate)  # frozen: set once, here

    @property
    def bills_compute(self) -> bool:
        return self.state.bills_compute


@dataclass(frozen=True)
class Charge:
    kind: ChargeKind
    amount: Decimal
    start: datetime
    end: datetime


SLICE = timedelta(hours=1)


def slice_start(instant: datetime) -> datetime:
    """The start of the ledger slice holding `instant`: slices are whole UTC hours."""
    return instant.replace(minute=0, second=0, microsecond=0)


def slices(start: datetime, end: datetime) -> list[tuple[datetime, datetime]]:
    """[start, end) cut at every UTC hour, so no ledger entry spans two hours (or two days)."""
    cuts = []
    while start < end:
        cut = min(end, slice_start(start) + SLICE)
        cuts.append((start, cut))
        start = cut
    return cuts


def accrue(meter: PodMeter, now: datetime) -> list[Charge]:
    """The charges from the last accrued instant to now (downtime included), at current rates,
    one per charge kind and UTC hour."""
    return [Charge(*charged) for charged in _charges(meter, now)]


def unaccrued(meter: PodMeter, now: datetime) -> Decimal:
    """What `accrue` would charge now, summed."""
    return sum((amount for _kind, amount, _start, _end in _charges(meter, now)), ZERO)


def _charges(
    meter: PodMeter, now: datetime
) -> Iterator[tuple[ChargeKind, Decimal, datetime, datetime]]:
    rates = (
        (ChargeKind.COMPUTE, meter.compute_per_hour),
        (ChargeKind.STORAGE, meter.storage_per_hour),
    )
    for start, end in slices(meter.accrued_until, now):
        seconds = (end - start).total_seconds()
        for kind, rate in rates:
            amount = charge(rate, seconds)
            if amount > 0:
                yield kind, amount, start, end


@dataclass(frozen=True)
class BudgetTerms:
    ceiling: Decimal
    approved_extensions: Decimal
    reserve: Decimal
    storage_tail_hours: Decimal
    recorded: Decimal = ZERO  # what the budget's ledger holds, every pod's entries together

    @property
    def effective_ceiling(self) -> Decimal:
        return self.ceiling + self.approved_extensions


@dataclass(frozen=True)
class PodPosition:
    """One pod that may still cost money, as the budget sees it: its meter and the job's grace."""

    meter: PodMeter
    checkpoint_grace_s: float


# What each part of committed spend is, said once for every read model that shows it.
SHUTDOWN_DOC = (
    "what stopping the pods that bill compute will still cost: their burn over the checkpoint "
    "grace, the provider's stop latency and the governor's reaction time"
)
STORAGE_TAIL_DOC = "what every pod's storage costs, stopped, over the budget's storage tail hours"
RESERVE_DOC = "the budget's reserve, held back for work after the stop"
COMMITTED_DOC = (
    "spent + shutdown + storage tail + reserve: the budget stops when it reaches the effective "
    "ceiling"
)


@dataclass(frozen=True)
class Figures:
    """A budget's money as of one instant. Committed spend is made of four parts (`figures`):
    what is spent, what stopping the pods that bill compute will still cost (`shutdown`), the
    storage tail of every pod, and the budget's reserve."""

    spent: Decimal
    shutdown: Decimal
    storage_tail: Decimal
    reserve: Decimal
    effective_ceiling: Decimal
    burn_per_hour: Decimal
    projected_exhaustion_at: datetime | None

    @property
    def committed(self) -> Decimal:
        return self.spent + self.shutdown + self.storage_tail + self.reserve

    @property
    def extension_to_go_on(self) -> Decimal:
        """The least extension, in whole cents, that reopens a budget at its ceiling: one that
        puts the ceiling above committed spend, and at least a cent (a stopped budget whose
        stop margin was released is below its ceiling already)."""
        short = self.committed - self.effective_ceiling
        return max(CENT, (short + CENT).quantize(CENT, rounding=ROUND_FLOOR))

    @property
    def remaining(self) -> Decimal:
        return self.effective_ceiling - self.committed

    @property
    def spent_fraction(self) -> Decimal:
        return self.spent / self.effective_ceiling

    @property
    def committed_fraction(self) -> Decimal:
        return self.committed / self.effective_ceiling

    def seconds_to_ceiling(self) -> float | None:
        """How long until committed spend reaches the ceiling at the current burn."""
        if self.burn_per_hour <= 0:
            return None
        return float(max(ZERO, self.remaining) / self.burn_per_hour * SECONDS_PER_HOUR)


def figures_of(kept: Any) -> Figures | None:
    """The figures the latest enforcement pass kept on a budget: read from its columns (a
    budget's row, or a row with those columns: `figures_spent_usd`, `figures_shutdown_usd`,
    `figures_storage_tail_usd`, `reserve_usd`, `figures_ceiling_usd`,
    `figures_burn_usd_per_hour`), or None before any pass."""
    values = (
        kept.figures_spent_usd,
        kept.figures_shutdown_usd,
        kept.figures_storage_tail_usd,
        kept.reserve_usd,
        kept.figures_ceiling_usd,
        kept.figures_burn_usd_per_hour,
    )
    if any(v is None for v in values):
        return None
    return Figures(*values, projected_exhaustion_at=None)


def committed_in_parts(f: Figures) -> str:
    """Committed spend with what it is made of, for people: "$52.10 committed (spent $2.10 +
    shutdown $0.50 + storage tail $0.00 + reserve $49.50)"."""
    return (
        f"{dollars(f.committed)} committed (spent {dollars(f.spent)} + shutdown "
        f"{dollars(f.shutdown)} + storage tail {dollars(f.storage_tail)} + reserve "
        f"{dollars(f.reserve)})"
    )


def shutdown_cost(position: PodPosition, reaction_s: float) -> Decimal:
    """What a pod will still cost between deciding to stop it and the provider confirming."""
    seconds = position.checkpoint_grace_s + position.meter.stop_latency_s + reaction_s
    return charge(position.meter.burn_per_hour, seconds)


def storage_tail(meter: PodMeter, tail_hours: Decimal) -> Decimal:
    return usd(meter.stopped_storage_per_hour * tail_hours)


def figures(
    terms: BudgetTerms,
    positions: Sequence[PodPosition],
    now: datetime,
    reaction_s: float,
) -> Figures:
    """Spent, committed and the rest, as of `now`.

    spent     = what the ledger holds + what every pod has cost since it was last accrued
    committed = spent + shutdown + storage tail + reserve, where
    shutdown  = burn x (checkpoint grace + stop latency + reaction time) of every pod
                that bills compute
    storage tail = stopped storage x the budget's storage tail hours, of every pod
    """
    spent = terms.recorded + _total(unaccrued(p.meter, now) for p in positions)
    shutdown = _total(shutdown_cost(p, reaction_s) for p in positions if p.meter.bills_compute)
    tail = _total(storage_tail(p.meter, terms.storage_tail_hours) for p in positions)
    burn = _total(p.meter.burn_per_hour for p in positions)
    result = Figures(spent, shutdown, tail, terms.reserve, terms.effective_ceiling, burn, None)
    seconds = result.seconds_to_ceiling()
    exhaustion = None if seconds is None else now + timedelta(seconds=seconds)
    return replace(result, projected_exhaustion_at=exhaustion)


def forecast_at_completion(
    figures_now: Figures, steps_left: int, steps_per_s: float
) -> Decimal | None:
    """Projected committed spend when the run reaches its last step at the observed pace."""
    if steps_per_s <= 0:
        return None
    hours_left = Decimal(str(steps_left / steps_per_s)) / SECONDS_PER_HOUR
    return usd(figures_now.committed + figures_now.burn_per_hour * hours_left)


def _total(amounts: Iterable[Decimal]) -> Decimal:
    return sum(amounts, ZERO)
