"""A pod as it is read: what was registered, where it stands, what it has cost and been
billed, its stop order and its GPUs' telemetry; and the registrations, reads, stops and
resumes that answer with it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.tables import PodRow, StopOrderRow
from governor.domain.model import PodState, RateSource
from governor.domain.paging import Page, PageRequest
from governor.domain.stop_latency import LatencySource, StopLatency
from governor.domain.teams import EVERY_TEAM, TeamScope
from governor.services.context import GovernorConfig, ServiceContext
from governor.services.fleet import budgets, pods, resumes
from governor.services.fleet.loss_model import AcknowledgedLoss, acknowledged_loss
from governor.services.money.book import Book, open_books
from governor.services.money.pod_bill_model import bill_of
from governor.services.monitoring.pod_telemetry_model import PodTelemetry, pod_telemetry
from governor.services.runs import run_model
from governor.services.runs.run_model import Run
from governor.services.security.tokens import Principal
from governor.services.stopping.stop_order_model import StopOrder, stop_order


@dataclass(frozen=True)
class PodStopLatency:
    """How long the pod's provider takes to stop a pod, as the shutdown part of committed
    spend counts it: learned from the latest stops of its provider and region once there are
    five, never below the declared figure."""

    seconds: float = field(metadata={"doc": "the figure in force"})
    source: LatencySource = field(
        metadata={"doc": "declared: the provider's own figure; learned: its latest stops'"}
    )
    declared_s: float = field(metadata={"doc": "what the provider declared"})
    learned_s: float | None = field(
        metadata={
            "doc": "what its provider and region's latest stops teach, from the first request "
            "to the pod confirmed stopped (retries included): their 95th percentile, or, where "
            "any was refused, at least the worst retry sequence they have shown; null: fewer "
            "than five stops so far"
        }
    )
    stops: int = field(metadata={"doc": "how many of those stops it is learned from"})


def stop_latency(row: PodRow) -> PodStopLatency:
    known = StopLatency(row.stop_latency_s, row.learned_stop_latency_s, row.learned_from_stops)
    return PodStopLatency(
        known.in_force_s, known.source, known.declared_s, known.learned_s, known.stops
    )


@dataclass(frozen=True)
class Pod:
    id: str
    gpu_uuids: tuple[str, ...] | None = field(
        metadata={"doc": "the pod's own GPUs; null: all it reports"}
    )
    process_pids: tuple[int, ...] | None = field(metadata={"doc": "the pod's own processes by PID"})
    process_pattern: str | None = field(
        metadata={"doc": "the pod's own processes by name (a glob)"}
    )
    budget_id: str
    name: str = field(metadata={"doc": "unique within its budget; the provider_ref unless named"})
    provider: str
    provider_ref: str
    region: str | None = field(
        metadata={"doc": "where the provider says it runs; null: it does not say"}
    )
    gpu_type: str | None
    gpu_count: int | None
    state: PodState = field(
        metadata={"doc": "its last known state while the provider's (provider_state) is unknown"}
    )
    provider_state: str | None = field(
        metadata={
            "doc": "the provider's word for the pod's state while it is none the provider "
            "documents; null while the state is known"
        }
    )
    state_known: bool = field(
        metadata={
            "doc": "false while provider_state is none the provider documents: the pod keeps its "
            "last known state, its compute accrues as running, and a stop order goes on asking"
        }
    )
    hourly_rate: Decimal
    rate_source: RateSource
    storage_gb: float
    storage_per_gb_month: Decimal = field(metadata={"api": "storage_usd_per_gb_month"})
    stopped_storage_per_gb_month: Decimal = field(
        metadata={"api": "stopped_storage_usd_per_gb_month"}
    )
    spent: Decimal
    accrued_until: datetime
    stopped_at: datetime | None
    resumed_at: datetime | None
    released_at: datetime | None = field(
        metadata={"doc": "its storage was deleted: no longer counted"}
    )
    stop_order: StopOrder | None
    stop_latency: PodStopLatency
    local: bool
    node: str | None
    terminate_only: bool = field(
        metadata={
            "doc": "no stop call works for it: it is terminated, and only after its job saved "
            "on its persistent filesystem"
        }
    )
    persistent_filesystem: str | None
    persistent_mount: str | None
    acknowledged_loss: AcknowledgedLoss | None = field(
        metadata={
            "doc": "what its stop loses, accepted in writing when it was registered; null: "
            "its stop keeps its workspace"
        }
    )
    plan_id: str | None
    launch_id: str | None = field(metadata={"doc": "the accepted launch it came from, if any"})
    billed: Decimal | None = field(
        metadata={"doc": "what the provider has billed since the pod was registered, when it says"}
    )
    billed_through: datetime | None
    billing_drift: bool = field(metadata={"doc": "metered and billed disagree by more than 5%"})
    telemetry: PodTelemetry


@dataclass(frozen=True)
class ResumedPod:
    pod: Pod
    run: Run | None = field(metadata={"doc": "the run taking up its next attempt, if any"})
    token: str | None = field(
        metadata={
            "doc": "That attempt's job token (the previous one has ended). Shown once: hand "
            "it to whatever relaunches the job."
        }
    )


def pod(session: Session, row: PodRow, book: Book, order: StopOrderRow | None) -> Pod:
    bill = bill_of(row)
    return Pod(
        id=row.id,
        gpu_uuids=None if row.gpu_uuids is None else tuple(row.gpu_uuids),
        process_pids=None if row.process_pids is None else tuple(row.process_pids),
        process_pattern=row.process_pattern,
        budget_id=row.budget_id,
        name=row.name,
        provider=row.provider,
        provider_ref=row.provider_ref,
        region=row.region,
        gpu_type=row.gpu_type,
        gpu_count=row.gpu_count,
        state=row.state,
        provider_state=row.provider_state,
        state_known=row.state_known,
        hourly_rate=row.hourly_rate_usd,
        rate_source=row.rate_source,
        storage_gb=row.storage_gb,
        storage_per_gb_month=row.storage_usd_per_gb_month,
        stopped_storage_per_gb_month=row.stopped_storage_usd_per_gb_month,
        spent=book.spent_on(row),
        accrued_until=row.accrued_until,
        stopped_at=row.stopped_at,
        resumed_at=row.resumed_at,
        released_at=row.released_at,
        stop_order=None if order is None else stop_order(order),
        stop_latency=stop_latency(row),
        local=row.local,
        node=row.node,
        terminate_only=row.terminate_only,
        persistent_filesystem=row.persistent_filesystem,
        persistent_mount=row.persistent_mount,
        acknowledged_loss=acknowledged_loss(row),
        plan_id=row.plan_id,
        launch_id=row.launch_id,
        billed=bill.billed,
        billed_through=bill.through,
        billing_drift=row.billing_drift,
        telemetry=pod_telemetry(session, row),
    )


def get(session: Session, config: GovernorConfig, pod_id: str, now: datetime) -> Pod:
    row = repo.get_pod(session, pod_id)
    book = budgets.book(session, config, row.budget_id, now)
    return pod(session, row, book, repo.latest_stop_order(session, row.id))


def page(
    session: Session,
    config: GovernorConfig,
    now: datetime,
    request: PageRequest,
    *,
    budget_id: str | None = None,
    name: str | None = None,
    scope: TeamScope = EVERY_TEAM,
) -> Page[Pod]:
    """A page of pods (of the scope's teams), oldest first; with `budget_id` those of that
    budget, with `name` those so named."""
    rows = repo.pods(session, request, budget_id=budget_id, name=name, scope=scope)
    ids = sorted({row.budget_id for row in rows.items})
    books = {b.budget.id: b for b in open_books(session, ids, now, config)}
    return Page(
        [
            pod(session, row, books[row.budget_id], repo.latest_stop_order(session, row.id))
            for row in rows.items
        ],
        rows.next_cursor,
    )


def register(
    session: Session,
    ctx: ServiceContext,
    budget_id: str,
    registration: pods.Registration,
    now: datetime,
    *,
    by: Principal,
) -> Pod:
    """Put a pod under a budget (pods.register), by `by`: it, as its budget's book counts it."""
    row = pods.register(session, ctx, budget_id, registration, now, by=by)
    return pod(session, row, budgets.book(session, ctx.config, budget_id, now), None)


def stop(
    session: Session, ctx: ServiceContext, pod_id: str, reason: str, now: datetime, *, by: Principal
) -> StopOrder:
    """An operator's preserving stop (pods.stop_manually): its stop order."""
    return stop_order(pods.stop_manually(session, ctx, pod_id, reason, now, by=by))


def resume(ctx: ServiceContext, pod_id: str, reason: str, *, by: Principal) -> ResumedPod:
    """Resume a stopped pod (resumes.resume, in its own transactions), then read it back with
    the run taking up its next attempt, if any."""
    resumed = resumes.resume(ctx, pod_id, reason, by=by)
    with ctx.read_only() as session:
        return ResumedPod(
            pod=get(session, ctx.config, resumed.pod.id, ctx.clock.now()),
            run=None if resumed.run is None else run_model.get(session, resumed.run.id),
            token=resumed.token,
        )
