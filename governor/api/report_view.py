"""The run report's JSON shape, and the report turned into it."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from pydantic import BaseModel, Field
from sqlalchemy.orm import Session

from governor.api import views
from governor.api.read_models import api_model
from governor.api.schemas import (
    BudgetOut,
    EventOut,
    ExtensionOut,
    PlanReasonOut,
    RunOut,
    StopOrderOut,
    UsdText,
)
from governor.db.tables import PlanCheckRow
from governor.domain.model import Category, PodState
from governor.domain.money import format_usd
from governor.domain.preflight.rules import Verdict
from governor.services.money.pod_bill_model import PodBill
from governor.services.view.dashboard_model import PlanLine
from governor.services.view.report import Peak, PodSpend, Report, Stop


class PhaseSpendOut(BaseModel):
    phase: str
    spent_usd: UsdText


PodBillOut = api_model(PodBill)


class PodSpendOut(BaseModel):
    pod_id: str
    name: str
    provider: str
    provider_ref: str
    gpu_type: str | None
    gpu_count: int | None
    state: PodState
    hourly_rate_usd: UsdText
    spent_usd: UsdText
    by_phase: list[PhaseSpendOut]
    bill: PodBillOut = Field(  # type: ignore[valid-type]
        description="what the provider last billed and the instant that bill runs to "
        "(null both: no bill read yet)"
    )


class SpendOut(BaseModel):
    spent_usd: UsdText
    by_phase: list[PhaseSpendOut]
    by_pod: list[PodSpendOut]


class StopOut(StopOrderOut):
    why: str | None


class FailuresOut(BaseModel):
    category: Category
    count: int = Field(description="every occurrence, listed or not (folded ones included)")
    events: list[EventOut] = Field(description="the latest 10 at most, oldest first")
    events_left_out: int = Field(description="the earlier events not listed")
    earlier_events: str | None = Field(description="the API call that pages through them")


class MetricOut(BaseModel):
    run_id: str
    run_name: str
    name: str
    value: float = Field(description="the last finite value (a minute's mean once folded)")
    step: int
    at: datetime


class PeakOut(BaseModel):
    run_id: str
    run_name: str
    gpu_uuid: str
    gpu_name: str
    peak_used_bytes: int
    memory_total_bytes: int | None
    at: datetime


class VerdictOut(BaseModel):
    id: str
    job_id: str
    verdict: Verdict
    gpu_type: str
    modeled_gib: float
    usable_gib: float
    worst_case_usd: UsdText
    available_usd: UsdText
    reasons: list[PlanReasonOut]  # type: ignore[valid-type]
    created_at: datetime
    override_reason: str | None = Field(description="an operator let this no_go through")
    withdrawn_at: datetime | None


PlanLineOut = api_model(PlanLine)


class MemoryOut(BaseModel):
    peaks: list[PeakOut]
    plans: list[VerdictOut]
    admitted: list[PlanLineOut] = Field(  # type: ignore[valid-type]
        description="each admitted plan: its worst case, what it spent, what it still reserves"
    )


class ReportOut(BaseModel):
    budget: BudgetOut
    generated_at: datetime
    runs: list[RunOut]
    metrics: list[MetricOut] = Field(description="each run's last value of each of its metrics")
    spend: SpendOut
    stops: list[StopOut]
    failures: list[FailuresOut]
    extensions: list[ExtensionOut]
    memory: MemoryOut
    timeline: list[EventOut] = Field(
        description="the budget's latest events (GOVERNOR_REPORT_TIMELINE_EVENTS), oldest first"
    )
    timeline_left_out: int = Field(description="the earlier events not in the timeline")
    earlier_events: str | None = Field(
        description="the API call that pages through the events left out (null: none are)"
    )


def report(session: Session, r: Report) -> ReportOut:
    return ReportOut(
        budget=views.budget(r.book),
        generated_at=r.book.now,
        runs=[views.run(session, run) for run in r.book.runs],
        metrics=[
            MetricOut(
                run_id=run.id, run_name=run.name, name=m.name, value=m.value, step=m.step, at=m.at
            )
            for run in r.book.runs
            for m in r.metrics.get(run.id, ())
        ],
        spend=SpendOut(
            spent_usd=format_usd(r.book.figures.spent),
            by_phase=_lines(r.by_phase),
            by_pod=[_pod(p) for p in r.spend],
        ),
        stops=[_stop(s) for s in r.stops],
        failures=[
            FailuresOut(
                category=c,
                count=listed.occurrences,
                events=[views.event(e) for e in listed.events],
                events_left_out=listed.left_out,
                earlier_events=listed.earlier,
            )
            for c, listed in r.failures.items()
        ],
        extensions=[views.extension(e) for e in r.extensions],
        memory=MemoryOut(
            peaks=[_peak(p) for p in r.peaks],
            plans=[_verdict(p) for p in r.plans],
            admitted=[PlanLineOut.model_validate(p) for p in r.admitted],
        ),
        timeline=[views.event(e) for e in r.timeline.events],
        timeline_left_out=r.timeline.left_out,
        earlier_events=r.timeline.earlier,
    )


def _lines(amounts: dict[str, Decimal]) -> list[PhaseSpendOut]:
    return [PhaseSpendOut(phase=k, spent_usd=format_usd(v)) for k, v in amounts.items()]


def _pod(spend: PodSpend) -> PodSpendOut:
    pod = spend.pod
    return PodSpendOut(
        pod_id=pod.id,
        name=pod.name,
        provider=pod.provider,
        provider_ref=pod.provider_ref,
        gpu_type=pod.gpu_type,
        gpu_count=pod.gpu_count,
        state=pod.state,
        hourly_rate_usd=format_usd(pod.hourly_rate_usd),
        spent_usd=format_usd(spend.spent),
        by_phase=_lines(spend.by_phase),
        bill=PodBillOut.model_validate(spend.bill),
    )


def _stop(stop: Stop) -> StopOut:
    return StopOut(**views.stop_order(stop.order).model_dump(), why=stop.why)


def _peak(p: Peak) -> PeakOut:
    return PeakOut(
        run_id=p.run.id,
        run_name=p.run.name,
        gpu_uuid=p.peak.gpu_uuid,
        gpu_name=p.peak.gpu_name,
        peak_used_bytes=p.peak.peak_used_bytes,
        memory_total_bytes=p.peak.memory_total_bytes,
        at=p.peak.at,
    )


def _verdict(row: PlanCheckRow) -> VerdictOut:
    return VerdictOut(
        id=row.id,
        job_id=row.job_id,
        verdict=row.verdict,
        gpu_type=row.gpu_type,
        modeled_gib=row.modeled_gib,
        usable_gib=row.usable_gib,
        worst_case_usd=format_usd(row.worst_case_usd),
        available_usd=format_usd(row.available_usd),
        reasons=[PlanReasonOut.model_validate(reason) for reason in row.reasons],
        created_at=row.created_at,
        override_reason=row.override_reason,
        withdrawn_at=row.withdrawn_at,
    )
