"""Reconciling the meter with the provider's own bill: true-ups and drift.

Providers that say what they have billed are asked every billing interval about every pod
of a budget that had a pod running within the billing lag window, whatever the budget's
state, so the bill that lands after a budget is exhausted or closed is still reconciled.
Those that say it for a whole account are read once for all their pods, and a bill that
runs no later than the one already booked for a pod is passed over without a transaction.
A provider that says what it billed so far (ReportsBilling) is compared from a baseline:
the first figure that covers the pod's registration; from then on the billed difference is
compared with what the meter charged over the same window. A provider read a window at a
time (ReportsWindowedBilling: the big clouds' lagging bills) is asked from the pod's
registration on, and its window is compared with what the meter charged over that window.
When the provider billed more, a true-up entry brings spend up to it; when the two disagree
by more than 5% either way, a drift event says so once (and again when they agree again).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.engine import read_only, unit_of_work
from governor.db.tables import PodRow
from governor.domain.billing import Slice, metered_within, reconcile
from governor.domain.ledger import PodMeter, accrue
from governor.domain.model import Category, ChargeKind, EntryKind, Severity
from governor.domain.money import ZERO, dollars, format_usd
from governor.domain.ports import Billed, ProviderError, ReportsBilling, ReportsWindowedBilling
from governor.services import events
from governor.services.context import ServiceContext
from governor.services.money import metering
from governor.services.money.book import meter

log = logging.getLogger(__name__)
BILLING_PORTS = (ReportsBilling, ReportsWindowedBilling)


@dataclass(frozen=True)
class _Asked:
    """A pod whose bill may still change, as the billing task asks its provider about it."""

    pod_id: str
    budget_id: str
    provider: str
    ref: str
    created_at: datetime
    read_through: datetime | None  # where the bill booked for it ends; None: none yet


def reconcile_all(ctx: ServiceContext) -> int:
    """Ask every billing provider about its pods whose bill may still change, reading each
    account's bill once for all of them; returns how many pods it answered for."""
    billing = [name for name, p in ctx.providers.items() if isinstance(p, BILLING_PORTS)]
    if not billing:
        return 0
    now = ctx.clock.now()
    since = now - timedelta(seconds=ctx.config.billing_lag_window_s)
    with read_only(ctx.sessions) as session:
        pods = [_Asked(*row) for row in repo.pods_to_reconcile(session, since, billing)]
    answers = [*_account_bills(ctx, pods), *_windowed_bills(ctx, pods, now)]
    news = sorted(
        # a bill no later than the one already booked has nothing to take in
        (a for a in answers if a[0].read_through is None or a[1].through > a[0].read_through),
        key=lambda answer: answer[0].budget_id,
    )
    size = ctx.pods_per_transaction
    for chunk in (news[i : i + size] for i in range(0, len(news), size)):
        with unit_of_work(ctx.sessions) as session:
            repo.lock_budgets(session, sorted({pod.budget_id for pod, _ in chunk}))
            rows = repo.pods_by_id(session, [pod.pod_id for pod, _ in chunk])
            bills = [(rows[pod.pod_id], billed) for pod, billed in chunk]
            _take_in(session, bills, ctx.clock.now())
    return len(answers)


def _account_bills(ctx: ServiceContext, pods: list[_Asked]) -> Iterator[tuple[_Asked, Billed]]:
    """Each ReportsBilling provider's bill, one read for all of its pods."""
    by_provider: dict[str, list[_Asked]] = {}
    for pod in pods:
        by_provider.setdefault(pod.provider, []).append(pod)
    for name, asked in by_provider.items():
        provider = ctx.providers.get(name)
        if not isinstance(provider, ReportsBilling):
            continue
        since: dict[str, datetime] = {}  # each pod's bill counts from its registration
        for pod in asked:
            since[pod.ref] = min(pod.created_at, since.get(pod.ref, pod.created_at))
        try:
            bills = provider.billed(since)
        except ProviderError as exc:
            log.warning("could not read what %s billed for %d pods: %s", name, len(asked), exc)
            continue
        yield from ((pod, bills[pod.ref]) for pod in asked)


def _windowed_bills(
    ctx: ServiceContext, pods: list[_Asked], now: datetime
) -> Iterator[tuple[_Asked, Billed]]:
    """Each ReportsWindowedBilling provider's bill, a window for each pod that has news."""
    windowed = {n: p for n, p in ctx.providers.items() if isinstance(p, ReportsWindowedBilling)}
    for pod in pods:
        provider = windowed.get(pod.provider)  # a protocol check a pod would cost 15 µs
        if provider is None:
            continue
        try:
            billed = provider.billed_since(pod.ref, pod.created_at, now, pod.read_through)
        except ProviderError as exc:
            log.warning("could not read what %s billed for %s: %s", pod.provider, pod.ref, exc)
            continue
        if billed is not None:  # None: nothing new to read yet
            yield pod, billed


def book_billed(session: Session, pod_id: str, billed: Billed, now: datetime) -> None:
    """Take in one billed figure for a pod, under its budget's lock."""
    pod = repo.get_pod(session, pod_id)
    repo.lock_budgets(session, [pod.budget_id])
    session.refresh(pod)
    _take_in(session, [(pod, billed)], now)


@dataclass(frozen=True)
class _Compared:
    """What a billed figure is compared with the meter over."""

    start: datetime
    through: datetime
    billed_delta: Decimal  # what the provider billed over [start, through]


def _take_in(session: Session, bills: Sequence[tuple[PodRow, Billed]], now: datetime) -> None:
    """Billed figures for pods read under their budgets' lock: baseline, true-up, drift. Their
    ledger entries are read in two statements for all of them."""
    compared = [(pod, billed, _compared(pod, billed, now)) for pod, billed in bills]
    due = [(pod, billed, c) for pod, billed, c in compared if c is not None]
    over = repo.entries_over(session, [(pod.id, c.start, c.through) for pod, _, c in due])
    for pod, billed, c in due:
        metered = _within(over, pod, EntryKind.ACCRUAL, c, meter(pod))
        trued_up = _within(over, pod, EntryKind.TRUE_UP, c)
        _settle(session, pod, billed, c, metered, trued_up, now)


def _compared(pod: PodRow, billed: Billed, now: datetime) -> _Compared | None:
    """What `billed` is to be compared over; None when it has nothing to compare (a first
    figure that covers the pod's registration is its baseline, taken here)."""
    through = min(billed.through, now)
    if billed.since is not None:  # a window of the bill: compared over that window
        start, billed_delta = max(billed.since, pod.created_at), billed.amount_usd
        if through <= start:
            return None
    elif pod.billed_baseline_through is None or pod.billed_baseline_usd is None:
        if through >= pod.created_at:  # a figure from before registration covers other spend
            pod.billed_baseline_usd, pod.billed_baseline_through = billed.amount_usd, through
            pod.billed_usd, pod.billed_through = billed.amount_usd, through
        return None
    else:
        start = pod.billed_baseline_through
        billed_delta = billed.amount_usd - pod.billed_baseline_usd
    if pod.billed_through is not None and through <= pod.billed_through:
        return None
    return _Compared(start, through, billed_delta)


def _settle(
    session: Session,
    pod: PodRow,
    billed: Billed,
    c: _Compared,
    metered: Decimal,
    trued_up: Decimal,
    now: datetime,
) -> None:
    result = reconcile(metered, trued_up, c.billed_delta)
    if billed.since is not None:  # what the pod's view shows: this window of the bill
        pod.billed_baseline_usd, pod.billed_baseline_through = ZERO, c.start
    if result.true_up > ZERO:
        metering.post(
            session,
            pod,
            EntryKind.TRUE_UP,
            ChargeKind.COMPUTE,
            result.true_up,
            (max(pod.billed_through or c.start, c.start), c.through),
            now,
            note=f"billed {format_usd(c.billed_delta)} vs metered {format_usd(metered)}",
        )
    if result.drifting != pod.billing_drift:
        _drift_changed(session, pod, metered, c.billed_delta, result.drifting, now)
    pod.billed_usd, pod.billed_through = billed.amount_usd, c.through


def _within(
    over: repo.EntriesOver,
    pod: PodRow,
    kind: EntryKind,
    c: _Compared,
    unwritten: PodMeter | None = None,
) -> Decimal:
    """What the pod's entries of `kind` charged over the compared stretch (those wholly
    inside summed, those at its edges prorated); with its meter (`unwritten`), also what it
    has cost since its last entry, which is not written here: the hour's entry is the accrue
    pass's, and a bill read every few minutes must not cut the ledger every few minutes."""
    edges = over.edges.get(pod.id, [])
    slices = [Slice(e.amount_usd, e.period_start, e.period_end) for e in edges if e.kind is kind]
    if unwritten is not None:
        charges = accrue(unwritten, c.through)
        slices += [Slice(charge.amount, charge.start, charge.end) for charge in charges]
    inside = over.sums.get((pod.id, kind), ZERO)
    return inside + metered_within(slices, c.start, c.through)


def _drift_changed(
    session: Session,
    pod: PodRow,
    metered: Decimal,
    billed: Decimal,
    drifting: bool,
    now: datetime,
) -> None:
    pod.billing_drift = drifting
    if drifting:
        message = (
            f"{pod.provider} billed {dollars(billed)} for this pod where the governor metered "
            f"{dollars(metered)}: more than 5% apart. Spend counts the larger; check the pod's "
            "rate and storage."
        )
    else:
        message = f"Metered and billed agree again ({dollars(metered)} vs {dollars(billed)})."
    events.record(
        session,
        now,
        Severity.WARNING if drifting else Severity.INFO,
        Category.PROVIDER,
        f"pod:{pod.id}",
        message,
        budget_id=pod.budget_id,
        evidence={
            "metered_usd": format_usd(metered),
            "billed_usd": format_usd(billed),
            "window_start": pod.billed_baseline_through.isoformat()
            if pod.billed_baseline_through
            else None,
        },
        routine=True,  # a drift is a warning, kept; agreeing again is an observation
    )
