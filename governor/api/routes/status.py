"""GET /v1/status: the dashboard's read model as JSON (money as decimal strings, UTC times)."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Annotated

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, WithJsonSchema

from governor.api.deps import Context, Now, Tx, Viewer
from governor.domain.model import (
    Action,
    BudgetState,
    Category,
    Phase,
    PodState,
    Reason,
    Requester,
    RunStatus,
    Severity,
)
from governor.domain.money import format_usd
from governor.services import status

router = APIRouter(tags=["status"])

Money = Annotated[
    Decimal,
    PlainSerializer(format_usd, return_type=str),
    WithJsonSchema({"type": "string", "description": "decimal dollars", "examples": ["12.50"]}),
]


class Out(BaseModel):
    model_config = ConfigDict(from_attributes=True)


class SpendPointOut(Out):
    at: datetime
    spent_usd: Money = Field(validation_alias="spent")


class ThresholdOut(Out):
    pct: int
    amount_usd: Money = Field(validation_alias="amount")


class StopMarkOut(Out):
    at: datetime
    pod_id: str
    what: str
    reason: Reason


class SpendChartOut(Out):
    start: datetime
    end: datetime
    points: list[SpendPointOut]
    ceiling_usd: Money = Field(validation_alias="ceiling")
    effective_ceiling_usd: Money = Field(validation_alias="effective_ceiling")
    thresholds: list[ThresholdOut]
    stops: list[StopMarkOut]


class GpuPointOut(Out):
    at: datetime
    utilization_pct: float | None
    memory_used_bytes: int | None


class GpuTraceOut(Out):
    uuid: str
    index: int
    name: str
    last_at: datetime
    utilization_pct: float | None
    memory_used_bytes: int | None
    memory_total_bytes: int | None
    peak_utilization_pct: float | None
    peak_memory_bytes: int | None
    points: list[GpuPointOut]


class StopInfoOut(Out):
    state: str
    reason: Reason
    created_at: datetime
    confirmed_at: datetime | None
    last_error: str | None


class PodStatusOut(Out):
    id: str
    provider: str
    provider_ref: str
    gpu_type: str | None
    gpu_count: int | None
    state: PodState
    spent_usd: Money = Field(validation_alias="spent")
    burn_rate_usd_per_hour: Money = Field(validation_alias="burn_per_hour")
    compute_usd_per_hour: Money = Field(validation_alias="compute_per_hour")
    storage_usd_per_hour: Money = Field(validation_alias="storage_per_hour")
    stopped_storage_usd_per_hour: Money = Field(validation_alias="stopped_storage_per_hour")
    stop: StopInfoOut | None
    telemetry_note: str | None
    gpus: list[GpuTraceOut]


class RunLineOut(Out):
    id: str
    name: str
    pod_id: str
    status: RunStatus
    phase: Phase | None
    step: int
    total_steps: int | None
    progress_pct: float | None
    last_heartbeat_at: datetime | None
    heartbeat_age_s: float | None
    heartbeat_timeout_s: float
    heartbeat_late: bool
    directive: Action
    directive_reason: Reason | None
    directive_message: str | None


class PendingExtensionOut(Out):
    id: str
    amount_usd: Money = Field(validation_alias="amount")
    reason: str
    requested_by: Requester
    run_id: str | None
    created_at: datetime
    effective_ceiling_if_approved_usd: Money = Field(
        validation_alias="effective_ceiling_if_approved"
    )


class BudgetStatusOut(Out):
    id: str
    name: str
    state: BudgetState
    ceiling_usd: Money = Field(validation_alias="ceiling")
    approved_extensions_usd: Money = Field(validation_alias="approved_extensions")
    effective_ceiling_usd: Money = Field(validation_alias="effective_ceiling")
    reserve_usd: Money = Field(validation_alias="reserve")
    spent_usd: Money = Field(validation_alias="spent")
    committed_usd: Money = Field(validation_alias="committed")
    remaining_usd: Money = Field(validation_alias="remaining")
    burn_rate_usd_per_hour: Money = Field(validation_alias="burn_per_hour")
    projected_exhaustion_at: datetime | None
    spent_pct: float
    committed_pct: float
    attention: Severity | None
    chart: SpendChartOut
    pods: list[PodStatusOut]
    runs: list[RunLineOut]
    pending_extensions: list[PendingExtensionOut]


class EventLineOut(Out):
    id: int
    at: datetime
    severity: Severity
    category: Category
    subject: str
    budget_id: str | None
    budget_name: str | None
    message: str


class LeaderOut(Out):
    replica: str = Field(validation_alias="holder")
    term: int
    since: datetime


class StatusOut(Out):
    at: datetime
    budgets: list[BudgetStatusOut]
    events: list[EventLineOut]
    leader: LeaderOut | None


@router.get("/v1/status")
def get_status(_: Viewer, ctx: Context, tx: Tx, now: Now) -> StatusOut:
    """Everything the /status page shows, as one JSON document."""
    with tx.read() as session:
        return StatusOut.model_validate(status.dashboard(session, ctx.config, now))
