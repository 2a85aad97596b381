"""Request and response shapes. Money comes in as a string or a number, goes out as a string.

A response is a read model of the services, its schema derived from the read model's
dataclasses (read_models.py); the requests are written here.
"""

from __future__ import annotations

import math
from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from governor.api.read_models import api_model
from governor.api.safe_input import (
    MAX_INT64,
    ClientDate,
    ClientTime,
    free_text,
    json_limits,
    line,
)
from governor.domain.health import MAX_WINDOW, Goal, Measure, Response
from governor.domain.health import Kind as HealthKind
from governor.domain.model import (
    Action,
    Category,
    Phase,
    Reason,
    Role,
    RunStatus,
    Severity,
)
from governor.domain.money import format_usd, parse_usd
from governor.domain.preflight.gpus import gpu_class, same_model
from governor.domain.preflight.plan import (
    Attention,
    Checkpointing,
    CrossEntropy,
    Dequantize,
    Evidence,
    ExpertStorage,
    GpuGroup,
    Hardware,
    KernelFormat,
    MemoryModel,
    Model,
    Moe,
    Plan,
    PlanPhase,
    Sharding,
    Storage,
    Training,
    WeightsBreakdown,
)
from governor.domain.preflight.rules import Finding
from governor.services.event_model import Event
from governor.services.fleet.budget_model import Budget
from governor.services.fleet.pod_model import Pod, ResumedPod
from governor.services.money.extension_model import Extension
from governor.services.monitoring.agent_reports import Accepted, NodeAccepted
from governor.services.monitoring.metric_point_model import MetricPoint
from governor.services.plans.plan_check_model import AdmittedPlan, PlanCheck
from governor.services.runs.run_model import CreatedRun, Run, RunDirective
from governor.services.security import token_model
from governor.services.stopping.stop_order_model import StopOrder

_MONEY_SCHEMA = WithJsonSchema(
    {"anyOf": [{"type": "string"}, {"type": "number"}], "examples": ["12.50"]}
)
Usd = Annotated[Decimal, BeforeValidator(parse_usd), _MONEY_SCHEMA]
PositiveUsd = Annotated[
    Decimal, BeforeValidator(lambda v: parse_usd(v, positive=True)), _MONEY_SCHEMA
]
UsdText = Annotated[str, Field(examples=["12.50"], description="decimal dollars")]


def _finite(value: Any) -> Any:
    """NaN and the infinities refused by name; anything else is the field's own to parse."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("must be a finite number")
    return value


Seconds = Annotated[float, Field(gt=0, le=86_400), BeforeValidator(_finite)]
GpuUuids = Annotated[list[line(100, min_length=1)], Field(min_length=1, max_length=64)]
Pid = Annotated[int, Field(ge=0, le=2**32)]
ProcessPids = Annotated[list[Pid], Field(min_length=1, max_length=64)]
ProcessPattern = line(200, min_length=1, pattern=r"\S")
Name = line(200, min_length=1, pattern=r"\S")
Text = free_text(2000, min_length=1, pattern=r"\S")
Note = free_text(2000)
Step = Annotated[int, Field(ge=0, le=MAX_INT64)]
Steps = Annotated[int, Field(ge=1, le=MAX_INT64)]
JSON_BYTES = 16 * 1024  # the most a client's JSON document (evidence, metrics) may take
Node = Annotated[
    line(253, min_length=1, pattern=r"^[A-Za-z0-9]([A-Za-z0-9._:-]*[A-Za-z0-9])?$"),
    Field(
        description="a machine's name, as its node agent reports it (a Kubernetes node name, "
        "a hostname)",
        examples=["gpu-node-7"],
    ),
]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


Item = TypeVar("Item")


class Page(BaseModel, Generic[Item]):
    """One page of a list: follow `next_cursor` (as `?cursor=`) until it is null."""

    items: list[Item]
    next_cursor: str | None = Field(
        description="pass it as `cursor` for the next page; null on the last page"
    )


def page_of(item: type[BaseModel]) -> type[BaseModel]:
    """The page of `item`s, for a route's response_model."""
    return Page[item]  # type: ignore[valid-type]  # a model built at run time


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
    note: Note | None = None

    require_plan: bool | None = Field(
        None,
        description="admit pods (and their runs) only under a plan that is not no_go; unset: "
        "the server's GOVERNOR_REQUIRE_PLAN",
    )

    @model_validator(mode="after")
    def _reserve_below_ceiling(self) -> BudgetIn:
        if self.reserve_usd >= self.ceiling_usd:
            raise ValueError("reserve_usd must be less than ceiling_usd")
        return self


BudgetOut = api_model(Budget)


class CloseIn(Strict):
    reason: Text = "closed by an operator"
    storage_deleted: bool = Field(
        False,
        description="the stopped pods' storage has been deleted (the governor never deletes): "
        "they are released and stop counting; without it their storage keeps counting",
    )


# --- pods ----------------------------------------------------------------------------


class PodIn(Strict):
    provider: line(40, min_length=1)
    provider_ref: line(200, min_length=1)
    name: Name | None = Field(
        None,
        description="what people call it, unique within its budget; unset: its provider_ref",
    )
    hourly_rate_usd: PositiveUsd | None = None
    gpu_type: line(100) | None = None
    gpu_count: Annotated[int, Field(ge=1, le=1024)] | None = None
    storage_gb: Annotated[float, Field(ge=0, le=1_000_000), BeforeValidator(_finite)] = 0.0
    storage_usd_per_gb_month: Usd = Decimal(0)
    stopped_storage_usd_per_gb_month: Usd | None = None
    local: bool = Field(False, description="this server samples the pod's GPUs itself")
    gpu_uuids: GpuUuids | None = Field(
        None,
        description="the GPUs that are the pod's, by UUID, on a machine it shares; unset: "
        "every GPU its telemetry reports",
    )
    process_pids: ProcessPids | None = Field(
        None,
        description="the pod's processes by PID, as NVML reports them (host PIDs), on a machine "
        "it shares: the GPU rules judge the memory they hold; unset: every process's",
    )
    process_pattern: ProcessPattern | None = Field(
        None,
        description="the pod's processes by name: a glob (`*`, `?`, `[...]`) matching NVML's "
        "process name or its last part, e.g. `python3*`; with process_pids, either matches",
    )
    node: Node | None = Field(
        None, description="the machine the pod runs on: that machine's node agent reports for it"
    )
    persistent_filesystem: line(200, min_length=1) | None = Field(
        None,
        description="terminate-only providers (Lambda): the attached filesystem a checkpoint "
        "must be saved on before the governor may terminate the pod",
    )
    plan_id: line(32) | None = Field(
        None, description="the checked plan it runs under: its verdict admits the pod or not"
    )


class StopIn(Strict):
    reason: Text = "stopped by an operator"


class ResumeIn(Strict):
    reason: Text = "resumed by an operator"


StopOrderOut = api_model(StopOrder)
PodOut = api_model(Pod)


# --- runs ----------------------------------------------------------------------------


class PolicyIn(Strict):
    """Per-run thresholds of the GPU and progress rules; unset ones keep the server's."""

    idle_util_pct: Annotated[float, Field(gt=0, le=100, allow_inf_nan=False)] | None = None
    idle_window_s: Seconds | None = None
    stall_window_s: Seconds | None = None
    compile_allowance_s: Seconds | None = None
    headroom_pct: Annotated[float, Field(ge=0, le=100, allow_inf_nan=False)] | None = None
    health: Annotated[list[HealthRuleIn], Field(max_length=32)] | None = Field(
        None,
        description="training-health rules on the run's metrics, over the server's defaults",
    )


class HealthRuleIn(Strict):
    """A training-health rule over one heartbeat metric (docs/health.md)."""

    kind: HealthKind
    metric: line(100, min_length=1)
    action: Response = Response.WARN
    window: Annotated[int, Field(ge=1, le=MAX_WINDOW)] = 20
    threshold: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 1e-8
    measure: Measure = Measure.VARIANCE
    factor: Annotated[float, Field(gt=1, le=1e6, allow_inf_nan=False)] = 2.0
    goal: Goal = Goal.MIN


class RunIn(Strict):
    name: Name
    pod_id: line(32, min_length=1)
    total_steps: Steps | None = None
    heartbeat_timeout_s: Seconds = 120.0
    checkpoint_grace_s: Annotated[float, Field(ge=0, le=86_400), BeforeValidator(_finite)] = 300.0
    policy: PolicyIn | None = None


class CheckpointIn(Strict):
    step: Step
    path: line(4096, min_length=1)


DirectiveState = api_model(RunDirective, name="DirectiveState")  # before the run's own
RunOut = api_model(Run)
RunCreated = api_model(CreatedRun, name="RunCreated")
MetricPointOut = api_model(MetricPoint)
ResumedOut = api_model(ResumedPod, name="ResumedOut")


Metric = float | int | str | bool | None


class HeartbeatIn(Strict):
    step: Step
    total_steps: Steps | None = None
    phase: Phase | None = None
    status: RunStatus = RunStatus.RUNNING
    checkpoint: CheckpointIn | None = None
    metrics: (
        Annotated[dict[line(100), Metric], Field(max_length=64), json_limits(JSON_BYTES)] | None
    ) = None

    @field_validator("status")
    @classmethod
    def _a_job_can_say(cls, status: RunStatus) -> RunStatus:
        if status is RunStatus.LOST:
            raise ValueError("'lost' is the governor's word for a silent job, not a job's own")
        return status


class BudgetBrief(BaseModel):
    spent_usd: UsdText
    committed_usd: UsdText
    effective_ceiling_usd: UsdText
    remaining_usd: UsdText
    burn_rate_usd_per_hour: UsdText
    as_of: datetime = Field(
        description="when these figures were taken: the latest enforcement pass over the budget"
    )


class DirectiveOut(BaseModel):
    action: Action
    reason: Reason | None
    message: str | None
    deadline: datetime | None
    budget: BudgetBrief
    next_heartbeat_s: float


class RunEventIn(Strict):
    category: Category = Field(description="harness, model or provider")
    kind: line(40) | None = Field(
        None, description='e.g. "oom": an out-of-memory crash is always a model failure'
    )
    severity: Severity = Severity.WARNING
    message: Text
    evidence: Annotated[dict[str, Any], json_limits(JSON_BYTES)] | None = None

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
    note: Note | None = None


ExtensionOut = api_model(Extension)


# --- events and tokens ---------------------------------------------------------------


EventOut = api_model(Event)


class TokenIn(Strict):
    role: Role = Field(
        description="operator, viewer, or agent (with pod_id, or node for a node agent); job "
        "tokens come with their run"
    )
    label: line(200) | None = Field(None, description="who or what it is for")
    pod_id: line(32) | None = None
    node: Node | None = None
    expires_at: ClientTime | None = Field(None, description="when it stops working; never if unset")

    @model_validator(mode="after")
    def _role_fits(self) -> TokenIn:
        if self.role is Role.JOB:
            raise ValueError("job tokens are issued with their run (POST /v1/budgets/{id}/runs)")
        bound = (self.pod_id is not None) + (self.node is not None)
        if self.role is Role.AGENT and bound != 1:
            raise ValueError("an agent token needs either pod_id (one pod) or node (a machine)")
        if self.role is not Role.AGENT and bound:
            raise ValueError("only an agent token takes pod_id or node")
        return self


TokenInfo = api_model(token_model.TokenInfo, name="TokenInfo", described=True)
TokenOut = api_model(token_model.IssuedToken, name="TokenOut")


# --- telemetry -----------------------------------------------------------------------

Percent = Annotated[float, Field(ge=0, le=100, allow_inf_nan=False)]
Bytes = Annotated[int, Field(ge=0, le=MAX_INT64)]


class GpuProcessIn(Strict):
    pid: Pid
    used_memory_bytes: Bytes | None = None
    name: line(200) | None = None


class GpuSampleIn(Strict):
    uuid: line(100, min_length=1)
    index: Annotated[int, Field(ge=0, le=1023)]
    name: line(100) = ""
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
    uuid: line(100) | None = None
    error: Note
    lost: bool = False


class ReadingIn(Strict):
    at: ClientTime
    gpus: Annotated[list[GpuSampleIn], Field(max_length=64)] = []
    problems: Annotated[list[DeviceProblemIn], Field(max_length=64)] = []
    available: bool = True
    unavailable_reason: Note | None = None
    driver_version: line(100) | None = None


class TelemetryIn(Strict):
    readings: Annotated[list[ReadingIn], Field(min_length=1, max_length=1000)]
    gpu_uuids: GpuUuids | None = Field(
        None,
        description="a pod's agent: the GPUs that are the pod's (`governor agent --gpus`); "
        "the readings may show the machine's others, as context",
    )
    process_pids: ProcessPids | None = Field(
        None, description="a pod's agent: the pod's processes by PID (`governor agent --pids`)"
    )
    process_pattern: ProcessPattern | None = Field(
        None,
        description="a pod's agent: the pod's processes by name, a glob "
        "(`governor agent --process-pattern`)",
    )


TelemetryAccepted = api_model(Accepted, name="TelemetryAccepted")
NodeTelemetryAccepted = api_model(NodeAccepted, name="NodeTelemetryAccepted")


# --- plans (preflight admission) -------------------------------------------------------
# The plan document follows the "preflight-plan/0.1" schema, or "preflight-plan/0.2" for
# several GPU models in one plan (docs/api.md, Preflight plans); the two differ only in
# `hardware`. Fields marked "for the record" are stored with the verdict but decide nothing.

Gib = Annotated[float, Field(ge=0, le=1_000_000, allow_inf_nan=False)]
Params = Annotated[float, Field(ge=0, le=1e15, allow_inf_nan=False)]
Hours = Annotated[Decimal, Field(ge=0, le=8760)]
Count = Annotated[int, Field(ge=1, le=10_000_000)]
Label = line(100, min_length=1)
_AS_TEXT = PlainSerializer(format_usd, when_used="json")  # stored as "4.59", not "4.590000"
PlanUsd = Annotated[Usd, _AS_TEXT]
PlanRate = Annotated[PositiveUsd, _AS_TEXT]


PLAN_V1, PLAN_V2 = "preflight-plan/0.1", "preflight-plan/0.2"
GpuCount = Annotated[int, Field(ge=1, le=1024)]


class PlanHostIn(Strict):
    """What every GPU of the plan shares: where it runs, and how its rates were read."""

    provider: Label | None = None  # for the record
    cloud_tier: Label | None = None  # for the record
    nodes: GpuCount = 1
    rate_source: Note | None = None  # for the record
    rate_quoted_at: ClientDate = Field(description="the day the rate was read (YYYY-MM-DD)")
    billing_increment_s: Annotated[int, Field(ge=1, le=86_400)]
    interruptible: bool = Field(False, description="spot: exempt from the low-rate check")


class PlanGpusIn(Strict):
    """0.2: the plan's GPUs of one model."""

    gpu_type: Label
    gpu_count: GpuCount = Field(description="GPUs of this model per node")
    usable_mib_per_gpu: Count | None = Field(
        None,
        description="MiB per GPU the driver reports; unset: the GPU table's figure (a model "
        "not in the table needs it)",
    )
    rate_usd_per_gpu_hour: PlanRate

    @model_validator(mode="after")
    def _memory_known(self) -> PlanGpusIn:
        if self.usable_mib_per_gpu is None and gpu_class(self.gpu_type) is None:
            raise ValueError(
                f"{self.gpu_type!r} is not in the GPU table: give its usable_mib_per_gpu (the "
                "MiB per GPU its driver reports)"
            )
        return self

    def group(self) -> GpuGroup:
        return GpuGroup(
            self.gpu_type, self.gpu_count, self.usable_mib_per_gpu, self.rate_usd_per_gpu_hour
        )


class PlanHardwareIn(PlanHostIn, PlanGpusIn):
    """0.1: one GPU model, its usable memory declared."""

    usable_mib_per_gpu: Count  # type: ignore[assignment]

    def groups(self) -> tuple[GpuGroup, ...]:
        return (self.group(),)


class PlanMixedHardwareIn(PlanHostIn):
    """0.2: one group per GPU model."""

    gpus: Annotated[list[PlanGpusIn], Field(min_length=1, max_length=16)]

    @field_validator("gpus")
    @classmethod
    def _one_group_per_model(cls, gpus: list[PlanGpusIn]) -> list[PlanGpusIn]:
        for i, later in enumerate(gpus):
            for earlier in gpus[:i]:
                if same_model(earlier.gpu_type, later.gpu_type):
                    raise ValueError(
                        f"{earlier.gpu_type!r} and {later.gpu_type!r} are the same GPU model: "
                        "give one group per model, its GPUs counted together"
                    )
        return gpus

    def groups(self) -> tuple[GpuGroup, ...]:
        return tuple(g.group() for g in self.gpus)


class PlanPhaseIn(Strict):
    name: Label = Field(description="canary, train and checkpoint are the names the rules read")
    expected_hours: Hours
    max_hours: Annotated[Decimal, Field(gt=0, le=8760)]
    gpu_held: bool = Field(True, description="billed for GPUs during this phase")
    min_optimizer_steps: Step | None = None

    @model_validator(mode="after")
    def _max_covers_expected(self) -> PlanPhaseIn:
        if self.max_hours < self.expected_hours:
            raise ValueError(f"phase {self.name!r}: max_hours must be at least expected_hours")
        return self


class PlanStorageIn(Strict):
    kind: Label  # for the record
    gb: Annotated[Decimal, Field(ge=0, le=10_000_000)]
    usd_per_gb_month: PlanUsd
    hours_held: Hours


class PlanMoeIn(Strict):
    num_experts: Count  # for the record
    top_k: Count  # for the record
    expert_params: Params
    experts_storage: ExpertStorage
    expert_quantizer: Label = Field(description='"none", "bnb_linear4bit", "experts4bit", ...')
    reshard_after_forward: bool = True
    expert_parallel: Count = Field(1, description="GPUs the experts are spread over (EP degree)")

    @model_validator(mode="after")
    def _top_k_of_experts(self) -> PlanMoeIn:
        if self.top_k > self.num_experts:
            raise ValueError("top_k must not exceed num_experts")
        if self.expert_parallel > self.num_experts:
            raise ValueError("expert_parallel must not exceed num_experts")
        return self


class PlanModelIn(Strict):
    params_total: Annotated[float, Field(gt=0, le=1e15, allow_inf_nan=False)]
    vocab_size: Count
    hidden_size: Count
    num_layers: Count
    num_heads: Count
    moe: PlanMoeIn | None = None
    final_logit_softcapping: Annotated[float, Field(gt=0, le=1e6, allow_inf_nan=False)] | None = (
        Field(None, description="the output head's tanh cap (e.g. 30.0), if the model has one")
    )

    @model_validator(mode="after")
    def _experts_within_total(self) -> PlanModelIn:
        if self.moe is not None and self.moe.expert_params > self.params_total:
            raise ValueError("moe.expert_params must not exceed params_total")
        return self


class PlanShardingIn(Strict):
    kind: Sharding = Sharding.NONE
    shards: Count = Field(1, description="GPUs the model state is split over")
    forward_prefetch: bool = False
    prefetch_depth: Annotated[int, Field(ge=1, le=16)] = Field(
        1, description="units gathered ahead when forward_prefetch is on"
    )
    reshard_after_forward: bool = Field(
        True, description="false keeps every gathered unit until its backward (SHARD_GRAD_OP)"
    )
    largest_unit_params: Params | None = Field(
        None, description="params of the largest wrapped unit; unset: an average layer"
    )

    @model_validator(mode="after")
    def _shards_fit_kind(self) -> PlanShardingIn:
        if (self.kind is Sharding.NONE) != (self.shards == 1):
            raise ValueError('kind "none" means shards 1; fsdp and zero3 need at least 2 shards')
        return self


class PlanTrainingIn(Strict):
    seq_len: Count
    micro_batch: Count
    lora_rank: Count | None = None  # for the record
    trainable_params: Params
    adapter_dtype: Label | None = None  # for the record: PEFT keeps adapters in fp32
    optimizer: Label = Field(description='a name with "8bit" in it counts 10 B per param')
    grad_checkpointing: Checkpointing
    attention_impl: Attention
    ce_impl: CrossEntropy
    sharding: PlanShardingIn = PlanShardingIn()
    dequantize: Dequantize = Field(
        Dequantize.NONE, description="what the recipe dequantizes to BF16 beside the source"
    )
    kernel_format: KernelFormat = Field(
        KernelFormat.NONE, description="the low-precision format the training GEMMs consume"
    )
    kernel_layouts: Annotated[int, Field(ge=1, le=4)] = Field(
        2, description="weight copies kept beside the stored ones for the kernels (row/column)"
    )


class PlanWeightsIn(Strict):
    quantized_params: Params
    bytes_per_quantized: Annotated[float, Field(ge=0, le=8, allow_inf_nan=False)]
    unquantized_params: Params
    bytes_per_unquantized: Annotated[float, Field(ge=0, le=8, allow_inf_nan=False)]


class PlanTransientIn(Strict):
    name: Label
    gib: Gib


class PlanMemoryIn(Strict):
    """GiB per GPU at the plan's peak phase, component by component."""

    runtime_overhead: Gib
    nccl: Gib
    weights: Gib
    weights_breakdown: PlanWeightsIn
    adapters_grads_optimizer: Gib
    activations: Gib
    logits_peak: Gib
    transients: Annotated[list[PlanTransientIn], Field(max_length=50)] = []
    fragmentation_margin: Gib
    modeled_total: Gib
    peak_phase: Label | None = None  # for the record


class PlanEvidenceIn(Strict):
    measured_peak_mib: Annotated[int, Field(ge=0, le=10_000_000)] | None = None
    measured_on: ClientDate | None = None
    same_config: bool = Field(False, description="same model, recipe and GPU type")


class PlanIn(Strict):
    schema_: Literal["preflight-plan/0.1", "preflight-plan/0.2"] = Field(PLAN_V1, alias="schema")
    job_id: Name
    hardware: PlanHardwareIn | PlanMixedHardwareIn = Field(
        description="0.1: one GPU model (gpu_type, gpu_count, usable_mib_per_gpu, "
        "rate_usd_per_gpu_hour); 0.2: `gpus`, one group per GPU model"
    )
    phases: Annotated[list[PlanPhaseIn], Field(min_length=1, max_length=50)]
    storage: Annotated[list[PlanStorageIn], Field(max_length=50)] = []
    other_costs_usd: PlanUsd = Decimal(0)
    model: PlanModelIn
    training: PlanTrainingIn
    memory_per_gpu_gib: PlanMemoryIn
    evidence: PlanEvidenceIn = PlanEvidenceIn()

    @field_validator("hardware", mode="wrap")
    @classmethod
    def _hardware_of_its_schema(
        cls, value: Any, _: ValidatorFunctionWrapHandler, info: ValidationInfo
    ) -> PlanHardwareIn | PlanMixedHardwareIn:
        """The hardware is read as the document's schema version writes it (0.1 by default)."""
        shape = PlanMixedHardwareIn if info.data.get("schema_") == PLAN_V2 else PlanHardwareIn
        return value if isinstance(value, shape) else shape.model_validate(value)

    @model_validator(mode="after")
    def _shards_within_gpus(self) -> PlanIn:
        gpus = self.hardware.nodes * sum(g.gpu_count for g in self.hardware.groups())
        if self.training.sharding.shards > gpus:
            raise ValueError(f"training.sharding.shards must not exceed the plan's {gpus} GPUs")
        moe = self.model.moe
        if moe is not None and moe.expert_parallel > gpus:
            raise ValueError(f"model.moe.expert_parallel must not exceed the plan's {gpus} GPUs")
        unit = self.training.sharding.largest_unit_params
        if unit is not None and unit > self.model.params_total:
            raise ValueError("training.sharding.largest_unit_params must not exceed params_total")
        return self

    def document(self) -> dict[str, Any]:
        """The plan as JSON, as it is stored with its verdict."""
        return self.model_dump(mode="json", by_alias=True)

    def to_plan(self) -> Plan:
        hw, t, m, mem = self.hardware, self.training, self.model, self.memory_per_gpu_gib
        return Plan(
            job_id=self.job_id,
            hardware=Hardware(
                groups=hw.groups(),
                nodes=hw.nodes,
                rate_quoted_at=hw.rate_quoted_at,
                billing_increment_s=hw.billing_increment_s,
                interruptible=hw.interruptible,
            ),
            phases=tuple(PlanPhase(**p.model_dump()) for p in self.phases),
            storage=tuple(Storage(**s.model_dump(exclude={"kind"})) for s in self.storage),
            other_costs_usd=self.other_costs_usd,
            model=Model(
                **m.model_dump(exclude={"moe"}),
                moe=None if m.moe is None else Moe(**m.moe.model_dump(exclude={"top_k"})),
            ),
            training=Training(
                **t.model_dump(exclude={"lora_rank", "adapter_dtype", "sharding"}),
                sharding=t.sharding.kind,
                shards=t.sharding.shards,
                forward_prefetch=t.sharding.forward_prefetch,
                prefetch_depth=t.sharding.prefetch_depth,
                reshard_after_forward=t.sharding.reshard_after_forward,
                largest_unit_params=t.sharding.largest_unit_params,
            ),
            memory=MemoryModel(
                **mem.model_dump(exclude={"weights_breakdown", "transients", "peak_phase"}),
                weights_breakdown=WeightsBreakdown(**mem.weights_breakdown.model_dump()),
                transients=tuple((x.name, x.gib) for x in mem.transients),
            ),
            evidence=Evidence(**self.evidence.model_dump()),
        )


class OverrideIn(Strict):
    reason: free_text(2000, min_length=1) = Field(
        description="why this no_go may go ahead anyway (recorded, and shown in the report)"
    )


class ReleaseIn(Strict):
    measured_peak_gib: Annotated[float, Field(ge=0, le=10_000, allow_inf_nan=False)] = Field(
        description="the canary's measured peak memory per GPU, in GiB"
    )
    reason: free_text(2000, min_length=1) = Field(description="where the figure comes from")


def read_plan(document: dict[str, Any]) -> Plan:
    """A plan document as it was stored with its verdict, read back for a re-check."""
    return PlanIn.model_validate(document).to_plan()


PlanReasonOut = api_model(Finding)


PlanCheckOut = api_model(PlanCheck)
AdmittedPlanOut = api_model(AdmittedPlan, described=True)
