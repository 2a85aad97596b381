"""What needs an operator first: a budget's open problems (those of its runs, pods and GPUs
raised to the budget), what the governor will do next and when, and an order of urgency.

The dashboard leads with these so the budget about to stop, or quietly in trouble, is the
first thing on the screen rather than a card further down.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from governor.domain.ledger import Figures, committed_in_parts
from governor.domain.loss import lost_at_stop
from governor.domain.model import Action, BudgetState, PodState, Reason, Severity
from governor.domain.money import dollars
from governor.domain.stop_order import StopState
from governor.services.view.dashboard_model import (
    NextStep,
    PendingExtension,
    PodStatus,
    Problem,
    RunLine,
)

RANK = {Severity.CRITICAL: 0, Severity.WARNING: 1, Severity.INFO: 2, None: 3}
STATE_RANK = {
    BudgetState.STOPPING: 0,
    BudgetState.OPEN: 1,
    BudgetState.EXHAUSTED: 2,
    BudgetState.CLOSED: 3,
}
MEMORY_FULL_PCT = 95.0  # a GPU's memory used from which a pod's problem says it is nearly full
# A live run's directive reason that is a problem of its own, and how it reads. A stop or a
# checkpoint for these is said by the next step; the ceiling and thresholds by the figures.
RUN_PROBLEMS = {
    Reason.FORECAST: "forecast over the ceiling",
    Reason.HEADROOM: "GPU memory nearly full",
    Reason.IDLE_HANG: "GPU idle while holding memory",
    Reason.STALLED: "no step progress",
    Reason.FLATLINE: "training health: a metric flatlined",
    Reason.NON_FINITE: "training health: a non-finite metric",
    Reason.DIVERGING: "training health: a metric is diverging",
    Reason.NO_IMPROVEMENT: "training health: no improvement",
}


def problems(
    state: BudgetState,
    pods: Sequence[PodStatus],
    runs: Sequence[RunLine],
    pending: Sequence[PendingExtension],
) -> tuple[Problem, ...]:
    """The budget's open problems, the worst first, each naming its run and pod. A closed
    budget's lost runs are none: closing it was an operator's word on all of them."""
    pod_names = {p.id: p.name for p in pods}
    found: list[Problem] = []
    for run in runs:
        found += _run_problems(run, pod_names.get(run.pod_id, run.pod_id), state)
    for pod in pods:
        found += _pod_problems(pod)
    by_id = {r.id: r for r in runs}
    for e in pending:
        asked = by_id.get(e.run_id or "")
        found.append(
            Problem(
                Severity.WARNING,
                "extension-pending",
                e.requested_by.value if asked is None else asked.name,
                f"extension of {dollars(e.amount)} awaits a decision: {e.reason}",
                None if asked is None else asked.name,
                None if asked is None else pod_names.get(asked.pod_id, asked.pod_id),
            )
        )
    return tuple(sorted(found, key=lambda p: RANK[p.severity]))


def _run_problems(run: RunLine, pod: str, state: BudgetState) -> list[Problem]:
    if run.awaiting_acknowledgement and state is not BudgetState.CLOSED:
        return [
            Problem(
                Severity.WARNING,
                "run-lost",
                run.name,
                "job lost: it was silent when its pod stopped; relaunch or resume it, then "
                f"acknowledge it: governor run acknowledge {run.id}",
                run.name,
                pod,
            )
        ]
    if not run.status.is_live:
        return []
    found = []
    if run.heartbeat_late:
        silent = "never heard from" if run.heartbeat_age_s is None else "silent"
        found.append(
            Problem(
                Severity.CRITICAL,
                "heartbeat-lost",
                run.name,
                f"heartbeat lost: {silent} past its {run.heartbeat_timeout_s:g} s timeout",
                run.name,
                pod,
            )
        )
    if run.directive_reason in RUN_PROBLEMS:
        what = RUN_PROBLEMS[run.directive_reason]
        severity = Severity.CRITICAL if run.directive is Action.STOP else Severity.WARNING
        detail = f": {run.directive_message}" if run.directive_message else ""
        reason = run.directive_reason.value
        found.append(Problem(severity, reason, run.name, what + detail, run.name, pod))
    return found


def _pod_problems(pod: PodStatus) -> list[Problem]:
    found = []
    stop = pod.stop
    if stop is not None and stop.state == StopState.HELD:
        found.append(
            Problem(
                Severity.CRITICAL,
                "stop-held",
                pod.name,
                "stop held: the provider can only terminate it and no checkpoint is on its "
                "persistent filesystem; an operator must decide",
                None,
                pod.name,
            )
        )
    elif stop is not None and (
        stop.state == StopState.FAILED or (stop.state != StopState.STOPPED and stop.last_error)
    ):
        found.append(
            Problem(
                Severity.CRITICAL,
                "stop-failing",
                pod.name,
                f"stop order {stop.state.replace('_', ' ')}: "
                f"{stop.last_error or 'the provider did not stop it'}",
                None,
                pod.name,
            )
        )
    if pod.state is PodState.RUNNING:
        found += _full_gpus(pod)
    return found


def _full_gpus(pod: PodStatus) -> list[Problem]:
    found = []
    for gpu in pod.gpus:
        if not gpu.own or not gpu.memory_total_bytes or gpu.memory_used_bytes is None:
            continue
        used = 100 * gpu.memory_used_bytes / gpu.memory_total_bytes
        if used >= MEMORY_FULL_PCT:
            found.append(
                Problem(
                    Severity.WARNING,
                    "gpu-memory",
                    pod.name,
                    f"GPU memory nearly full: GPU {gpu.index} at {used:.0f}%",
                    None,
                    pod.name,
                )
            )
    return found


def next_step(
    state: BudgetState,
    figures: Figures,
    seconds_to_ceiling: float | None,
    pods: Sequence[PodStatus],
    runs: Sequence[RunLine],
) -> NextStep:
    """What happens next without anyone's say: a stop under way, one at the ceiling, a
    checkpoint asked of a run, or nothing. At the ceiling: what would let it go on."""
    at_ceiling = figures.projected_exhaustion_at
    if state is BudgetState.CLOSED:
        return NextStep("nothing: the budget is closed")
    stopping = [p for p in pods if p.state is PodState.STOPPING and p.stop is not None]
    if stopping:
        names = _names(p.name for p in stopping)
        reasons = ", ".join(sorted({str(p.stop.reason.value) for p in stopping if p.stop}))
        deadline = min(p.stop.deadline for p in stopping if p.stop)
        return NextStep(f"stopping {names} ({reasons}); the job's save deadline", deadline)
    if state is BudgetState.EXHAUSTED:
        losses = [(p.name, p.acknowledged_loss.lost) for p in pods if p.acknowledged_loss]
        lost = lost_at_stop(losses)
        return NextStep(
            f"the ceiling was reached at {committed_in_parts(figures)}: nothing runs"
            + ("" if lost is None else f"; {lost}"),
            unless=f"unless an extension of at least {dollars(figures.extension_to_go_on)} "
            "is approved",
        )
    running = [p.name for p in pods if p.state.bills_compute]
    if seconds_to_ceiling is not None and running:
        return NextStep(f"stops {_names(running)}", at_ceiling, "unless extended")
    if seconds_to_ceiling is not None:
        return NextStep("reaches the ceiling on stopped storage", at_ceiling, "unless extended")
    asked = [r.name for r in runs if r.status.is_live and r.directive is Action.CHECKPOINT]
    if asked:
        return NextStep(f"waits for {_names(asked)} to checkpoint")
    return NextStep("nothing: not burning")


def _names(names: Iterable[str]) -> str:
    listed = list(names)
    return ", ".join(listed[:3]) + (f" and {len(listed) - 3} more" if len(listed) > 3 else "")


def worst(severities: Sequence[Severity | None]) -> Severity | None:
    return min(severities, key=RANK.__getitem__, default=None)


def urgency(
    state: BudgetState,
    attention: Severity | None,
    seconds_to_ceiling: float | None,
    found: Sequence[Problem],
    name: str,
) -> tuple[int, float, int, int, str]:
    """Sort key, most urgent first: how bad (a budget's attention unless it is closed, any
    budget's problems), then time to the ceiling, state (stopping, open, exhausted, closed), how
    many problems. An exhausted budget is as bad as its red says: above any healthy one. A
    closed budget has nothing left to stop: only its problems count."""
    counted = attention if state is not BudgetState.CLOSED else None
    bad = worst([*(p.severity for p in found), counted])
    until = 0.0 if state is BudgetState.STOPPING else seconds_to_ceiling
    return (RANK[bad], math.inf if until is None else until, STATE_RANK[state], -len(found), name)
