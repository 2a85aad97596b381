"""Request and response shapes. Money comes in as a string or a number, goes out as a string.

A response is a read model of the services, its schema derived from the read model's
dataclasses (read_models.py); the requests are written here, the plan document beside
preflight admission (governor.services.plans.document).
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Annotated, Any, Generic, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    Field,
    field_validator,
    model_validator,
)

from governor.api.read_models import api_model
from governor.domain.health import MAX_WINDOW, Goal, Measure, Response
from governor.domain.health import Kind as HealthKind
from governor.domain.model import (
    Category,
    OomForesight,
    Phase,
    Role,
    RunStatus,
    Severity,
)
from governor.domain.teams import DEFAULT_TIME_ZONE, PeriodKind, time_zone
from governor.services.events import Event
from governor.services.fleet.budget_model import Budget
from governor.services.fleet.budgets import ADOPT_LABELLED_PODS_DOC
from governor.services.fleet.pod_model import Pod, ResumedPod
from governor.services.fleet.team_model import Team, TeamExtension
from governor.services.jobs import checkins
from governor.services.money.extension_model import Extension
from governor.services.monitoring.agent_reports import NodeAccepted, PodAccepted
from governor.services.monitoring.metric_point_model import MetricPoint
from governor.services.plans.launch_model import Launch
from governor.services.plans.plan_check_model import AdmittedPlan, PlanCheck
from governor.services.runs.run_model import CreatedRun, Run, RunDirective
from governor.services.security import token_model
from governor.services.security.safe_input import (
    MAX_INT64,
    ClientTime,
    Name,
    Note,
    PositiveUsd,
    Step,
    Strict,
    Usd,
    free_text,
    json_limits,
    line,
)
from governor.services.security.signin_model import DeviceOutcome, DeviceSignin
from governor.services.stopping.stop_order_model import StopOrder
from governor.services.view.team_report import TeamReport


def _finite(value: Any) -> Any:
    """NaN and the infinities refused by name; anything else is the field's own to parse."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("must be a finite number")
    return value


Seconds = Annotated[float, Field(gt=0, le=86_400), BeforeValidator(_finite)]
GpuUuids = Annotated[
    list[Annotated[str, line(100, min_length=1)]], Field(min_length=1, max_length=64)
]
Pid = Annotated[int, Field(ge=0, le=2**32)]
ProcessPids = Annotated[list[Pid], Field(min_length=1, max_length=64)]
ProcessPattern = Annotated[str, line(200, min_length=1, pattern=r"\S")]
Text = Annotated[str, free_text(2000, min_length=1, pattern=r"\S")]
Steps = Annotated[int, Field(ge=1, le=MAX_INT64)]
JSON_BYTES = 16 * 1024  # the most a client's JSON document (evidence, metrics) may take
Node = Annotated[
    Annotated[str, line(253, min_length=1, pattern=r"^[A-Za-z0-9]([A-Za-z0-9._:-]*[A-Za-z0-9])?$")],
    Field(
        description="a machine's name, as its node agent reports it (a Kubernetes node name, "
        "a hostname)",
        examples=["gpu-node-7"],
    ),
]


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


Thresholds = Annotated[list[Annotated[int, Field(ge=1, le=100)]], Field(max_length=10)]


class BudgetIn(Strict):
    name: Name
    ceiling_usd: PositiveUsd
    reserve_usd: Usd = Decimal(0)
    storage_tail_hours: Annotated[float, Field(ge=0, le=8760), BeforeValidator(_finite)] = 0.0
    alert_thresholds: Thresholds = [50, 80, 90]  # noqa: RUF012 (pydantic copies it)
    note: Note | None = None
    team: Name | None = Field(
        None, description="the team (its id or name) that holds the budget; unset: the default team"
    )

    require_plan: bool | None = Field(
        None,
        description="admit pods (and their runs) only under a plan that is not no_go; unset: "
        "the server's GOVERNOR_REQUIRE_PLAN",
    )
    adopt_labelled_pods: bool = Field(False, description=ADOPT_LABELLED_PODS_DOC)

    @model_validator(mode="after")
    def _reserve_below_ceiling(self) -> BudgetIn:
        if self.reserve_usd >= self.ceiling_usd:
            raise ValueError("reserve_usd must be less than ceiling_usd")
        return self


BudgetOut = api_model(Budget)


# --- teams ---------------------------------------------------------------------------


class TeamIn(Strict):
    name: Name
    time_zone: Annotated[str, line(64, min_length=1)] = Field(
        DEFAULT_TIME_ZONE,
        description="the IANA time zone the team's periods run in (e.g. Europe/Berlin)",
    )
    note: Note | None = None
    org_approval_over_usd: Usd | None = Field(
        None,
        description="an extension of more than this needs an org-wide operator or approver; "
        "unset: the team's own may approve any",
    )

    @field_validator("time_zone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        time_zone(value)
        return value


TeamOut = api_model(Team)
TeamExtensionOut = api_model(TeamExtension)
TeamReportOut = api_model(TeamReport)


class TeamCeilingIn(Strict):
    ceiling_usd: PositiveUsd
    period: PeriodKind = Field(
        PeriodKind.MONTH,
        description="`month`: the calendar month; `days`: every `period_days` days from the "
        "day the ceiling is declared; both in the team's time zone",
    )
    period_days: Annotated[int, Field(ge=1, le=366)] | None = None
    reason: Text

    @model_validator(mode="after")
    def _days_with_days(self) -> TeamCeilingIn:
        if (self.period is PeriodKind.DAYS) != (self.period_days is not None):
            raise ValueError("period_days is given with period `days`, and only then")
        return self


class AdoptionIn(Strict):
    adopt_labelled_pods: bool = Field(description=ADOPT_LABELLED_PODS_DOC)
    reason: Text = Field(description="why (recorded with who decided)")


class CloseIn(Strict):
    reason: Text = "closed by an operator"
    storage_deleted: bool = Field(
        False,
        description="the stopped pods' storage has been deleted (the governor never deletes): "
        "they are released and stop counting; without it their storage keeps counting",
    )


# --- pods ----------------------------------------------------------------------------


class PodIn(Strict):
    provider: Annotated[str, line(40, min_length=1)]
    provider_ref: Annotated[str, line(200, min_length=1)]
    name: Name | None = Field(
        None,
        description="what people call it, unique within its budget; unset: its provider_ref",
    )
    hourly_rate_usd: PositiveUsd | None = None
    gpu_type: Annotated[str, line(100)] | None = None
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
    persistent_filesystem: Annotated[str, line(200, min_length=1)] | None = Field(
        None,
        description="terminate-only pods (Lambda's, a one-time Spot instance): the attached "
        "filesystem (on AWS, an EBS volume id kept on termination) a checkpoint must be saved "
        "on before the governor may terminate the pod",
    )
    persistent_mount: Annotated[str, line(4096, min_length=1)] | None = Field(
        None,
        description="where persistent_filesystem is mounted on the pod, for a provider that "
        "cannot say (AWS); an absolute path",
    )
    acknowledge_loss: Text | None = Field(
        None,
        description="why the pod may be registered although a stop (or terminate) loses its "
        "workspace: without it such a pod is refused; kept on the pod and told, with who said it",
    )
    plan_id: Annotated[str, line(32)] | None = Field(
        None, description="the checked plan it runs under: its verdict admits the pod or not"
    )
    launch: Annotated[str, line(32)] | None = Field(
        None,
        description="the launch a gate accepted that it came from (its governor-launch label): "
        "the pod is tied to it and the launch's reservation is released",
    )


class StopIn(Strict):
    reason: Text = "stopped by an operator"


class ResumeIn(Strict):
    reason: Text = "resumed by an operator"


StopOrderOut = api_model(StopOrder)
LaunchOut = api_model(Launch)
PodOut = api_model(Pod)


# --- runs ----------------------------------------------------------------------------


class PolicyIn(Strict):
    """Per-run thresholds of the GPU and progress rules; unset ones keep the server's."""

    idle_util_pct: Annotated[float, Field(gt=0, le=100, allow_inf_nan=False)] | None = None
    idle_window_s: Seconds | None = None
    stall_window_s: Seconds | None = None
    compile_allowance_s: Seconds | None = None
    headroom_pct: Annotated[float, Field(ge=0, le=100, allow_inf_nan=False)] | None = None
    oom_foresight: OomForesight | None = Field(
        None,
        description="what an out-of-memory foreseen at the run's next memory event does: warn "
        "(an event, the default), checkpoint (the job is told to save first, reason "
        "oom-foreseen) or stop",
    )
    health: Annotated[list[HealthRuleIn], Field(max_length=32)] | None = Field(
        None,
        description="training-health rules on the run's metrics, over the server's defaults",
    )


class HealthRuleIn(Strict):
    """A training-health rule over one heartbeat metric (docs/health.md)."""

    kind: HealthKind
    metric: Annotated[str, line(100, min_length=1)]
    action: Response = Response.WARN
    window: Annotated[int, Field(ge=1, le=MAX_WINDOW)] = 20
    threshold: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 1e-8
    measure: Measure = Measure.VARIANCE
    factor: Annotated[float, Field(gt=1, le=1e6, allow_inf_nan=False)] = 2.0
    goal: Goal = Goal.MIN


class RunIn(Strict):
    name: Name
    pod_id: Annotated[str, line(32, min_length=1)]
    total_steps: Steps | None = None
    heartbeat_timeout_s: Seconds = 120.0
    checkpoint_grace_s: Annotated[float, Field(ge=0, le=86_400), BeforeValidator(_finite)] = 300.0
    policy: PolicyIn | None = None


class ClaimIn(Strict):
    claim: Annotated[str, line(200, min_length=1)] = Field(
        description="the launch's one-time claim secret (GOVERNOR_CLAIM in the job's environment)"
    )
    name: Name | None = Field(None, description="the run's name; the launch's or pod's if unset")
    total_steps: Steps | None = None


class AcknowledgeIn(Strict):
    reason: Text = "acknowledged by an operator"


class CheckpointIn(Strict):
    step: Step
    path: Annotated[str, line(4096, min_length=1)]


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
        Annotated[
            dict[Annotated[str, line(100)], Metric], Field(max_length=64), json_limits(JSON_BYTES)
        ]
        | None
    ) = None

    @field_validator("status")
    @classmethod
    def _a_job_can_say(cls, status: RunStatus) -> RunStatus:
        if status is RunStatus.LOST:
            raise ValueError("'lost' is the governor's word for a silent job, not a job's own")
        return status


BudgetBrief = api_model(checkins.BudgetBrief, name="BudgetBrief")
DirectiveOut = api_model(checkins.Directive)


class RunEventIn(Strict):
    category: Category = Field(description="harness, model or provider")
    kind: Annotated[str, line(40)] | None = Field(
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
        description="operator, approver, viewer, gate (a launcher's policy calls, carried in the "
        "gate's URL), or agent (with pod_id, or node for a node agent); job tokens come with "
        "their run"
    )
    label: Annotated[str, line(200)] | None = Field(None, description="who or what it is for")
    pod_id: Annotated[str, line(32)] | None = None
    node: Node | None = None
    expires_at: ClientTime | None = Field(None, description="when it stops working; never if unset")
    teams: list[Annotated[str, line(200, min_length=1)]] | None = Field(
        None,
        max_length=100,
        description="an operator's, approver's or viewer's token: the teams it is for, by id "
        "or name; unset or empty: every team (a team's operator: its own teams)",
    )

    @model_validator(mode="after")
    def _role_fits(self) -> TokenIn:
        if self.role is Role.JOB:
            raise ValueError("job tokens are issued with their run (POST /v1/budgets/{id}/runs)")
        if self.teams and self.role is Role.AGENT:
            raise ValueError("an agent token is bound to its pod or node, not to teams")
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
    name: Annotated[str, line(200)] | None = None


class GpuSampleIn(Strict):
    uuid: Annotated[str, line(100, min_length=1)]
    index: Annotated[int, Field(ge=0, le=1023)]
    name: Annotated[str, line(100)] = ""
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
    uuid: Annotated[str, line(100)] | None = None
    error: Note
    lost: bool = False


class ReadingIn(Strict):
    at: ClientTime
    gpus: Annotated[list[GpuSampleIn], Field(max_length=64)] = []  # noqa: RUF012 (copied)
    problems: Annotated[list[DeviceProblemIn], Field(max_length=64)] = []  # noqa: RUF012 (copied)
    available: bool = True
    unavailable_reason: Note | None = None
    driver_version: Annotated[str, line(100)] | None = None


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


TelemetryAccepted = api_model(PodAccepted, name="TelemetryAccepted")
NodeTelemetryAccepted = api_model(NodeAccepted, name="NodeTelemetryAccepted")


# --- plans (preflight admission) -----------------------------------------------------


class OverrideIn(Strict):
    reason: Annotated[str, free_text(2000, min_length=1)] = Field(
        description="why this no_go may go ahead anyway (recorded, and shown in the report)"
    )


class ReleaseIn(Strict):
    measured_peak_gib: Annotated[float, Field(ge=0, le=10_000, allow_inf_nan=False)] = Field(
        description="the canary's measured peak memory per GPU, in GiB"
    )
    reason: Annotated[str, free_text(2000, min_length=1)] = Field(
        description="where the figure comes from"
    )


PlanCheckOut = api_model(PlanCheck)
AdmittedPlanOut = api_model(AdmittedPlan, described=True)


DeviceSigninOut = api_model(DeviceSignin)
DeviceOutcomeOut = api_model(DeviceOutcome)


class DeviceTokenIn(Strict):
    device_code: Annotated[str, line(2000, min_length=1)]
