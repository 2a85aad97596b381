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
from governor.db.tables import LedgerEntryRow, PodRow
from governor.domain.billing import Slice, metered_within, reconcile
from governor.domain.ledger import PodMeter, accrue
from governor.domain.model import Category, ChargeKind, EntryKind, Severity
from governor.domain.money import ZERO, dollars, format_usd
from governor.domain.ports import Billed, ProviderError, ReportsBilling, ReportsWindowedBilling
from governor.services import events, metering
from governor.services.book import meter
from governor.services.context import ServiceContext

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
            now = ctx.clock.now()
            for pod, billed in chunk:
                _take_in(session, rows[pod.pod_id], billed, now)
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
        try:
            bills = provider.billed({pod.ref for pod in asked})
        except ProviderError as exc:
            log.warning("could not read what %s billed for %d pods: %s", name, len(asked), exc)
            continue
        yield from ((pod, bills[pod.ref]) for pod in asked)


def _windowed_bills(
    ctx: ServiceContext, pods: list[_Asked], now: datetime
) -> Iterator[tuple[_Asked, Billed]]:
    """Each ReportsWindowedBilling provider's bill, a window for each pod that has news."""
    for pod in pods:
        provider = ctx.providers.get(pod.provider)
        if not isinstance(provider, ReportsWindowedBilling):
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
    _take_in(session, pod, billed, now)


def _take_in(session: Session, pod: PodRow, billed: Billed, now: datetime) -> None:
    """One billed figure for a pod read under its budget's lock: baseline, true-up, drift."""
    through = min(billed.through, now)
    if billed.since is not None:  # a window of the bill: compared over that window
        start, billed_delta = max(billed.since, pod.created_at), billed.amount_usd
        if through <= start:
            return
    elif pod.billed_baseline_through is None or pod.billed_baseline_usd is None:
        if through >= pod.created_at:  # a figure from before registration covers other spend
            pod.billed_baseline_usd, pod.billed_baseline_through = billed.amount_usd, through
            pod.billed_usd, pod.billed_through = billed.amount_usd, through
        return
    else:
        start = pod.billed_baseline_through
        billed_delta = billed.amount_usd - pod.billed_baseline_usd
    if pod.billed_through is not None and through <= pod.billed_through:
        return
    sums, edges = repo.pod_entries_over(session, pod.id, start, through)
    metered = _within(sums, edges, EntryKind.ACCRUAL, start, through, meter(pod))
    trued_up = _within(sums, edges, EntryKind.TRUE_UP, start, through)
    result = reconcile(metered, trued_up, billed_delta)
    if billed.since is not None:  # what the pod's view shows: this window of the bill
        pod.billed_baseline_usd, pod.billed_baseline_through = ZERO, start
    if result.true_up > ZERO:
        metering.post(
            session,
            pod,
            EntryKind.TRUE_UP,
            ChargeKind.COMPUTE,
            result.true_up,
            (max(pod.billed_through or start, start), through),
            now,
            note=f"billed {format_usd(billed_delta)} vs metered {format_usd(metered)}",
        )
    if result.drifting != pod.billing_drift:
        _drift_changed(session, pod, metered, billed_delta, result.drifting, now)
    pod.billed_usd, pod.billed_through = billed.amount_usd, through


def _within(
    sums: dict[EntryKind, Decimal],
    edges: Sequence[LedgerEntryRow],
    kind: EntryKind,
    start: datetime,
    end: datetime,
    unwritten: PodMeter | None = None,
) -> Decimal:
    """What a pod's entries of `kind` charged between `start` and `end` (those wholly inside
    summed, those at the edges prorated); with its meter (`unwritten`), also what it has cost
    since its last entry, which is not written here: the hour's entry is the accrue pass's,
    and a bill read every few minutes must not cut the ledger every few minutes."""
    slices = [Slice(e.amount_usd, e.period_start, e.period_end) for e in edges if e.kind is kind]
    if unwritten is not None:
        slices += [Slice(c.amount, c.start, c.end) for c in accrue(unwritten, end)]
    return sums.get(kind, ZERO) + metered_within(slices, start, end)


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
    )
