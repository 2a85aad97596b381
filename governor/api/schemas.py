"""Request and response shapes. Money comes in as a string or a number, goes out as a string."""

from __future__ import annotations

import math
from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema, model_validator

from governor.domain.model import (
    Action,
    BudgetState,
    Category,
    ExtensionState,
    Phase,
    PodState,
    RateSource,
    Reason,
    Requester,
    Role,
    RunStatus,
    Severity,
)
from governor.domain.money import parse_usd
from governor.domain.stop_order import StopState

_MONEY_SCHEMA = WithJsonSchema(
    {"anyOf": [{"type": "string"}, {"type": "number"}], "examples": ["12.50"]}
)
Usd = Annotated[Decimal, BeforeValidator(parse_usd), _MONEY_SCHEMA]
PositiveUsd = Annotated[
    Decimal, BeforeValidator(lambda v: parse_usd(v, positive=True)), _MONEY_SCHEMA
]
UsdText = Annotated[str, Field(examples=["12.50"], description="decimal dollars")]


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError("must be a finite number")
    return value


Seconds = Annotated[float, Field(gt=0, le=86_400), BeforeValidator(_finite)]
Name = Annotated[str, Field(min_length=1, max_length=200, pattern=r"\S")]
Text = Annotated[str, Field(min_length=1, max_length=2000, pattern=r"\S")]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- budgets -------------------------------------------------------------------------


class BudgetIn(Strict):
    name: Name
    ceiling_usd: PositiveUsd
    reserve_usd: Usd = Decimal(0)
    storage_tail_hours: Annotated[float, Field(ge=0, le=8760), BeforeValidator(_finite)] = 0.0
    alert_thresholds: Annotated[list[Annotated[int, Field(ge=1, le=100)]], Field(max_length=10)] = [
        50,
        80,
        90,
    ]
    note: Annotated[str, Field(max_length=2000)] | None = None

    @model_validator(mode="after")
    def _reserve_below_ceiling(self) -> BudgetIn:
        if self.reserve_usd >= self.ceiling_usd:
            raise ValueError("reserve_usd must be less than ceiling_usd")
        return self


class BudgetOut(BaseModel):
    id: str
    name: str
    state: BudgetState
    ceiling_usd: UsdText
    approved_extensions_usd: UsdText
    effective_ceiling_usd: UsdText
    reserve_usd: UsdText
    spent_usd: UsdText
    committed_usd: UsdText
    remaining_usd: UsdText
    burn_rate_usd_per_hour: UsdText
    projected_exhaustion_at: datetime | None
    storage_tail_hours: float
    alert_thresholds: list[int]
    note: str | None
    created_at: datetime


# --- pods ----------------------------------------------------------------------------


class PodIn(Strict):
    provider: Annotated[str, Field(min_length=1, max_length=40)]
    provider_ref: Annotated[str, Field(min_length=1, max_length=200)]
    hourly_rate_usd: PositiveUsd | None = None
    gpu_type: Annotated[str, Field(max_length=100)] | None = None
    gpu_count: Annotated[int, Field(ge=1, le=1024)] | None = None
    storage_gb: Annotated[float, Field(ge=0, le=1_000_000), BeforeValidator(_finite)] = 0.0
    storage_usd_per_gb_month: Usd = Decimal(0)
    stopped_storage_usd_per_gb_month: Usd | None = None
    local: bool = Field(False, description="this server samples the pod's GPUs itself")


class StopIn(Strict):
    reason: Text = "stopped by an operator"


class StopOrderOut(BaseModel):
    id: str
    pod_id: str
    reason: Reason
    state: StopState
    deadline: datetime
    created_at: datetime
    notified_at: datetime | None
    acked_at: datetime | None
    ack_checkpoint: dict[str, Any] | None
    sent_at: datetime | None
    attempts: int
    confirmed_at: datetime | None
    last_error: str | None


class GpuProcessOut(BaseModel):
    pid: int
    used_memory_bytes: int | None


class GpuOut(BaseModel):
    uuid: str
    index: int
    name: str
    at: datetime
    utilization_pct: float | None
    utilization_max_pct: float | None
    memory_total_bytes: int | None
    memory_used_bytes: int | None
    memory_free_bytes: int | None
    power_w: float | None
    temperature_c: float | None
    processes: list[GpuProcessOut] | None
    clock_event_reasons: int | None


class PodTelemetryOut(BaseModel):
    note: str | None = Field(description="why there is no telemetry, e.g. no NVML")
    lost_gpus: list[str]
    gpus: list[GpuOut]


class PodOut(BaseModel):
    id: str
    budget_id: str
    provider: str
    provider_ref: str
    gpu_type: str | None
    gpu_count: int | None
    state: PodState
    hourly_rate_usd: UsdText
    rate_source: RateSource
    storage_gb: float
    storage_usd_per_gb_month: UsdText
    stopped_storage_usd_per_gb_month: UsdText
    spent_usd: UsdText
    accrued_until: datetime
    stopped_at: datetime | None
    stop_order: StopOrderOut | None
    local: bool
    telemetry: PodTelemetryOut


# --- runs ----------------------------------------------------------------------------


class PolicyIn(Strict):
    """Per-run thresholds of the GPU and progress rules; unset ones keep the server's."""

    idle_util_pct: Annotated[float, Field(gt=0, le=100, allow_inf_nan=False)] | None = None
    idle_window_s: Seconds | None = None
    stall_window_s: Seconds | None = None
    compile_allowance_s: Seconds | None = None
    headroom_pct: Annotated[float, Field(ge=0, le=100, allow_inf_nan=False)] | None = None


class RunIn(Strict):
    name: Name
    pod_id: Annotated[str, Field(min_length=1, max_length=32)]
    total_steps: Annotated[int, Field(ge=1)] | None = None
    heartbeat_timeout_s: Seconds = 120.0
    checkpoint_grace_s: Annotated[float, Field(ge=0, le=86_400), BeforeValidator(_finite)] = 300.0
    policy: PolicyIn | None = None


class DirectiveState(BaseModel):
    action: Action
    reason: Reason | None
    message: str | None


class CheckpointIn(Strict):
    step: Annotated[int, Field(ge=0)]
    path: Annotated[str, Field(min_length=1, max_length=4096)]


class CheckpointOut(BaseModel):
    step: int
    path: str
    at: datetime


class PeakOut(BaseModel):
    gpu_uuid: str
    gpu_name: str
    peak_used_bytes: int
    memory_total_bytes: int | None
    at: datetime


class RunOut(BaseModel):
    id: str
    budget_id: str
    pod_id: str
    name: str
    status: RunStatus
    phase: Phase | None
    step: int
    total_steps: int | None
    heartbeat_timeout_s: float
    checkpoint_grace_s: float
    last_heartbeat_at: datetime | None
    checkpoint: CheckpointOut | None
    directive: DirectiveState
    policy: dict[str, float]
    peaks: list[PeakOut]
    created_at: datetime


class RunCreated(RunOut):
    token: str = Field(description="The job's token. Shown once: store it now.")


Metric = float | int | str | bool | None


class HeartbeatIn(Strict):
    step: Annotated[int, Field(ge=0)]
    total_steps: Annotated[int, Field(ge=1)] | None = None
    phase: Phase | None = None
    status: RunStatus = RunStatus.RUNNING
    checkpoint: CheckpointIn | None = None
    metrics: (
        Annotated[dict[Annotated[str, Field(max_length=100)], Metric], Field(max_length=100)] | None
    ) = None


class BudgetBrief(BaseModel):
    spent_usd: UsdText
    committed_usd: UsdText
    effective_ceiling_usd: UsdText
    remaining_usd: UsdText
    burn_rate_usd_per_hour: UsdText


class DirectiveOut(BaseModel):
    action: Action
    reason: Reason | None
    message: str | None
    deadline: datetime | None
    budget: BudgetBrief
    next_heartbeat_s: float


class RunEventIn(Strict):
    category: Category = Field(description="harness, model or provider")
    kind: Annotated[str, Field(max_length=40)] | None = Field(
        None, description='e.g. "oom": an out-of-memory crash is always a model failure'
    )
    severity: Severity = Severity.WARNING
    message: Text
    evidence: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _job_categories(self) -> RunEventIn:
        if self.category not in (Category.HARNESS, Category.MODEL, Category.PROVIDER):
            raise ValueError("category must be harness, model or provider")
        if self.kind == "oom":
            self.category = Category.MODEL
        return self


# --- extensions ----------------------------------------------------------------------


class ExtensionIn(Strict):
    amount_usd: PositiveUsd
    reason: Text


class DecisionIn(Strict):
    note: Annotated[str, Field(max_length=2000)] | None = None


class ExtensionOut(BaseModel):
    id: str
    budget_id: str
    amount_usd: UsdText
    reason: str
    requested_by: Requester
    run_id: str | None
    state: ExtensionState
    created_at: datetime
    decided_at: datetime | None
    decision_note: str | None


# --- events and tokens ---------------------------------------------------------------


class EventOut(BaseModel):
    id: int
    at: datetime
    severity: Severity
    category: Category
    subject: str
    budget_id: str | None
    message: str
    evidence: dict[str, Any]


class TokenIn(Strict):
    role: Role = Field(
        description="operator, viewer, or agent (with pod_id); job tokens come with their run"
    )
    label: Annotated[str, Field(max_length=200)] | None = None
    pod_id: Annotated[str, Field(max_length=32)] | None = None

    @model_validator(mode="after")
    def _role_fits(self) -> TokenIn:
        if self.role is Role.JOB:
            raise ValueError("job tokens are issued with their run (POST /v1/budgets/{id}/runs)")
        if (self.role is Role.AGENT) != (self.pod_id is not None):
            raise ValueError("an agent token needs pod_id, and only an agent token takes one")
        return self


class TokenOut(BaseModel):
    role: Role
    label: str | None
    pod_id: str | None
    token: str = Field(description="Shown once: store it now.")


# --- telemetry -----------------------------------------------------------------------

Percent = Annotated[float, Field(ge=0, le=100, allow_inf_nan=False)]
Bytes = Annotated[int, Field(ge=0, le=2**63 - 1)]


class GpuProcessIn(Strict):
    pid: Annotated[int, Field(ge=0, le=2**32)]
    used_memory_bytes: Bytes | None = None


class GpuSampleIn(Strict):
    uuid: Annotated[str, Field(min_length=1, max_length=100)]
    index: Annotated[int, Field(ge=0, le=1023)]
    name: Annotated[str, Field(max_length=100)] = ""
    utilization_pct: Percent | None = None
    utilization_max_pct: Percent | None = None
    memory_total_bytes: Bytes | None = None
    memory_used_bytes: Bytes | None = None
    memory_free_bytes: Bytes | None = None
    power_w: Annotated[float, Field(ge=0, le=100_000, allow_inf_nan=False)] | None = None
    temperature_c: Annotated[float, Field(ge=-100, le=300, allow_inf_nan=False)] | None = None
    processes: Annotated[list[GpuProcessIn], Field(max_length=1024)] | None = None
    clock_event_reasons: Bytes | None = None


class DeviceProblemIn(Strict):
    index: Annotated[int, Field(ge=0, le=1023)]
    uuid: Annotated[str, Field(max_length=100)] | None = None
    error: Annotated[str, Field(max_length=2000)]
    lost: bool = False


class ReadingIn(Strict):
    at: datetime
    gpus: Annotated[list[GpuSampleIn], Field(max_length=64)] = []
    problems: Annotated[list[DeviceProblemIn], Field(max_length=64)] = []
    available: bool = True
    unavailable_reason: Annotated[str, Field(max_length=2000)] | None = None
    driver_version: Annotated[str, Field(max_length=100)] | None = None


class TelemetryIn(Strict):
    readings: Annotated[list[ReadingIn], Field(min_length=1, max_length=1000)]


class TelemetryAccepted(BaseModel):
    readings: int
    samples: int
