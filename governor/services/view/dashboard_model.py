"""The dashboard's read model: every budget with its figures, chart series, pods, GPUs, runs,
pending extensions, admitted plans, its open problems and the governor's next step, and the
latest events, as of one instant. Plain values; the HTML page and GET /v1/status render the
same thing. Built by services.view.status (and services.view.danger, what needs an operator
first).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from governor.domain.ledger import COMMITTED_DOC, RESERVE_DOC, SHUTDOWN_DOC, STORAGE_TAIL_DOC
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
from governor.domain.preflight.rules import Verdict
from governor.services.fleet.loss_model import AcknowledgedLoss
from governor.services.fleet.pod_model import PodStopLatency
from governor.services.fleet.team_model import Team
from governor.services.plans.admission import HELD_FOR_PLANS_DOC
from governor.services.plans.launches import RESERVED_FOR_LAUNCHES_DOC
from governor.services.plans.plan_check_model import FORMERLY_RESERVED_DOC, HELD_DOC

BURN = {"api": "burn_rate_usd_per_hour"}  # what the API calls a burn rate


@dataclass(frozen=True)
class SpendPoint:
    at: datetime
    spent: Decimal  # cumulative, from the budget's declaration to `at`


@dataclass(frozen=True)
class Threshold:
    pct: int
    amount: Decimal  # pct of the effective ceiling, as the threshold alerts count it


@dataclass(frozen=True)
class StopMark:
    at: datetime
    pod_id: str
    what: str  # "requested" or "stopped"
    reason: Reason


@dataclass(frozen=True)
class SpendChart:
    start: datetime
    end: datetime
    points: tuple[SpendPoint, ...]
    ceiling: Decimal
    effective_ceiling: Decimal
    thresholds: tuple[Threshold, ...]
    stops: tuple[StopMark, ...]
    committed: Decimal = field(
        metadata={"doc": "committed spend at the chart's end: what is compared to the ceiling"}
    )


@dataclass(frozen=True)
class GpuPoint:
    at: datetime
    utilization_pct: float | None
    memory_used_bytes: int | None


@dataclass(frozen=True)
class GpuTrace:
    uuid: str
    index: int
    name: str
    own: bool  # the pod's own GPU; false: a neighbour's on a shared machine, shown as context
    last_at: datetime
    utilization_pct: float | None
    memory_used_bytes: int | None
    memory_total_bytes: int | None
    peak_utilization_pct: float | None  # over the window shown
    peak_memory_bytes: int | None  # the most any run on the pod held, or the window's most
    points: tuple[GpuPoint, ...]


@dataclass(frozen=True)
class StopInfo:
    state: str
    reason: Reason
    created_at: datetime
    deadline: datetime  # the job's save deadline: the provider is asked to stop after it
    confirmed_at: datetime | None
    last_error: str | None


@dataclass(frozen=True)
class PodStatus:
    id: str
    name: str  # unique within its budget
    provider: str
    provider_ref: str
    region: str | None  # where the provider says it runs
    gpu_type: str | None
    gpu_count: int | None
    state: PodState  # its last known state while the provider's is unknown
    provider_state: str | None  # the provider's word for it, while it is none it documents
    state_known: bool  # False: the provider's is none it documents; compute accrues as running
    spent: Decimal
    stop_latency: PodStopLatency  # declared or learned: the shutdown margin's
    burn_per_hour: Decimal = field(metadata=BURN)  # what it costs now, in its current state
    compute_per_hour: Decimal
    storage_per_hour: Decimal
    stopped_storage_per_hour: Decimal  # what its volume costs once stopped
    stop: StopInfo | None
    resumable: bool  # stopped, in a budget that is open again: an operator may resume it
    terminate_only: bool  # no stop call works for it: terminated after a safe checkpoint
    acknowledged_loss: AcknowledgedLoss | None  # what its stop loses, accepted in writing
    telemetry_note: str | None
    gpus: tuple[GpuTrace, ...]


@dataclass(frozen=True)
class MetricValue:
    name: str
    value: float | str  # a non-finite one as heartbeats carry it: "NaN", "Infinity", "-Infinity"
    recent: tuple[float, ...]  # its latest finite values (status.METRIC_POINTS), oldest first


@dataclass(frozen=True)
class RunLine:
    id: str
    name: str
    pod_id: str
    attempt: int  # 2 and on: it continued after its pod was resumed
    status: RunStatus
    phase: Phase | None
    step: int
    total_steps: int | None
    progress_pct: float | None
    last_heartbeat_at: datetime | None
    heartbeat_age_s: float | None
    heartbeat_timeout_s: float
    heartbeat_late: bool  # a live run not heard from within its timeout
    directive: Action
    directive_reason: Reason | None
    directive_message: str | None
    metrics: tuple[MetricValue, ...]  # the latest values: the watched metrics first, then by name
    awaiting_acknowledgement: bool  # lost, and no operator has acknowledged it since


@dataclass(frozen=True)
class PendingExtension:
    id: str
    amount: Decimal
    reason: str
    requested_by: Requester
    run_id: str | None
    created_at: datetime
    effective_ceiling_if_approved: Decimal


@dataclass(frozen=True)
class PlanLine:
    """An admitted plan of the budget: its worst case, what its pods have spent, and what it
    still holds back from admission (never part of committed spend)."""

    plan_id: str  # its latest check
    job_id: str
    verdict: Verdict
    overridden: bool  # a no_go an operator let through
    worst_case: Decimal
    spent: Decimal
    held: Decimal = field(metadata={"doc": HELD_DOC})
    reserved: Decimal = field(metadata={"doc": FORMERLY_RESERVED_DOC})
    released: bool  # its runs have all ended: it holds nothing back


@dataclass(frozen=True)
class Problem:
    """Something wrong now, raised from a run, pod or GPU to its budget."""

    severity: Severity
    kind: str  # heartbeat-lost, run-lost, stop-failing, stop-held, gpu-memory,
    # extension-pending, or the reason of a run's warning (forecast, headroom, a training-health
    # rule's ...)
    subject: str  # the run's or pod's name (an extension's: its run's, or its requester)
    message: str
    run: str | None  # the run's name, where the problem is a run's
    pod: str | None  # the pod's name: the run's pod, or the pod's own

    @property
    def where(self) -> str:
        """What the problem is about, as a person reads it: "sft on gpu-a", "gpu-a"."""
        if self.run is not None and self.pod is not None:
            return f"{self.run} on {self.pod}"
        return self.subject


@dataclass(frozen=True)
class NextStep:
    """What the governor will do next for a budget, and when, read as "{what} {at} {unless}":
    "stops h100-sft in 4 min unless extended"."""

    what: str
    at: datetime | None = None
    unless: str | None = None  # what a person can do to change it


@dataclass(frozen=True)
class BudgetStatus:
    id: str
    name: str
    state: BudgetState
    ceiling: Decimal
    approved_extensions: Decimal
    effective_ceiling: Decimal
    reserve: Decimal = field(metadata={"doc": RESERVE_DOC})
    spent: Decimal
    shutdown: Decimal = field(metadata={"doc": SHUTDOWN_DOC})
    storage_tail: Decimal = field(metadata={"doc": STORAGE_TAIL_DOC})
    committed: Decimal = field(metadata={"doc": COMMITTED_DOC})
    held_for_plans: Decimal = field(metadata={"doc": HELD_FOR_PLANS_DOC})
    reserved_for_launches: Decimal = field(metadata={"doc": RESERVED_FOR_LAUNCHES_DOC})
    remaining: Decimal
    burn_per_hour: Decimal = field(metadata=BURN)
    projected_exhaustion_at: datetime | None
    seconds_to_ceiling: float | None  # at the current burn; none: not burning
    spent_pct: float
    committed_pct: float
    attention: Severity | None  # the worst of its figures (at, near or under an hour from
    # the ceiling, stopping)
    # and of its problems: a budget with an open problem is never shown as fine
    next_step: NextStep  # what the governor will do next, and when
    problems: tuple[Problem, ...]  # those of its runs, pods and GPUs, the worst first
    chart: SpendChart
    pods: tuple[PodStatus, ...]
    runs: tuple[RunLine, ...]
    pending_extensions: tuple[PendingExtension, ...]
    plans: tuple[PlanLine, ...]  # its admitted plans: held back vs actually spent


@dataclass(frozen=True)
class EventLine:
    id: int
    at: datetime
    severity: Severity
    category: Category
    subject: str
    budget_id: str | None
    budget_name: str | None
    message: str
    count: int  # identical events folded into this one
    last_at: datetime
    pod_id: str | None  # the pod it is about (a run's: its pod)
    pod_name: str | None
    run_id: str | None  # the run it is about
    run_name: str | None


@dataclass(frozen=True)
class LeaderLine:
    """The replica running the periodic work, since when, in which term."""

    replica: str
    term: int
    since: datetime


@dataclass(frozen=True)
class UngovernedLine:
    """A billing pod a provider account lists that no budget governs, as the account sweep
    last saw it."""

    provider: str
    provider_ref: str
    name: str | None
    labels: dict[str, str]
    gpu_type: str | None
    gpu_count: int | None
    hourly_rate: Decimal | None = field(
        metadata={"api": "hourly_rate_usd", "doc": "its compute rate; null: not said"}
    )
    reason: str = field(metadata={"doc": "why no budget governs it"})
    launch_id: str | None = field(metadata={"doc": "the launch its label names, if any"})
    first_seen_at: datetime
    last_seen_at: datetime
    stop_after_s: float | None = field(
        metadata={"doc": "the grace of the sweep rule that stops it; null: no rule stops it"}
    )
    stop_due_at: datetime | None = field(metadata={"doc": "when its rule's stop is due"})
    stop_sent_at: datetime | None
    stop_detail: str | None = field(metadata={"doc": "what the provider said of the stop"})


@dataclass(frozen=True)
class Dashboard:
    """Everything the status page shows; GET /v1/status is its JSON, field for field."""

    at: datetime
    budgets: tuple[BudgetStatus, ...]  # the most urgent first (danger.urgency)
    events: tuple[EventLine, ...]
    leader: LeaderLine | None  # none: no replica leads, for now
    # the teams shown (every team the caller may see, or the one asked for), each with its
    # period's spend to date and forecast against its ceiling
    teams: tuple[Team, ...] = ()
    team_id: str | None = None  # the team asked for (`?team=`); none: the organisation
    # billing pods under no budget, the longest seen first: shown above everything else
    ungoverned: tuple[UngovernedLine, ...] = ()
    ungoverned_rate: Decimal = field(
        default=Decimal(0),
        metadata={
            "api": "ungoverned_usd_per_hour",
            "doc": "what the ungoverned pods cost an hour, those with a rate added up",
        },
    )
