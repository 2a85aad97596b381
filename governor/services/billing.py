"""Reconciling the meter with the provider's own bill: true-ups and drift.

Providers that say what they have billed (ReportsBilling) are asked every billing interval.
The first figure that covers the pod's registration is the baseline; from then on the
billed difference is compared with what the meter charged over the same window. When the
provider billed more, a true-up entry brings spend up to it; when the two disagree by more
than 5% either way, a drift event says so once (and again when they agree again).
"""

from __future__ import annotations

import logging
from datetime import datetime
from decimal import Decimal

from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.engine import unit_of_work
from governor.db.tables import PodRow
from governor.domain.billing import Slice, metered_within, reconcile
from governor.domain.model import Category, ChargeKind, EntryKind, Severity
from governor.domain.money import ZERO, dollars, format_usd
from governor.domain.ports import Billed, ProviderError, ReportsBilling
from governor.services import events, metering
from governor.services.context import ServiceContext

log = logging.getLogger(__name__)


def reconcile_all(ctx: ServiceContext) -> int:
    """Ask every billing provider about each of its pods; returns how many answered."""
    with unit_of_work(ctx.sessions) as session:
        pods = [(p.id, p.provider, p.provider_ref) for p in repo.pods_not_gone(session)]
    answered = 0
    for pod_id, name, ref in pods:
        provider = ctx.providers.get(name)
        if not isinstance(provider, ReportsBilling):
            continue
        try:
            billed = provider.billed(ref)
        except ProviderError as exc:
            log.warning("could not read what %s billed for %s: %s", name, ref, exc)
            continue
        with unit_of_work(ctx.sessions) as session:
            book_billed(session, pod_id, billed, ctx.clock.now())
        answered += 1
    return answered


def book_billed(session: Session, pod_id: str, billed: Billed, now: datetime) -> None:
    """Take in one billed figure for a pod: baseline, true-up and drift, under the budget lock."""
    pod = repo.get_pod(session, pod_id)
    repo.get_budget(session, pod.budget_id, lock=True)
    session.refresh(pod)
    through = min(billed.through, now)
    if pod.billed_baseline_through is None or pod.billed_baseline_usd is None:
        if through >= pod.created_at:  # a figure from before registration covers other spend
            pod.billed_baseline_usd, pod.billed_baseline_through = billed.amount_usd, through
            pod.billed_usd, pod.billed_through = billed.amount_usd, through
        return
    if pod.billed_through is not None and through <= pod.billed_through:
        return
    metering.accrue_pod(session, pod, now)  # the meter must cover the window before it is compared
    start = pod.billed_baseline_through
    slices = [
        Slice(e.amount_usd, e.period_start, e.period_end)
        for e in repo.pod_entries(session, pod.id, EntryKind.ACCRUAL, start, through)
    ]
    metered = metered_within(slices, start, through)
    billed_delta = billed.amount_usd - pod.billed_baseline_usd
    result = reconcile(metered, repo.pod_total(session, pod.id, EntryKind.TRUE_UP), billed_delta)
    if result.true_up > ZERO:
        metering.post(
            session,
            pod,
            EntryKind.TRUE_UP,
            ChargeKind.COMPUTE,
            result.true_up,
            (pod.billed_through or start, through),
            now,
            note=f"billed {format_usd(billed_delta)} vs metered {format_usd(metered)}",
        )
    if result.drifting != pod.billing_drift:
        _drift_changed(session, pod, metered, billed_delta, result.drifting, now)
    pod.billed_usd, pod.billed_through = billed.amount_usd, through


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
