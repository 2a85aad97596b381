"""The governor's vocabulary: states, actions, reasons and the small values decisions use."""

from __future__ import annotations

from enum import StrEnum


class BudgetState(StrEnum):
    OPEN = "open"
    STOPPING = "stopping"
    EXHAUSTED = "exhausted"
    CLOSED = "closed"


class PodState(StrEnum):
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"
    RESUMING = "resuming"  # an operator's resume is being asked of the provider
    GONE = "gone"  # terminated, or released with its storage deleted

    @property
    def bills_compute(self) -> bool:
        """Its GPUs cost money: from the moment a resume is asked until its stop is confirmed."""
        return self in BILLS_COMPUTE


BILLS_COMPUTE = (PodState.RUNNING, PodState.STOPPING, PodState.RESUMING)


class RunStatus(StrEnum):
    RUNNING = "running"
    CHECKPOINTING = "checkpointing"
    STOPPING = "stopping"
    STOPPED = "stopped"
    FINISHED = "finished"
    FAILED = "failed"
    LOST = "lost"  # its job went silent and its pod was stopped without a word from it

    @property
    def is_live(self) -> bool:
        """The job process is still expected to check in."""
        return self in LIVE_STATUSES


LIVE_STATUSES = frozenset((RunStatus.RUNNING, RunStatus.CHECKPOINTING, RunStatus.STOPPING))


class Phase(StrEnum):
    LOADING = "loading"
    COMPILING = "compiling"
    CANARY = "canary"
    TRAINING = "training"
    CHECKPOINTING = "checkpointing"
    EVALUATION = "evaluation"
    EXPORT = "export"


class Action(StrEnum):
    CONTINUE = "continue"
    CHECKPOINT = "checkpoint"
    STOP = "stop"

    @property
    def weight(self) -> int:
        return {"continue": 0, "checkpoint": 1, "stop": 2}[self.value]


class Reason(StrEnum):
    CEILING = "ceiling"
    TEAM_CEILING = "team-ceiling"  # the budget's team reached its ceiling for the period
    HEARTBEAT_LOST = "heartbeat-lost"
    IDLE_HANG = "idle-hang"
    STALLED = "stalled"
    FINISHED = "finished"
    MANUAL = "manual"
    PRE_STOP = "pre-stop"
    FORECAST = "forecast"
    THRESHOLD = "threshold"
    HEADROOM = "headroom"
    FLATLINE = "flatline"  # training health: a metric's rule (governor.domain.health)
    NON_FINITE = "non-finite"
    DIVERGING = "diverging"
    NO_IMPROVEMENT = "no-improvement"
    CANARY_HOLD = "canary-hold"  # a canary_only plan: held to its canary until it proves itself
    CANARY_OVER = "canary-over"  # the canary's measured peak is over its release threshold
    OOM_FORESEEN = "oom-foreseen"  # the memory projection crosses the card at the next event


class OomForesight(StrEnum):
    """What a run's policy has done when its memory projection crosses the card."""

    WARN = "warn"  # an event with the projection, nothing more
    CHECKPOINT = "checkpoint"  # the job is told to save first
    STOP = "stop"  # the pod is stopped (the job saves within its grace)


class Severity(StrEnum):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


class Category(StrEnum):
    BUDGET = "budget"
    TELEMETRY = "telemetry"
    PROVIDER = "provider"
    HARNESS = "harness"
    MODEL = "model"
    OPERATOR = "operator"
    GOVERNOR = "governor"


class ExtensionState(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    EXPIRED = "expired"


class Requester(StrEnum):
    OPERATOR = "operator"
    JOB = "job"
    AGENT = "agent"


class EntryKind(StrEnum):
    ACCRUAL = "accrual"
    TRUE_UP = "true_up"
    ADJUSTMENT = "adjustment"


class ChargeKind(StrEnum):
    COMPUTE = "compute"
    STORAGE = "storage"


class Role(StrEnum):
    OPERATOR = "operator"
    APPROVER = "approver"  # decides extension requests, and reads as a viewer does
    VIEWER = "viewer"
    JOB = "job"
    AGENT = "agent"
    GATE = "gate"  # a launcher's policy calls (SkyPilot, dstack): the gate routes alone


class RateSource(StrEnum):
    PROVIDER = "provider"
    DECLARED = "declared"
