"""What /metrics shows, as plain metric families: the budgets' money, pods, runs, stop
orders, events and the latest sample of every GPU of a pod that still runs.

Names follow Prometheus practice in the governor's own namespace: base units (dollars,
seconds, bytes, watts, ratios 0-1; prices per hour, as clouds quote them), `_total` for
counters, states as one 0/1 series per state. Labels: `budget`, `pod` and `run` (ids), each
with its name beside it (`budget_name`, `pod_name`, `run_name`: what people read in a legend or
an alert), and `uuid` for a GPU. A name labels the series of its id and adds none of its own:
the count of series stays bounded by the budgets, pods, live runs and GPUs there are. A run's
heartbeat metrics are exported only by the names an operator opts into
(GOVERNOR_EXPORTED_RUN_METRICS), so they too add a bounded number of series per live run.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.tables import EventRow, ExtensionRow, PodRow, RunRow, StopOrderRow
from governor.domain.model import (
    BILLS_COMPUTE,
    BudgetState,
    Category,
    ExtensionState,
    PodState,
    Severity,
)
from governor.domain.stop_order import ACTIVE_STATES, StopState
from governor.services.context import GovernorConfig
from governor.services.money.book import Book, open_books
from governor.services.monitoring import metric_history, telemetry
from governor.services.plans import admission
from governor.services.replica import leadership
from governor.services.replica.leadership import Leader
from governor.services.security.write_limits import WriteKind

Labels = tuple[str, ...]


@dataclass
class Family:
    name: str
    kind: str  # "gauge" or "counter"
    doc: str
    labels: Labels
    samples: list[tuple[Labels, float]] = field(default_factory=list)

    def add(self, labels: Labels, value: float) -> None:
        self.samples.append((labels, value))


def _gauge(name: str, doc: str, *labels: str) -> Family:
    return Family(name, "gauge", doc, labels)


BUDGET = ("budget", "budget_name")
POD = ("pod", "pod_name", *BUDGET)
RUN = ("run", "run_name", *POD)


def collect(
    session: Session, config: GovernorConfig, now: datetime, replica: str, leading: bool
) -> list[Family]:
    """Every family. What the database holds (budgets, pods, runs, GPUs ...) is the same on
    every replica: the leader exports it (every replica does while none leads), so a sum
    over replicas is never doubled. Leadership itself comes from each replica."""
    leader = leadership.current(session)
    families = _leadership(leader, replica, leading, now)
    if leader.live(now) and not leading:  # another replica exports these
        return families
    books = open_books(session, repo.budget_ids(session), now, config)
    return [
        *families,
        *_budgets(books, admission.held_for_plans(session, books)),
        _extensions(session, books),
        *_pods(books),
        *_heartbeats(books),
        _run_metrics(session, books, config.exported_run_metrics),
        _stop_orders(session, books),
        _stop_orders_failing(session, books),
        _events(session, books),
        *_gpus(session, [p for b in books for p in b.pods], now),
        *_ungoverned(session),
    ]


def _ungoverned(session: Session) -> list[Family]:
    """The billing pods under no budget the account sweep found: how many, and what they
    cost an hour (those whose rate the provider says)."""
    count = _gauge(
        "governor_ungoverned_pods", "Billing pods a provider account lists that no budget governs."
    )
    rate = _gauge(
        "governor_ungoverned_usd_per_hour",
        "What the ungoverned pods cost an hour, those whose rate the provider says.",
    )
    rows = repo.ungoverned_pods(session)
    count.add((), len(rows))
    rate.add((), float(sum((r.hourly_rate_usd or Decimal(0) for r in rows), Decimal(0))))
    return [count, rate]


def this_replica(
    refused: Mapping[WriteKind, int],
    write_failures: Mapping[str, int],
    writes_failing: bool,
    deliveries: Mapping[tuple[str, str], int],
) -> list[Family]:
    """What only this process knows, from memory (so it is there while the database is not):
    writes refused by the per-token limits, writes the database refused, and what became of
    its webhook deliveries."""
    limited = Family(
        "governor_writes_refused_total",
        "counter",
        "Writes refused because their token was over its limit (429), by kind.",
        ("kind",),
    )
    for kind, count in sorted(refused.items()):
        limited.add((kind,), count)
    failures = Family(
        "governor_database_write_failures_total",
        "counter",
        "Writes the database refused, by writer (lease, a pass, api).",
        ("writer",),
    )
    for writer, count in sorted(write_failures.items()):
        failures.add((writer,), count)
    failing = _gauge(
        "governor_database_writes_failing",
        "1 from a write of this replica the database refused until the outage ends.",
    )
    failing.add((), float(writes_failing))
    webhooks = Family(
        "governor_webhook_deliveries_total",
        "counter",
        "Webhook delivery attempts by this replica, by sink (kind, place in the list, host) "
        "and outcome: delivered, failed (to be tried again) or gave_up (lost to that sink).",
        ("sink", "outcome"),
    )
    for (sink, outcome), count in sorted(deliveries.items()):
        webhooks.add((sink, outcome), count)
    return [limited, failures, failing, webhooks]


def _leadership(leader: Leader, replica: str, leading: bool, now: datetime) -> list[Family]:
    me = _gauge(
        "governor_leader", "1 on the replica that leads the periodic work, else 0.", "replica"
    )
    me.add((replica,), float(leading))
    term = _gauge(
        "governor_leader_term", "The leadership term: it grows by one at every change of leader."
    )
    term.add((), float(leader.term))
    since = _gauge(
        "governor_leader_since_timestamp_seconds",
        "When the current leader's term began (Unix time; absent while none leads).",
    )
    if leader.live(now) and leader.since is not None:
        since.add((), leader.since.timestamp())
    age = _gauge(
        "governor_pass_age_seconds",
        "Seconds since each periodic pass of the leader last finished (leader only).",
        "task",
    )
    if leading:
        for task, tick in leader.ticks.items():
            age.add((task,), (now - (tick.at or leader.since or now)).total_seconds())
    return [me, term, since, age]


def _budgets(books: Iterable[Book], held_for_plans: Mapping[str, Decimal]) -> list[Family]:
    ceiling = _gauge("governor_budget_ceiling_dollars", "The declared hard ceiling.", *BUDGET)
    effective = _gauge(
        "governor_budget_effective_ceiling_dollars",
        "The ceiling in force: declared plus approved extensions.",
        *BUDGET,
    )
    spent = _gauge("governor_budget_spent_dollars", "Spent so far, as metered.", *BUDGET)
    committed = _gauge(
        "governor_budget_committed_dollars",
        "Spent plus shutdown, storage tail and reserve (the next three gauges); "
        "pods are stopped when it reaches the effective ceiling.",
        *BUDGET,
    )
    shutdown = _gauge(
        "governor_budget_shutdown_dollars",
        "Committed spend's part for stopping: what the pods that bill compute will still cost "
        "over the checkpoint grace, the stop latency and the reaction time.",
        *BUDGET,
    )
    tail = _gauge(
        "governor_budget_storage_tail_dollars",
        "Committed spend's part for the storage tail: every pod's stopped storage over the "
        "budget's storage tail hours.",
        *BUDGET,
    )
    reserve = _gauge(
        "governor_budget_reserve_dollars",
        "Committed spend's part for the budget's reserve, held back for work after the stop.",
        *BUDGET,
    )
    held = _gauge(
        "governor_budget_held_for_plans_dollars",
        "What the budget's admitted plans hold back from admitting another: never part of "
        "committed spend, never a cause of a stop.",
        *BUDGET,
    )
    remaining = _gauge(
        "governor_budget_remaining_dollars", "Effective ceiling minus committed.", *BUDGET
    )
    burn = _gauge(
        "governor_budget_burn_rate_dollars_per_hour",
        "What the budget's pods cost per hour right now (compute and storage).",
        *BUDGET,
    )
    state = _gauge("governor_budget_state", "1 for the budget's current state.", *BUDGET, "state")
    to_ceiling = _gauge(
        "governor_budget_seconds_to_ceiling",
        "Seconds until committed spend reaches the effective ceiling at the current burn (0 "
        "once there); only for open budgets that are burning money.",
        *BUDGET,
    )
    for book in books:
        labels, f = (book.budget.id, book.budget.name), book.figures
        ceiling.add(labels, float(book.budget.ceiling_usd))
        effective.add(labels, float(f.effective_ceiling))
        spent.add(labels, float(f.spent))
        committed.add(labels, float(f.committed))
        shutdown.add(labels, float(f.shutdown))
        tail.add(labels, float(f.storage_tail))
        reserve.add(labels, float(f.reserve))
        held.add(labels, float(held_for_plans[book.budget.id]))
        remaining.add(labels, float(f.remaining))
        burn.add(labels, float(f.burn_per_hour))
        for s in BudgetState:
            state.add((*labels, s.value), float(book.budget.state is s))
        seconds = f.seconds_to_ceiling()
        if book.budget.state is BudgetState.OPEN and seconds is not None:
            to_ceiling.add(labels, seconds)
    return [
        ceiling,
        effective,
        spent,
        committed,
        shutdown,
        tail,
        reserve,
        held,
        remaining,
        burn,
        state,
        to_ceiling,
    ]


def _extensions(session: Session, books: Iterable[Book]) -> Family:
    family = _gauge("governor_extensions", "Extension requests by state.", *BUDGET, "state")
    counts = _counts(session, ExtensionRow.budget_id, ExtensionRow.state)
    for book in books:
        for s in ExtensionState:
            labels = (book.budget.id, book.budget.name, s.value)
            family.add(labels, counts.get((book.budget.id, s), 0))
    return family


def _pods(books: Iterable[Book]) -> list[Family]:
    state = _gauge("governor_pod_state", "1 for the pod's current state.", *POD, "state")
    rate = _gauge("governor_pod_rate_dollars_per_hour", "The pod's hourly compute rate.", *POD)
    spent = _gauge("governor_pod_spent_dollars", "What the pod has cost so far.", *POD)
    for book in books:
        for pod in book.pods:
            labels = (pod.id, pod.name, book.budget.id, book.budget.name)
            for s in PodState:
                state.add((*labels, s.value), float(pod.state is s))
            rate.add(labels, float(pod.hourly_rate_usd))
            spent.add(labels, float(book.spent_on(pod)))
    return [state, rate, spent]


def _live_runs(books: Iterable[Book]) -> Iterator[tuple[Book, RunRow, Labels]]:
    """Each live run, with its book and its labels (RUN)."""
    for book in books:
        pod_names = {pod.id: pod.name for pod in book.pods}
        for run in book.runs:
            if run.status.is_live:
                pod_name = pod_names[run.pod_id]
                labels = (run.id, run.name, run.pod_id, pod_name, book.budget.id, book.budget.name)
                yield book, run, labels


def _run_metrics(session: Session, books: Iterable[Book], names: Sequence[str]) -> Family:
    family = _gauge(
        "governor_run_metric",
        "The latest value a live run's job sent of each metric named in "
        "GOVERNOR_EXPORTED_RUN_METRICS (NaN and infinities as sent).",
        *RUN,
        "metric",
    )
    runs = list(_live_runs(books)) if names else []
    points = metric_history.latest(session, [run.id for _, run, _ in runs], names)
    for _, run, labels in runs:
        values = metric_history.latest_values(run.metrics, points.get(run.id, ()))
        for name in names:
            if name in values:  # a name this run never sent stays absent
                family.add((*labels, name), values[name])
    return family


def _heartbeats(books: Iterable[Book]) -> list[Family]:
    family = _gauge(
        "governor_run_heartbeat_age_seconds",
        "Seconds since a live run's job last checked in (since its attempt began if never).",
        *RUN,
    )
    timeout = _gauge(
        "governor_run_heartbeat_timeout_seconds",
        "A live run's heartbeat timeout: past it the job is presumed dead and its pod stopped.",
        *RUN,
    )
    for book, run, labels in _live_runs(books):
        last = run.last_heartbeat_at or run.started_at
        # a beat that landed after this scrape read its clock is no older than that
        age = max(0.0, (book.now - last).total_seconds())
        family.add(labels, age)
        timeout.add(labels, run.heartbeat_timeout_s)
    return [family, timeout]


def _stop_orders(session: Session, books: Iterable[Book]) -> Family:
    family = _gauge("governor_stop_orders", "Stop orders by state.", *BUDGET, "state")
    counts = _counts(session, StopOrderRow.budget_id, StopOrderRow.state)
    for book in books:
        for s in StopState:
            labels = (book.budget.id, book.budget.name, s.value)
            family.add(labels, counts.get((book.budget.id, s), 0))
    return family


def _stop_orders_failing(session: Session, books: Iterable[Book]) -> Family:
    family = _gauge(
        "governor_stop_orders_failing",
        "Stop orders whose last provider call failed while their pod still bills: retrying, "
        "or refused for good (stop the pod by hand).",
        *BUDGET,
    )
    failing = _counts(
        session,
        StopOrderRow.budget_id,
        where=(
            StopOrderRow.last_error.is_not(None),
            StopOrderRow.pod_id == PodRow.id,
            PodRow.state.in_(BILLS_COMPUTE),
            StopOrderRow.state.in_([*ACTIVE_STATES, StopState.FAILED]),
        ),
    )
    for book in books:
        labels = (book.budget.id, book.budget.name)
        family.add(labels, failing.get((book.budget.id,), 0))
    return family


def _events(session: Session, books: Iterable[Book]) -> Family:
    """By budget: one set of series for each budget not closed, and one (budget "") for
    events of no budget. A closed budget's series go, so the count is bounded by the
    budgets still in use."""
    family = Family(
        "governor_events_total",
        "counter",
        "Events recorded, by severity, category and budget (each folded repeat counts); "
        'budget "" for events of no budget; closed budgets are left out.',
        ("severity", "category", *BUDGET),
    )
    columns = (EventRow.severity, EventRow.category, EventRow.budget_id)
    rows = session.execute(select(*columns, func.sum(EventRow.count)).group_by(*columns)).all()
    counts = {
        (severity, category, budget): int(total) for severity, category, budget, total in rows
    }
    budgets = [(None, "")] + [
        (b.budget.id, b.budget.name) for b in books if b.budget.state is not BudgetState.CLOSED
    ]
    for budget_id, name in budgets:
        for severity in Severity:
            for category in Category:
                total = counts.get((severity, category, budget_id), 0)
                family.add((severity.value, category.value, budget_id or "", name), total)
    return family


def _counts(
    session: Session, *columns: Any, where: Iterable[Any] = ()
) -> dict[tuple[object, ...], int]:
    query = select(*columns, func.count()).where(*where).group_by(*columns)
    rows = session.execute(query).all()
    return {tuple(row[:-1]): int(row[-1]) for row in rows}


GPU = ("uuid", "pod", "pod_name")
GPU_VALUES = (
    ("governor_gpu_utilization_ratio", "GPU utilization, 0 to 1.", "utilization_pct", 0.01),
    ("governor_gpu_memory_used_bytes", "GPU memory in use.", "memory_used_bytes", 1.0),
    ("governor_gpu_memory_total_bytes", "GPU memory in all.", "memory_total_bytes", 1.0),
    ("governor_gpu_power_watts", "GPU power draw.", "power_w", 1.0),
    ("governor_gpu_temperature_celsius", "GPU temperature.", "temperature_c", 1.0),
)


def _gpus(session: Session, pods: Iterable[PodRow], now: datetime) -> list[Family]:
    info = _gauge("governor_gpu_info", "A GPU of a pod: its index and name.", *GPU, "index", "name")
    age = _gauge("governor_gpu_sample_age_seconds", "Seconds since the GPU's latest sample.", *GPU)
    values = [(_gauge(name, doc, *GPU), attr, scale) for name, doc, attr, scale in GPU_VALUES]
    for pod in pods:
        if not pod.state.bills_compute:
            continue
        for at, gpu in telemetry.latest(session, pod.id):
            labels = (gpu.uuid, pod.id, pod.name)
            info.add((*labels, str(gpu.index), gpu.name), 1.0)
            age.add(labels, (now - at).total_seconds())
            for family, attr, scale in values:
                value = getattr(gpu, attr)
                if value is not None:  # a metric this GPU does not report stays absent
                    family.add(labels, value * scale)
    return [info, age, *(family for family, _, _ in values)]
