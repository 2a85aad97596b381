"""The run record of a budget: what was spent, on which pod and in which phase, every decision
with its evidence, why and when each stop happened, failures by category (a training-health
finding is a model failure), extensions, each run's last metric values, and the measured
memory peaks next to the preflight verdicts, and what each admitted plan reserved against what
it actually spent. A negative result stays useful.

Spend by phase splits every ledger accrual (and what has accrued since the last one) over
the phase history of the pod's runs; true-ups and adjustments are shown as themselves. The
parts add up to the budget's spent figure exactly.

A report lists at most `report_timeline_events` events in its timeline (the latest), and only
the latest few (FAILURES_LISTED) in each failure category, whose events the timeline lists
too; it says how many it left out and where to page through them. Its figures (spend, failure
counts) always count everything. What a report holds is bounded by those numbers of events.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from sqlalchemy import select
from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.tables import (
    EventRow,
    ExtensionRow,
    GpuPeakRow,
    LedgerEntryRow,
    PlanCheckRow,
    PodRow,
    RunMetricRow,
    RunPhaseRow,
    RunRow,
    StopOrderRow,
)
from governor.domain.attribution import BUCKETS, PhaseSpan, attribute, spans_of
from governor.domain.ledger import Charge, accrue
from governor.domain.model import Category, EntryKind, Phase, Severity
from governor.domain.money import ZERO
from governor.domain.paging import PageRequest
from governor.services.context import GovernorConfig
from governor.services.money.book import Book, meter, open_book
from governor.services.money.pod_bill_model import PodBill, bill_of
from governor.services.monitoring import metric_history
from governor.services.view.dashboard_model import PlanLine
from governor.services.view.status import admitted_plans

SPEND_LINES = (*BUCKETS, EntryKind.TRUE_UP.value, EntryKind.ADJUSTMENT.value)
FAILURE_CATEGORIES = (Category.HARNESS, Category.MODEL, Category.PROVIDER)
FAILURES_LISTED = 10  # each failure category: its count, and the latest so many events


@dataclass(frozen=True)
class PodSpend:
    pod: PodRow
    spent: Decimal
    by_phase: dict[str, Decimal]  # every line of SPEND_LINES
    bill: PodBill


@dataclass(frozen=True)
class Stop:
    order: StopOrderRow
    why: str | None  # the message of the decision that ordered it


@dataclass(frozen=True)
class Peak:
    run: RunRow
    peak: GpuPeakRow


@dataclass(frozen=True)
class Listed:
    """Events as a report lists them: the latest, oldest first, and those it leaves out."""

    events: list[EventRow]
    left_out: int  # the earlier events not listed
    occurrences: int  # of all of them, listed or not, those folded into them included
    earlier: str | None  # the API call that pages through those left out

    @property
    def total(self) -> int:
        return len(self.events) + self.left_out

    @property
    def note(self) -> str | None:
        """What a reader is told when some are left out."""
        if not self.left_out:
            return None
        return (
            f"The latest {len(self.events)} of {self.total} events are listed; the "
            f"{self.left_out} earlier ones are left out. GET {self.earlier} pages through them."
        )


@dataclass(frozen=True)
class Report:
    book: Book
    spend: list[PodSpend]
    timeline: Listed  # the budget's events
    stops: list[Stop]
    failures: dict[Category, Listed]  # warning and critical, per failure category
    extensions: Sequence[ExtensionRow]
    metrics: dict[str, list[RunMetricRow]]  # per run: the last point of each metric, by name
    peaks: list[Peak]
    plans: Sequence[PlanCheckRow]  # every verdict given, oldest first
    admitted: tuple[PlanLine, ...]  # the admitted plans: reserved vs actually spent

    @property
    def pods(self) -> dict[str, PodRow]:
        """The budget's pods by id: its runs and its stops name theirs."""
        return {pod.id: pod for pod in self.book.pods}

    @property
    def by_phase(self) -> dict[str, Decimal]:
        totals = dict.fromkeys(SPEND_LINES, ZERO)
        for pod in self.spend:
            for line, amount in pod.by_phase.items():
                totals[line] += amount
        return totals


def build(session: Session, config: GovernorConfig, budget_id: str, now: datetime) -> Report:
    book = open_book(session, budget_id, now, config)
    cap = config.report_timeline_events
    few = min(cap, FAILURES_LISTED)
    return Report(
        book=book,
        spend=_spend(session, book),
        timeline=_listed(session, cap, budget_id=budget_id),
        stops=_stops(session, budget_id),
        failures={
            c: _listed(session, few, budget_id=budget_id, category=c, min_severity=Severity.WARNING)
            for c in FAILURE_CATEGORIES
        },
        extensions=repo.extensions(session, budget_id=budget_id),
        metrics=metric_history.latest(session, [r.id for r in book.runs]),
        peaks=_peaks(session, book.runs),
        plans=repo.plan_checks_of(session, budget_id),
        admitted=admitted_plans(session, book),
    )


def _spend(session: Session, book: Book) -> list[PodSpend]:
    entries: dict[str, list[LedgerEntryRow]] = defaultdict(list)
    for entry in session.scalars(
        select(LedgerEntryRow)
        .where(LedgerEntryRow.budget_id == book.budget.id)
        .order_by(LedgerEntryRow.id)
    ):
        entries[entry.pod_id].append(entry)
    spans = _phase_spans(session, book.runs)
    result = []
    for pod in book.pods:
        charges = [
            Charge(e.charge, e.amount_usd, e.period_start, e.period_end)
            for e in entries[pod.id]
            if e.kind is EntryKind.ACCRUAL
        ]
        charges += accrue(meter(pod), book.now)  # what the next accrual will book
        pod_spans = [s for run in book.runs_on(pod.id) for s in spans[run.id]]
        by_phase = dict.fromkeys(SPEND_LINES, ZERO)
        by_phase.update(attribute(charges, pod_spans, pod.stopped_at))
        for entry in entries[pod.id]:
            if entry.kind is not EntryKind.ACCRUAL:
                by_phase[entry.kind.value] += entry.amount_usd
        result.append(PodSpend(pod, book.spent_on(pod), by_phase, bill_of(pod)))
    return result


def _phase_spans(session: Session, runs: Sequence[RunRow]) -> dict[str, list[PhaseSpan]]:
    changes: dict[str, list[tuple[datetime, Phase]]] = defaultdict(list)
    if runs:
        for row in session.scalars(
            select(RunPhaseRow).where(RunPhaseRow.run_id.in_([r.id for r in runs]))
        ):
            changes[row.run_id].append((row.at, row.phase))
    return {r.id: spans_of(changes[r.id], r.ended_at) for r in runs}


def _listed(session: Session, cap: int, **narrowed: Any) -> Listed:
    """The latest `cap` events so narrowed, and how to read the rest over the API."""
    latest = repo.events_page(session, PageRequest(limit=cap), **narrowed)
    rows, occurrences = repo.event_tally(session, **narrowed)
    earlier = None
    if latest.next_cursor is not None:
        query = {k: getattr(v, "value", v) for k, v in narrowed.items()}
        earlier = f"/v1/events?{urlencode({**query, 'cursor': latest.next_cursor})}"
    shown = latest.items[::-1]
    return Listed(shown, max(rows - len(shown), 0), occurrences, earlier)


def _stops(session: Session, budget_id: str) -> list[Stop]:
    """The budget's stop orders, each with the decision that ordered it: the first event
    recorded at the order's instant that names it."""
    orders = session.scalars(
        select(StopOrderRow)
        .where(StopOrderRow.budget_id == budget_id)
        .order_by(StopOrderRow.created_at)
    ).all()
    stops = []
    for order in orders:
        recorded = session.scalars(
            select(EventRow)
            .where(EventRow.budget_id == budget_id, EventRow.at == order.created_at)
            .order_by(EventRow.id)
        )
        why = next((e.message for e in recorded if e.evidence.get("stop_order") == order.id), None)
        stops.append(Stop(order, why))
    return stops


def _peaks(session: Session, runs: Sequence[RunRow]) -> list[Peak]:
    peaks = repo.peaks_of(session, [r.id for r in runs])
    return [Peak(run, p) for run in runs for p in peaks if p.run_id == run.id]
