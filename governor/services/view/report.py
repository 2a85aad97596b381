"""The run record of a budget: what was spent, on which pod and in which phase, every decision
with its evidence, why and when each stop happened, failures by category (a training-health
finding is a model failure), extensions, each run's last metric values, and the measured
memory peaks next to the preflight verdicts, and what each admitted plan holds back against
what it actually spent; the budget's committed spend with its parts. A negative result stays
useful.

Spend by phase splits every ledger accrual (and what has accrued since the last one) over
the phase history of the pod's runs; true-ups and adjustments are shown as themselves. The
parts add up to the budget's spent figure exactly.

A report lists at most `report_timeline_events` events in its timeline (the latest), and only
the latest few (FAILURES_LISTED) in each failure category, whose events the timeline lists
too; it says how many it left out and where to page through them. Its figures (spend, failure
counts) always count everything. What a report holds is bounded by those numbers of events.

A report is a read model made of read models (the budget, its runs, events, extensions, stop
orders, bills and admitted plans as the API gives them elsewhere): its JSON follows from it
field by field, and its HTML and Markdown read the same values.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from sqlalchemy import select
from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.tables import (
    EventRow,
    LedgerEntryRow,
    MeasuredFloorRow,
    PlanCheckRow,
    RunPhaseRow,
    RunRow,
    StopOrderRow,
)
from governor.domain.attribution import BUCKETS, PhaseSpan, attribute, spans_of
from governor.domain.ledger import Charge, accrue
from governor.domain.model import (
    Category,
    EntryKind,
    Phase,
    PodState,
    Reason,
    RunStatus,
    Severity,
)
from governor.domain.money import ZERO
from governor.domain.paging import PageRequest
from governor.domain.preflight.rules import Finding, Verdict
from governor.services import events
from governor.services.context import GovernorConfig
from governor.services.events import Event
from governor.services.fleet import budget_model
from governor.services.fleet.budget_model import Budget
from governor.services.fleet.loss_model import AcknowledgedLoss, acknowledged_loss
from governor.services.money import extension_model
from governor.services.money.book import Book, meter, open_book
from governor.services.money.extension_model import Extension
from governor.services.money.pod_bill_model import PodBill, bill_of
from governor.services.monitoring import metric_history
from governor.services.plans.plan_check_model import finding
from governor.services.runs import run_model
from governor.services.runs.run_model import Run
from governor.services.stopping.stop_order_model import StopOrder, stop_order
from governor.services.view.dashboard_model import PlanLine
from governor.services.view.status import admitted_plans

SPEND_LINES = (*BUCKETS, EntryKind.TRUE_UP.value, EntryKind.ADJUSTMENT.value)
FAILURE_CATEGORIES = (Category.HARNESS, Category.MODEL, Category.PROVIDER)
FAILURES_LISTED = 10  # each failure category: its count, and the latest so many events


@dataclass(frozen=True)
class PhaseSpend:
    phase: str  # a line of SPEND_LINES
    spent: Decimal


@dataclass(frozen=True)
class PodSpend:
    pod_id: str
    name: str
    provider: str
    provider_ref: str
    gpu_type: str | None
    gpu_count: int | None
    state: PodState
    hourly_rate: Decimal
    spent: Decimal
    by_phase: tuple[PhaseSpend, ...]  # every line of SPEND_LINES
    acknowledged_loss: AcknowledgedLoss | None = field(
        metadata={"doc": "what its stop loses, accepted in writing when it was registered"}
    )
    bill: PodBill = field(
        metadata={
            "doc": "what the provider last billed and the instant that bill runs to "
            "(null both: no bill read yet)"
        }
    )


@dataclass(frozen=True)
class Spend:
    spent: Decimal  # the budget's spent figure: its lines add up to it exactly
    by_phase: tuple[PhaseSpend, ...]  # every line of SPEND_LINES, over all the pods
    by_pod: tuple[PodSpend, ...]


@dataclass(frozen=True)
class Stop(StopOrder):
    why: str | None  # the message of the decision that ordered it
    asked: str | None = field(
        metadata={"doc": "an operator's stop: who asked for it and their written reason"}
    )


@dataclass(frozen=True)
class Failures:
    """A failure category's events as a report lists them: the latest, oldest first, and
    those it leaves out."""

    category: Category
    occurrences: int = field(
        metadata={"api": "count", "doc": "every occurrence, listed or not (folded ones included)"}
    )
    events: tuple[Event, ...] = field(metadata={"doc": "the latest 10 at most, oldest first"})
    left_out: int = field(
        metadata={"api": "events_left_out", "doc": "the earlier events not listed"}
    )
    earlier: str | None = field(
        metadata={"api": "earlier_events", "doc": "the API call that pages through them"}
    )

    @property
    def total(self) -> int:
        return len(self.events) + self.left_out

    @property
    def note(self) -> str | None:
        return left_out_note(len(self.events), self.left_out, self.earlier)


@dataclass(frozen=True)
class Metric:
    run_id: str
    run_name: str
    name: str
    value: float = field(metadata={"doc": "the last finite value (a minute's mean once folded)"})
    step: int
    at: datetime


@dataclass(frozen=True)
class Peak:
    run_id: str
    run_name: str
    gpu_uuid: str
    gpu_name: str
    peak_used_bytes: int
    memory_total_bytes: int | None
    at: datetime


@dataclass(frozen=True)
class MeasuredFloor:
    """A run's peak on one GPU in one phase, kept under its plan's configuration as a later
    plan's measured floor: a failed run's is the negative result, kept."""

    run_id: str
    run_name: str
    run_status: RunStatus
    out_of_memory: bool = field(metadata={"doc": "its job reported running out of memory"})
    gpu_uuid: str
    gpu_name: str
    phase: str
    peak_used_bytes: int
    model_id: str
    model_revision: str | None
    recipe: str = field(metadata={"doc": "the digest of the recipe's memory fields"})
    gpu_count: int
    at: datetime


@dataclass(frozen=True)
class PlanVerdict:
    """A verdict given on one of the budget's plans, as the report lists it."""

    id: str
    job_id: str
    verdict: Verdict
    gpu_type: str
    modeled_gib: float
    usable_gib: float
    worst_case: Decimal
    available: Decimal
    reasons: tuple[Finding, ...]
    created_at: datetime
    override_reason: str | None = field(metadata={"doc": "an operator let this no_go through"})
    withdrawn_at: datetime | None


@dataclass(frozen=True)
class Memory:
    peaks: tuple[Peak, ...]
    floors: tuple[MeasuredFloor, ...] = field(
        metadata={"doc": "each run's peak per GPU and phase, kept as a measured floor"}
    )
    plans: tuple[PlanVerdict, ...]  # every verdict given, oldest first
    admitted: tuple[PlanLine, ...] = field(
        metadata={
            "doc": "each admitted plan: its worst case, what it spent, what it still holds back"
        }
    )


@dataclass(frozen=True)
class Report:
    budget: Budget
    generated_at: datetime
    runs: tuple[Run, ...]
    metrics: tuple[Metric, ...] = field(
        metadata={"doc": "each run's last value of each of its metrics"}
    )
    spend: Spend
    stops: tuple[Stop, ...]
    failures: tuple[Failures, ...]  # warning and critical, per failure category
    extensions: tuple[Extension, ...]
    memory: Memory
    timeline: tuple[Event, ...] = field(
        metadata={
            "doc": "the budget's latest events (GOVERNOR_REPORT_TIMELINE_EVENTS), oldest first"
        }
    )
    timeline_left_out: int = field(metadata={"doc": "the earlier events not in the timeline"})
    earlier_events: str | None = field(
        metadata={"doc": "the API call that pages through the events left out (null: none are)"}
    )

    @property
    def pods(self) -> dict[str, PodSpend]:
        """The budget's pods by id: its runs and its stops name theirs."""
        return {pod.pod_id: pod for pod in self.spend.by_pod}

    @property
    def timeline_note(self) -> str | None:
        return left_out_note(len(self.timeline), self.timeline_left_out, self.earlier_events)


def left_out_note(listed: int, left_out: int, earlier: str | None) -> str | None:
    """What a reader is told when some events are left out."""
    if not left_out:
        return None
    return (
        f"The latest {listed} of {listed + left_out} events are listed; the "
        f"{left_out} earlier ones are left out. GET {earlier} pages through them."
    )


def build(session: Session, config: GovernorConfig, budget_id: str, now: datetime) -> Report:
    book = open_book(session, budget_id, now, config)
    cap = config.report_timeline_events
    few = min(cap, FAILURES_LISTED)
    by_pod = _spend(session, book)
    _, timeline, left_out, earlier = _listed(session, cap, budget_id=budget_id)
    return Report(
        budget=budget_model.with_plans(session, [book])[0],
        generated_at=book.now,
        runs=tuple(run_model.run(session, run) for run in book.runs),
        metrics=_metrics(session, book.runs),
        spend=Spend(book.figures.spent, _by_phase(by_pod), by_pod),
        stops=_stops(session, budget_id),
        failures=tuple(
            Failures(
                c,
                *_listed(
                    session, few, budget_id=budget_id, category=c, min_severity=Severity.WARNING
                ),
            )
            for c in FAILURE_CATEGORIES
        ),
        extensions=tuple(
            extension_model.extension(e) for e in repo.extensions(session, budget_id=budget_id)
        ),
        memory=Memory(
            peaks=_peaks(session, book.runs),
            floors=_floors(session, book.runs),
            plans=tuple(_verdict(p) for p in repo.plan_checks_of(session, budget_id)),
            admitted=admitted_plans(session, book),
        ),
        timeline=timeline,
        timeline_left_out=left_out,
        earlier_events=earlier,
    )


def _spend(session: Session, book: Book) -> tuple[PodSpend, ...]:
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
        result.append(
            PodSpend(
                pod_id=pod.id,
                name=pod.name,
                provider=pod.provider,
                provider_ref=pod.provider_ref,
                gpu_type=pod.gpu_type,
                gpu_count=pod.gpu_count,
                state=pod.state,
                hourly_rate=pod.hourly_rate_usd,
                spent=book.spent_on(pod),
                by_phase=_lines(by_phase),
                acknowledged_loss=acknowledged_loss(pod),
                bill=bill_of(pod),
            )
        )
    return tuple(result)


def _by_phase(pods: Sequence[PodSpend]) -> tuple[PhaseSpend, ...]:
    totals = dict.fromkeys(SPEND_LINES, ZERO)
    for pod in pods:
        for line in pod.by_phase:
            totals[line.phase] += line.spent
    return _lines(totals)


def _lines(amounts: dict[str, Decimal]) -> tuple[PhaseSpend, ...]:
    return tuple(PhaseSpend(line, amount) for line, amount in amounts.items())


def _phase_spans(session: Session, runs: Sequence[RunRow]) -> dict[str, list[PhaseSpan]]:
    changes: dict[str, list[tuple[datetime, Phase]]] = defaultdict(list)
    if runs:
        for row in session.scalars(
            select(RunPhaseRow).where(RunPhaseRow.run_id.in_([r.id for r in runs]))
        ):
            changes[row.run_id].append((row.at, row.phase))
    return {r.id: spans_of(changes[r.id], r.ended_at) for r in runs}


def _listed(
    session: Session, cap: int, **narrowed: Any
) -> tuple[int, tuple[Event, ...], int, str | None]:
    """The latest `cap` events so narrowed, and how to read the rest over the API, as a
    failure category lists them: every occurrence, the events listed (oldest first), how
    many earlier ones are left out, and the API call that pages through those."""
    latest = repo.events_page(session, PageRequest(limit=cap), **narrowed)
    rows, occurrences = repo.event_tally(session, **narrowed)
    earlier = None
    if latest.next_cursor is not None:
        query = {k: getattr(v, "value", v) for k, v in narrowed.items()}
        earlier = f"/v1/events?{urlencode({**query, 'cursor': latest.next_cursor})}"
    shown = events.listed(session, latest.items[::-1])
    return occurrences, shown, max(rows - len(shown), 0), earlier


def _stops(session: Session, budget_id: str) -> tuple[Stop, ...]:
    """The budget's stop orders, each with the decision that ordered it (the first event
    recorded at the order's instant that names it) and, for an operator's stop, their ask
    (the operator's event on its pod at that instant, with its written reason)."""
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
        ).all()
        why = next((e.message for e in recorded if e.evidence.get("stop_order") == order.id), None)
        asked = None
        if order.reason is Reason.MANUAL:
            asked = next((e.message for e in recorded if _ask_of(e, order)), None)
        stops.append(Stop(**vars(stop_order(order)), why=why, asked=asked))
    return tuple(stops)


def _ask_of(e: EventRow, order: StopOrderRow) -> bool:
    """The operator's ask that led to this stop: who asked and why."""
    return (
        e.category is Category.OPERATOR
        and e.subject == f"pod:{order.pod_id}"
        and "reason" in e.evidence
    )


def _metrics(session: Session, runs: Sequence[RunRow]) -> tuple[Metric, ...]:
    latest = metric_history.latest(session, [r.id for r in runs])
    return tuple(
        Metric(run.id, run.name, m.name, m.value, m.step, m.at)
        for run in runs
        for m in latest.get(run.id, ())
    )


def _peaks(session: Session, runs: Sequence[RunRow]) -> tuple[Peak, ...]:
    peaks = repo.peaks_of(session, [r.id for r in runs])
    return tuple(
        Peak(
            run.id,
            run.name,
            p.gpu_uuid,
            p.gpu_name,
            p.peak_used_bytes,
            p.memory_total_bytes,
            p.at,
        )
        for run in runs
        for p in peaks
        if p.run_id == run.id
    )


def _floors(session: Session, runs: Sequence[RunRow]) -> tuple[MeasuredFloor, ...]:
    by_id = {r.id: r for r in runs}
    return tuple(_floor(by_id[f.run_id], f) for f in repo.floors_of_runs(session, list(by_id)))


def _floor(run: RunRow, f: MeasuredFloorRow) -> MeasuredFloor:
    return MeasuredFloor(
        f.run_id,
        run.name,
        run.status,
        run.out_of_memory,
        f.gpu_uuid,
        f.gpu_name,
        f.phase,
        f.peak_used_bytes,
        f.model_id,
        f.model_revision,
        f.recipe,
        f.gpu_count,
        f.at,
    )


def _verdict(row: PlanCheckRow) -> PlanVerdict:
    return PlanVerdict(
        id=row.id,
        job_id=row.job_id,
        verdict=row.verdict,
        gpu_type=row.gpu_type,
        modeled_gib=row.modeled_gib,
        usable_gib=row.usable_gib,
        worst_case=row.worst_case_usd,
        available=row.available_usd,
        reasons=tuple(finding(r) for r in row.reasons),
        created_at=row.created_at,
        override_reason=row.override_reason,
        withdrawn_at=row.withdrawn_at,
    )
