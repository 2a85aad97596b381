"""The policy: an ordered list of small named rules over one pod's situation.

Reading RULES top to bottom tells an operator what the governor will do. Each rule
returns a Finding (action, reason, message, evidence) or None; `decide` picks the first
finding of the strongest action. Rules never look anything up: the situation holds it all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from governor.domain.ledger import Figures, committed_in_parts, forecast_at_completion
from governor.domain.memory_outlook import Projection
from governor.domain.model import Action, OomForesight, Phase, Reason, RunStatus, Severity
from governor.domain.money import dollars, format_usd
from governor.domain.teams import TeamFigures
from governor.domain.telemetry import GIB

PRE_STOP_FRACTION = Decimal("0.9")  # committed share of the ceiling that asks for a checkpoint
WARNING_THRESHOLD_FRACTION = Decimal("0.8")  # from this share on, threshold alerts are warnings
HELD_MEMORY_BYTES = GIB  # a GPU holding more than this is not simply unused
WARMUP_PHASES = (Phase.LOADING, Phase.COMPILING)
STEPLESS_PHASES = (Phase.CHECKPOINTING, Phase.EVALUATION, Phase.EXPORT)  # no steps expected
BEYOND_CANARY = (Phase.TRAINING, Phase.EXPORT)  # what a held run may not do (its eval batch may)


@dataclass(frozen=True)
class Watch:
    """Thresholds of the GPU and progress rules; from settings, overridable per run."""

    idle_util_pct: float = 5.0
    idle_window_s: float = 600.0
    stall_window_s: float = 900.0
    compile_allowance_s: float = 1800.0
    headroom_pct: float = 5.0
    oom_foresight: OomForesight = OomForesight.WARN  # what a foreseen out-of-memory does


@dataclass(frozen=True)
class GpuView:
    """One GPU of the pod as the rules see it; `fresh` when its latest sample is recent."""

    uuid: str
    fresh: bool
    idle_since: datetime | None
    held_bytes: int | None
    free_ratio: float | None


@dataclass(frozen=True)
class HealthStop:
    """A training-health rule that asked, on the run's own heartbeat, for a stop."""

    reason: Reason
    message: str
    evidence: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class RunView:
    status: RunStatus
    phase: Phase | None
    phase_since: datetime | None
    progress_at: datetime  # when the step last changed (or the attempt started)
    step: int
    total_steps: int | None
    started_at: datetime  # when the run's current attempt began
    last_heartbeat_at: datetime | None
    heartbeat_timeout_s: float
    ended_at: datetime | None
    steps_per_s: float | None
    checkpoint_asked: bool  # the budget's pre-stop checkpoint was asked for
    forecast_warned: bool
    team_checkpoint_asked: bool = False  # its team's pre-stop checkpoint was asked for
    idle_alerted: bool = False
    stall_alerted: bool = False
    headroom_warned: bool = False
    oom_warned: bool = False
    health_stop: HealthStop | None = None

    @property
    def warming_up(self) -> bool:
        return self.phase in WARMUP_PHASES

    @property
    def phase_started_at(self) -> datetime:
        """When the phase it is judged in began: the phase it reports, or else its attempt."""
        return self.phase_since or self.started_at

    def silent_for(self, now: datetime) -> float:
        return (now - (self.last_heartbeat_at or self.started_at)).total_seconds()


@dataclass(frozen=True)
class Situation:
    now: datetime
    figures: Figures
    thresholds: tuple[int, ...]
    alerted_pct: int
    manual_stop: bool = False
    run: RunView | None = None
    other_live_runs: int = 0
    finished_linger_s: float = 60.0
    resumed_at: datetime | None = None  # the pod's latest resume
    resume_grace_s: float = 900.0  # how long a resumed pod may wait for a run before it stops
    watch: Watch = field(default_factory=Watch)
    gpus: tuple[GpuView, ...] = ()
    heard_since: datetime | None = None  # jobs could reach the governor from then (an outage)
    canary: CanaryHold | None = None  # the pod's plan holds its runs to the canary
    oom: Projection | None = None  # the run's GPU whose next memory event comes closest
    team: TeamFigures | None = None  # the budget's team's money, where it has a ceiling


@dataclass(frozen=True)
class CanaryHold:
    """A canary_only plan whose canary has not proven its memory yet: its runs may spend up to
    `cap` on the plan's pods, in the phases before training."""

    plan: str  # the plan's job id
    cap: Decimal  # the canary's worst case
    spent: Decimal  # what the plan's pods have cost
    threshold_gib: float  # the measured peak per GPU that releases training
    needs: str = ""  # what the canary must show besides its peak, in words
    peak_gib: float | None = None  # the highest peak per GPU its runs measured so far


@dataclass(frozen=True)
class Finding:
    rule: str
    action: Action
    reason: Reason
    severity: Severity
    message: str
    evidence: dict[str, object] = field(default_factory=dict)


Rule = Callable[[Situation], "Finding | None"]


def money_evidence(figures: Figures) -> dict[str, object]:
    """A budget's figures as an event's evidence: committed spend with its parts."""
    return {
        "spent_usd": format_usd(figures.spent),
        "shutdown_usd": format_usd(figures.shutdown),
        "storage_tail_usd": format_usd(figures.storage_tail),
        "reserve_usd": format_usd(figures.reserve),
        "committed_usd": format_usd(figures.committed),
        "effective_ceiling_usd": format_usd(figures.effective_ceiling),
        "burn_rate_usd_per_hour": format_usd(figures.burn_per_hour),
    }


def manual_stop(s: Situation) -> Finding | None:
    """Information only: the operator's ask, with who asked and why, is the event told."""
    if not s.manual_stop:
        return None
    return Finding(
        "manual_stop",
        Action.STOP,
        Reason.MANUAL,
        Severity.INFO,
        "An operator asked for this pod to be stopped.",
    )


def ceiling(s: Situation) -> Finding | None:
    f = s.figures
    if f.committed < f.effective_ceiling:
        return None
    return Finding(
        "ceiling",
        Action.STOP,
        Reason.CEILING,
        Severity.CRITICAL,
        f"Committed spend has reached the ceiling {dollars(f.effective_ceiling)}: "
        f"{committed_in_parts(f)}. Save now, the pod will be stopped; an extension of at least "
        f"{dollars(f.extension_to_go_on)} would let the budget go on.",
        money_evidence(f),
    )


def team_ceiling(s: Situation) -> Finding | None:
    """The budget's team reached its ceiling for the period: the pod stops after a save, the
    budget stays open (held until the team's next period)."""
    t = s.team
    if t is None or not t.reached:
        return None
    return Finding(
        "team_ceiling",
        Action.STOP,
        Reason.TEAM_CEILING,
        Severity.CRITICAL,
        f"The team's committed spend has reached its ceiling {dollars(t.ceiling)} for the "
        f"period to {t.period.end:%Y-%m-%d %H:%M} UTC (spent {dollars(t.spent)} + shutdown "
        f"{dollars(t.shutdown)}). Save now, the pod will be stopped; the team's budgets "
        "stay open and run again from its next period.",
        team_evidence(t),
    )


def team_pre_stop_checkpoint(s: Situation) -> Finding | None:
    run, t = s.run, s.team
    if t is None or run is None or not run.status.is_live or run.team_checkpoint_asked:
        return None
    if t.ceiling <= 0 or t.committed / t.ceiling < PRE_STOP_FRACTION:
        return None
    return Finding(
        "team_pre_stop_checkpoint",
        Action.CHECKPOINT,
        Reason.PRE_STOP,
        Severity.WARNING,
        f"The team's committed spend is {t.committed / t.ceiling:.0%} of its ceiling "
        f"{dollars(t.ceiling)} for the period (spent {dollars(t.spent)} + shutdown "
        f"{dollars(t.shutdown)}): checkpoint now so a stop loses little.",
        team_evidence(t),
    )


def team_evidence(t: TeamFigures) -> dict[str, object]:
    """A team's figures as an event's evidence."""
    return {
        "team_ceiling_usd": format_usd(t.ceiling),
        "team_spent_usd": format_usd(t.spent),
        "team_shutdown_usd": format_usd(t.shutdown),
        "team_committed_usd": format_usd(t.committed),
        "period_start": t.period.start.isoformat(),
        "period_end": t.period.end.isoformat(),
    }


def heartbeat_lost(s: Situation) -> Finding | None:
    run = s.run
    if run is None or not run.status.is_live:
        return None
    silent = run.silent_for(s.now)
    if s.heard_since is not None:  # no job could check in before: silence counts from then
        silent = min(silent, (s.now - s.heard_since).total_seconds())
    if silent <= run.heartbeat_timeout_s:
        return None
    return Finding(
        "heartbeat_lost",
        Action.STOP,
        Reason.HEARTBEAT_LOST,
        Severity.CRITICAL,
        f"No heartbeat for {silent:.0f} s (timeout {run.heartbeat_timeout_s:g} s): "
        "the job is presumed dead and its pod will be stopped.",
        {"silent_s": round(silent, 3), "heartbeat_timeout_s": run.heartbeat_timeout_s},
    )


def idle_hang(s: Situation) -> Finding | None:
    """Every GPU idle while holding memory: a deadlock (merge, export, collective) burning money.

    Idle time counts from the latest of the GPUs' idle start, the pod's resume and the start of
    the phase the run is judged in (a switch from `compiling` to `training` starts it again).
    Warming up (loading, compiling) is the stall rule's business, with its own allowance: the
    idle rule warns then, saying so, and stops nothing.
    """
    run, w = s.run, s.watch
    if run is not None and not run.status.is_live:
        return None
    fresh = [g for g in s.gpus if g.fresh]
    if not fresh or any(g.idle_since is None for g in fresh):
        return None
    starts = [g.idle_since for g in fresh if g.idle_since]
    if s.resumed_at is not None:
        starts.append(s.resumed_at)
    if run is not None:
        starts.append(run.phase_started_at)
    idle_for = max(0.0, (s.now - max(starts)).total_seconds())
    held_gib = sum(g.held_bytes or 0 for g in fresh) / GIB
    evidence: dict[str, object] = {
        "idle_s": round(idle_for, 3),
        "idle_window_s": w.idle_window_s,
        "idle_util_pct": w.idle_util_pct,
        "held_gib": round(held_gib, 2),
        "gpus": [g.uuid for g in fresh],
    }
    what = (
        f"every GPU below {w.idle_util_pct:g}% for {idle_for:.0f} s "
        f"while holding {held_gib:.1f} GiB"
    )
    warned = run is None or run.idle_alerted
    if run is not None and run.warming_up:
        if idle_for < w.idle_window_s / 2 or warned:
            return None
        assert run.phase is not None
        quiet, stop_at = _no_progress(s.now, run, w)
        return Finding(
            "idle_hang",
            Action.CONTINUE,
            Reason.IDLE_HANG,
            Severity.WARNING,
            f"The GPUs sit idle while the job is {run.phase.value}: {what}. The idle rule "
            f"does not stop a job while it is {run.phase.value}; the no-progress rule stops "
            f"the pod if no step comes in the next {max(0.0, stop_at - quiet):.0f} s "
            f"(the compile allowance: {stop_at:g} s without a step while {run.phase.value}).",
            {**evidence, "phase": run.phase.value, "stop_after_s": stop_at},
        )
    if idle_for >= w.idle_window_s:
        return Finding(
            "idle_hang",
            Action.STOP,
            Reason.IDLE_HANG,
            Severity.CRITICAL,
            f"The job looks hung: {what}. Stopping the pod, keeping its workspace.",
            evidence,
        )
    if idle_for >= w.idle_window_s / 2 and not warned:
        return Finding(
            "idle_hang",
            Action.CONTINUE,
            Reason.IDLE_HANG,
            Severity.WARNING,
            f"The job may be hung: {what}; the pod is stopped if this lasts {w.idle_window_s:g} s.",
            evidence,
        )
    return None


def _no_progress(now: datetime, run: RunView, w: Watch) -> tuple[float, float]:
    """How long the run has gone without a step, and after how long without one the
    no-progress rule stops it (in warm-up, the compile allowance)."""
    quiet = (now - run.progress_at).total_seconds()
    if run.warming_up:
        return quiet, max(w.stall_window_s, w.compile_allowance_s)
    return quiet, w.stall_window_s


def stalled(s: Situation) -> Finding | None:
    """No step progress while the pod bills, counted from the run's latest step or else the
    start of its attempt (its creation or the resume: imports and model loading count). Loading
    and compiling get a longer allowance; checkpointing, evaluation and export advance no steps
    (the idle rule watches those)."""
    run, w = s.run, s.watch
    if run is None or not run.status.is_live or run.phase in STEPLESS_PHASES:
        return None
    quiet, stop_at = _no_progress(s.now, run, w)
    alert_at = w.stall_window_s if run.warming_up else w.stall_window_s / 2
    where = f"step {run.step}" + (f" ({run.phase.value})" if run.phase else "")
    evidence: dict[str, object] = {
        "quiet_s": round(quiet, 3),
        "step": run.step,
        "phase": run.phase.value if run.phase else None,
        "stop_after_s": stop_at,
    }
    if quiet >= stop_at:
        return Finding(
            "stalled",
            Action.STOP,
            Reason.STALLED,
            Severity.CRITICAL,
            f"No progress for {quiet:.0f} s at {where}: stopping the pod, keeping its workspace.",
            evidence,
        )
    if quiet >= alert_at and not run.stall_alerted:
        return Finding(
            "stalled",
            Action.CONTINUE,
            Reason.STALLED,
            Severity.WARNING,
            f"No progress for {quiet:.0f} s at {where}; the pod is stopped if this lasts "
            f"{stop_at:g} s.",
            evidence,
        )
    return None


def memory_headroom(s: Situation) -> Finding | None:
    run, w = s.run, s.watch
    if run is None or not run.status.is_live or run.headroom_warned:
        return None
    low = [
        g
        for g in s.gpus
        if g.fresh and g.free_ratio is not None and g.free_ratio * 100 < w.headroom_pct
    ]
    if not low:
        return None
    tightest = min(low, key=lambda g: g.free_ratio or 0.0)
    return Finding(
        "memory_headroom",
        Action.CONTINUE,
        Reason.HEADROOM,
        Severity.WARNING,
        f"GPU memory is nearly full: {(tightest.free_ratio or 0.0):.1%} free on "
        f"{tightest.uuid} (warning below {w.headroom_pct:g}%). An out-of-memory crash is close.",
        {
            "gpus": {g.uuid: round(g.free_ratio or 0.0, 4) for g in low},
            "headroom_pct": w.headroom_pct,
        },
    )


def oom_foreseen(s: Situation) -> Finding | None:
    """The projection of a GPU's memory says its next event (an evaluation, a checkpoint save,
    a long sample, or the steps until the job could save) would cross the card: told with the
    projection; the run's policy has the job warned (the default), told to save first, or
    stopped."""
    run, seen = s.run, s.oom
    if run is None or not run.status.is_live or run.oom_warned or seen is None:
        return None
    if not seen.crosses:
        return None
    foresight = s.watch.oom_foresight
    action, severity, then = {
        OomForesight.WARN: (Action.CONTINUE, Severity.WARNING, "an out-of-memory crash is coming"),
        OomForesight.CHECKPOINT: (
            Action.CHECKPOINT,
            Severity.WARNING,
            "checkpoint now, before the crossing",
        ),
        OomForesight.STOP: (Action.STOP, Severity.CRITICAL, "stopping the pod before the crossing"),
    }[foresight]
    return Finding(
        "oom_foreseen",
        action,
        Reason.OOM_FORESEEN,
        severity,
        f"Out of memory foreseen: {seen.said()}: {then}.",
        {**seen.evidence(), "oom_foresight": foresight.value},
    )


def training_health(s: Situation) -> Finding | None:
    """A health rule of the run's (flatline, non-finite, diverging, no improvement) judged its
    own metrics on its heartbeat and asked for a stop: carried out like any other."""
    run = s.run
    if run is None or not run.status.is_live or run.health_stop is None:
        return None
    asked = run.health_stop
    return Finding(
        "training_health",
        Action.STOP,
        asked.reason,
        Severity.CRITICAL,
        asked.message,
        asked.evidence,
    )


def canary_over(s: Situation) -> Finding | None:
    """A canary whose measured peak is over its release threshold is stopped on that
    measurement: the plan does not fit, and more of the canary would not change that."""
    hold, run = s.canary, s.run
    if hold is None or run is None or not run.status.is_live or hold.peak_gib is None:
        return None
    if hold.peak_gib <= hold.threshold_gib:
        return None
    return Finding(
        "canary_over",
        Action.STOP,
        Reason.CANARY_OVER,
        Severity.CRITICAL,
        f"The canary of plan {hold.plan!r} measured a peak of {hold.peak_gib:.1f} GiB per GPU, "
        f"over its release threshold of {hold.threshold_gib:.1f} GiB: stopping it; training "
        "is not released. Change the plan and check it again.",
        {
            "plan": hold.plan,
            "peak_gib": round(hold.peak_gib, 2),
            "threshold_gib": round(hold.threshold_gib, 2),
            "spent_usd": format_usd(hold.spent),
        },
    )


def canary_hold(s: Situation) -> Finding | None:
    """A run held to its canary that goes beyond it, or spends past the canary's cap, is
    stopped: the plan's memory was never proven, so training is not paid for."""
    hold, run = s.canary, s.run
    if hold is None or run is None or not run.status.is_live:
        return None
    released = (
        f"training is released once its measured peak stays under {hold.threshold_gib:.1f} "
        f"GiB per GPU{hold.needs} (or an operator releases it with the measured figure)"
    )
    evidence: dict[str, object] = {
        "plan": hold.plan,
        "cap_usd": format_usd(hold.cap),
        "spent_usd": format_usd(hold.spent),
        "threshold_gib": round(hold.threshold_gib, 2),
    }
    if run.phase in BEYOND_CANARY:
        assert run.phase is not None
        message = (
            f"Plan {hold.plan!r} is canary_only and its canary has not proven its memory, yet "
            f"the run reports {run.phase.value}: stopping it; {released}."
        )
    elif hold.spent >= hold.cap:
        message = (
            f"The canary of plan {hold.plan!r} has spent {dollars(hold.spent)} of its "
            f"{dollars(hold.cap)} cap without proving its memory: stopping it; {released}."
        )
    else:
        return None
    return Finding(
        "canary_hold", Action.STOP, Reason.CANARY_HOLD, Severity.CRITICAL, message, evidence
    )


def run_finished(s: Situation) -> Finding | None:
    """A run that ended with nothing else live on its pod: the pod is stopped once it has
    lingered. A pod resumed after the run ended waits the resume grace from the resume first,
    for a run to start on it."""
    run = s.run
    if run is None or run.status not in (RunStatus.FINISHED, RunStatus.FAILED):
        return None
    if s.other_live_runs or run.ended_at is None:
        return None
    if s.resumed_at is not None and s.resumed_at > run.ended_at:
        waited = (s.now - s.resumed_at).total_seconds()
        if waited < max(s.finished_linger_s, s.resume_grace_s):
            return None
        return Finding(
            "run_finished",
            Action.STOP,
            Reason.FINISHED,
            Severity.INFO,
            f"The pod was resumed {waited:.0f} s ago and no run is live on it (the latest "
            f"{run.status.value} before the resume): stopping it so it stops billing.",
            {
                "status": run.status.value,
                "resumed_s": round(waited, 3),
                "resume_grace_s": s.resume_grace_s,
            },
        )
    lingered = (s.now - run.ended_at).total_seconds()
    if lingered < s.finished_linger_s:
        return None
    return Finding(
        "run_finished",
        Action.STOP,
        Reason.FINISHED,
        Severity.INFO,
        f"The run {run.status.value} {lingered:.0f} s ago and nothing else runs on the pod: "
        "stopping it so it stops billing.",
        {"status": run.status.value, "lingered_s": round(lingered, 3)},
    )


def pre_stop_checkpoint(s: Situation) -> Finding | None:
    run = s.run
    if run is None or not run.status.is_live or run.checkpoint_asked:
        return None
    if s.figures.committed_fraction < PRE_STOP_FRACTION:
        return None
    return Finding(
        "pre_stop_checkpoint",
        Action.CHECKPOINT,
        Reason.PRE_STOP,
        Severity.WARNING,
        f"Committed spend is {s.figures.committed_fraction:.0%} of the ceiling "
        f"({committed_in_parts(s.figures)}): checkpoint now so a stop loses little.",
        money_evidence(s.figures),
    )


def forecast_over_ceiling(s: Situation) -> Finding | None:
    run = s.run
    if run is None or not run.status.is_live or run.forecast_warned:
        return None
    if not run.total_steps or not run.steps_per_s:
        return None
    forecast = forecast_at_completion(
        s.figures, max(0, run.total_steps - run.step), run.steps_per_s
    )
    if forecast is None or forecast <= s.figures.effective_ceiling:
        return None
    return Finding(
        "forecast_over_ceiling",
        Action.CONTINUE,
        Reason.FORECAST,
        Severity.WARNING,
        f"At {run.steps_per_s:.3g} steps/s the run would finish at about "
        f"{dollars(forecast)}, over the ceiling {dollars(s.figures.effective_ceiling)}: "
        "ask for an extension or plan to stop early.",
        {
            **money_evidence(s.figures),
            "forecast_usd": format_usd(forecast),
            "steps_per_s": run.steps_per_s,
            "step": run.step,
            "total_steps": run.total_steps,
        },
    )


def thresholds(s: Situation) -> Finding | None:
    used_pct = s.figures.spent_fraction * 100
    crossed = [t for t in s.thresholds if used_pct >= t > s.alerted_pct]
    if not crossed:
        return None
    pct = max(crossed)
    return Finding(
        "thresholds",
        Action.CONTINUE,
        Reason.THRESHOLD,
        Severity.WARNING if pct >= WARNING_THRESHOLD_FRACTION * 100 else Severity.INFO,
        f"Spend has passed {pct}% of the ceiling "
        f"({dollars(s.figures.spent)} of {dollars(s.figures.effective_ceiling)}).",
        {**money_evidence(s.figures), "threshold_pct": pct},
    )


RULES: tuple[Rule, ...] = (
    manual_stop,
    ceiling,
    heartbeat_lost,
    idle_hang,
    stalled,
    training_health,
    canary_over,
    canary_hold,
    run_finished,
    pre_stop_checkpoint,
    memory_headroom,
    oom_foreseen,
    forecast_over_ceiling,
    thresholds,
)


# A budget's team's ceiling, looked at where the budget's team has one: after the budget's own
# rules, so a finding of the budget's own comes first among those of one action.
TEAM_RULES: tuple[Rule, ...] = (team_ceiling, team_pre_stop_checkpoint)


def evaluate(situation: Situation, rules: tuple[Rule, ...] = RULES) -> list[Finding]:
    """Every rule that fires, in rule order; then, where the budget's team has a ceiling,
    the team's rules."""
    if situation.team is not None:
        rules = (*rules, *TEAM_RULES)
    return [f for f in (rule(situation) for rule in rules) if f is not None]


def decide(findings: list[Finding]) -> Finding | None:
    """The first finding of the strongest action (stop > checkpoint > continue)."""
    if not findings:
        return None
    strongest = max(f.action.weight for f in findings)
    return next(f for f in findings if f.action.weight == strongest)


DEFAULT_HEARTBEAT_S = 15.0


def next_heartbeat_s(heartbeat_timeout_s: float, seconds_to_ceiling: float | None) -> float:
    """When the job should check in again: often enough to always hear a stop in time."""
    candidates = [DEFAULT_HEARTBEAT_S, heartbeat_timeout_s / 3]
    if seconds_to_ceiling is not None:
        candidates.append(seconds_to_ceiling / 4)
    return round(max(1.0, min(candidates)), 3)
