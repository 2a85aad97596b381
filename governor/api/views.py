"""Rows and use-case results turned into response shapes."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime

from sqlalchemy.orm import Session

from governor.api.schemas import (
    BudgetBrief,
    BudgetOut,
    CheckpointOut,
    DirectiveState,
    EventOut,
    ExtensionOut,
    GpuOut,
    PeakOut,
    PlanCheckOut,
    PodOut,
    PodTelemetryOut,
    RunOut,
    StopOrderOut,
)
from governor.db import repository as repo
from governor.db.tables import (
    EventRow,
    ExtensionRow,
    PlanCheckRow,
    PodRow,
    RunRow,
    StopOrderRow,
)
from governor.domain.ledger import Figures
from governor.domain.money import format_usd
from governor.domain.telemetry import owns
from governor.services.money.book import Book
from governor.services.monitoring import telemetry
from governor.services.view.report import bill_of


def budget(book: Book) -> BudgetOut:
    row, f = book.budget, book.figures
    return BudgetOut(
        id=row.id,
        name=row.name,
        state=row.state,
        ceiling_usd=format_usd(row.ceiling_usd),
        approved_extensions_usd=format_usd(f.effective_ceiling - row.ceiling_usd),
        effective_ceiling_usd=format_usd(f.effective_ceiling),
        reserve_usd=format_usd(row.reserve_usd),
        spent_usd=format_usd(f.spent),
        committed_usd=format_usd(f.committed),
        remaining_usd=format_usd(f.remaining),
        burn_rate_usd_per_hour=format_usd(f.burn_per_hour),
        projected_exhaustion_at=f.projected_exhaustion_at,
        storage_tail_hours=row.storage_tail_hours,
        alert_thresholds=list(row.alert_thresholds),
        note=row.note,
        require_plan=row.require_plan,
        created_at=row.created_at,
        closed_at=row.closed_at,
    )


def brief(f: Figures, as_of: datetime) -> BudgetBrief:
    return BudgetBrief(
        as_of=as_of,
        spent_usd=format_usd(f.spent),
        committed_usd=format_usd(f.committed),
        effective_ceiling_usd=format_usd(f.effective_ceiling),
        remaining_usd=format_usd(f.remaining),
        burn_rate_usd_per_hour=format_usd(f.burn_per_hour),
    )


def stop_order(row: StopOrderRow) -> StopOrderOut:
    return StopOrderOut.model_validate(row, from_attributes=True)


def pod_telemetry(session: Session, row: PodRow) -> PodTelemetryOut:
    gpus = [
        GpuOut(**{**asdict(sample), "at": at, "own": owns(row.gpu_uuids, sample.uuid)})
        for at, sample in telemetry.latest(session, row.id)
    ]
    return PodTelemetryOut(note=row.telemetry_note, lost_gpus=row.lost_gpus or [], gpus=gpus)


def pod(session: Session, row: PodRow, book: Book, order: StopOrderRow | None) -> PodOut:
    bill = bill_of(row)
    return PodOut(
        id=row.id,
        gpu_uuids=row.gpu_uuids,
        process_pids=row.process_pids,
        process_pattern=row.process_pattern,
        budget_id=row.budget_id,
        name=row.name,
        provider=row.provider,
        provider_ref=row.provider_ref,
        gpu_type=row.gpu_type,
        gpu_count=row.gpu_count,
        state=row.state,
        hourly_rate_usd=format_usd(row.hourly_rate_usd),
        rate_source=row.rate_source,
        storage_gb=row.storage_gb,
        storage_usd_per_gb_month=format_usd(row.storage_usd_per_gb_month),
        stopped_storage_usd_per_gb_month=format_usd(row.stopped_storage_usd_per_gb_month),
        spent_usd=format_usd(book.spent_on(row)),
        accrued_until=row.accrued_until,
        stopped_at=row.stopped_at,
        resumed_at=row.resumed_at,
        released_at=row.released_at,
        stop_order=None if order is None else stop_order(order),
        local=row.local,
        node=row.node,
        persistent_filesystem=row.persistent_filesystem,
        persistent_mount=row.persistent_mount,
        plan_id=row.plan_id,
        billed_usd=None if bill.billed is None else format_usd(bill.billed),
        billed_through=bill.through,
        billing_drift=row.billing_drift,
        telemetry=pod_telemetry(session, row),
    )


def run(session: Session, row: RunRow) -> RunOut:
    checkpoint = None
    if row.checkpoint_path is not None and row.checkpoint_at is not None:
        checkpoint = CheckpointOut(
            step=row.checkpoint_step or 0, path=row.checkpoint_path, at=row.checkpoint_at
        )
    return RunOut(
        id=row.id,
        budget_id=row.budget_id,
        pod_id=row.pod_id,
        name=row.name,
        attempt=row.attempt,
        status=row.status,
        phase=row.phase,
        step=row.step,
        total_steps=row.total_steps,
        heartbeat_timeout_s=row.heartbeat_timeout_s,
        checkpoint_grace_s=row.checkpoint_grace_s,
        last_heartbeat_at=row.last_heartbeat_at,
        checkpoint=checkpoint,
        directive=DirectiveState(
            action=row.directive, reason=row.directive_reason, message=row.directive_message
        ),
        policy=row.policy or {},
        health_rules=row.health_rules or [],
        metrics=row.metrics,
        peaks=[
            PeakOut.model_validate(p, from_attributes=True)
            for p in repo.peaks_of(session, [row.id])
        ],
        created_at=row.created_at,
        started_at=row.started_at,
        ended_at=row.ended_at,
    )


def extension(row: ExtensionRow) -> ExtensionOut:
    return ExtensionOut(
        id=row.id,
        budget_id=row.budget_id,
        amount_usd=format_usd(row.amount_usd),
        reason=row.reason,
        requested_by=row.requested_by,
        run_id=row.run_id,
        state=row.state,
        created_at=row.created_at,
        decided_at=row.decided_at,
        decision_note=row.decision_note,
    )


def event(row: EventRow) -> EventOut:
    return EventOut.model_validate(row, from_attributes=True)


def plan_check(row: PlanCheckRow) -> PlanCheckOut:
    return PlanCheckOut(
        id=row.id,
        budget_id=row.budget_id,
        job_id=row.job_id,
        verdict=row.verdict,
        effective_ceiling_usd=None
        if row.effective_ceiling_usd is None
        else format_usd(row.effective_ceiling_usd),
        override_reason=row.override_reason,
        withdrawn_at=row.withdrawn_at,
        canary_released_at=row.canary_released_at,
        canary_peak_gib=row.canary_peak_gib,
        canary_released_by=row.canary_released_by,
        reasons=row.reasons,
        memory=row.figures["memory"],
        cost=row.figures["cost"],
        plan=row.plan,
        created_at=row.created_at,
    )
