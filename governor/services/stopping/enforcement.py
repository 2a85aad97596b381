"""One enforcement pass over a budget: build each pod's situation, let the policy decide, act.

Acting here means writing intent (stop orders, directives, events), never calling a
provider: stop orders are carried out by `stops.advance`, outside any transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from governor.db import records
from governor.db import repository as repo
from governor.db.tables import BudgetRow, PodRow, RunRow, StopOrderRow
from governor.domain.budget_lifecycle import after_ceiling
from governor.domain.model import BILLS_COMPUTE, Action, Category, PodState, Reason
from governor.domain.policy import Finding, Situation, decide, evaluate
from governor.domain.run_lifecycle import HANGS, save_grace_s
from governor.domain.stop_order import StopState
from governor.services import events
from governor.services.context import GovernorConfig, ServiceContext, batches
from governor.services.ids import new_id
from governor.services.money import team_money
from governor.services.money.book import (
    LiveBook,
    LivePod,
    LiveRun,
    heard_from,
    heard_lately,
    keep_figures,
    live_books,
    run_view,
)
from governor.services.monitoring import telemetry
from governor.services.plans import admission, departures

CATEGORY_OF = {
    Reason.CEILING: Category.BUDGET,
    Reason.TEAM_CEILING: Category.BUDGET,
    Reason.THRESHOLD: Category.BUDGET,
    Reason.FORECAST: Category.BUDGET,
    Reason.PRE_STOP: Category.BUDGET,
    Reason.HEARTBEAT_LOST: Category.HARNESS,
    Reason.FINISHED: Category.GOVERNOR,
    Reason.MANUAL: Category.OPERATOR,
    Reason.IDLE_HANG: Category.TELEMETRY,
    Reason.STALLED: Category.HARNESS,
    Reason.HEADROOM: Category.TELEMETRY,
    Reason.FLATLINE: Category.MODEL,
    Reason.NON_FINITE: Category.MODEL,
    Reason.DIVERGING: Category.MODEL,
    Reason.NO_IMPROVEMENT: Category.MODEL,
    Reason.CANARY_HOLD: Category.BUDGET,
    Reason.CANARY_OVER: Category.TELEMETRY,
    Reason.OOM_FORESEEN: Category.TELEMETRY,
}
# the run's flag a checkpoint asked for by these rules sets (by default, `checkpoint_asked`):
# the budget's and its team's pre-stop checkpoints are each asked once
CHECKPOINT_FLAG = {"team_pre_stop_checkpoint": "team_checkpoint_asked"}
RUN_ALERT_FLAG = {
    Reason.FORECAST: "forecast_warned",
    Reason.IDLE_HANG: "idle_alerted",
    Reason.STALLED: "stall_alerted",
    Reason.HEADROOM: "headroom_warned",
    Reason.OOM_FORESEEN: "oom_warned",
}


def enforce(
    session: Session,
    config: GovernorConfig,
    budget_id: str,
    now: datetime,
    *,
    manual_stop_pod: str | None = None,
) -> LiveBook:
    """Evaluate the policy for every running pod of one budget and record what it decides."""
    [book] = enforce_budgets(session, config, [budget_id], now, manual_stop_pod=manual_stop_pod)
    return book


def enforce_budgets(
    session: Session,
    config: GovernorConfig,
    budget_ids: Sequence[str],
    now: datetime,
    *,
    manual_stop_pod: str | None = None,
    heard_since: datetime | None = None,
) -> list[LiveBook]:
    """Evaluate the policy for every running pod of these budgets, record what it decides,
    and keep each budget's figures for the heartbeats until the next pass.

    The queries are the same in number for one budget or a thousand: the pass costs what the
    pods that can still cost money cost, and nothing for the rest. Budgets, pods and runs are
    read as plain records, and what the pass changes on them is written when it ends, one
    statement per table and set of columns. `heard_since`: when the governor became reachable
    again after an outage (no silence counts from before it).
    """
    session.flush()  # the pass reads what its caller has written
    books = live_books(session, budget_ids, now, config)
    watches = {r.id: config.watch_for(r.policy) for b in books for r in b.runs}
    deciding = [p for b in books for p in b.pods if p.state in BILLS_COMPUTE]
    window = max(telemetry.lookback(w) for w in {config.watch, *watches.values()})
    samples = telemetry.recent_samples(session, deciding, now - window)
    held = admission.holds(session, books, now)
    departures.check(session, books, now)
    foreseen = telemetry.projections(session, _steps_to_save(books, deciding))
    teams = team_money.of_books(
        session,
        [
            (b.budget.id, b.budget.team_id, team_money.LiveBudget(b.figures, b.budget.recorded_usd))
            for b in books
        ],
        now,
    )
    for team_id, reached in teams.items():
        if reached.reached:
            team_money.hold(session, team_id, reached, now)
    for book in books:
        team = teams.get(book.budget.team_id)
        keep_figures(book, team)
        for pod in book.pods:
            # A pod whose stop failed for good stays `stopping`; only an operator retries it.
            retry = pod.id == manual_stop_pod and pod.state is PodState.STOPPING
            if (pod.state is not PodState.RUNNING and not retry) or pod.id in book.orders:
                continue
            for run in book.runs_on(pod.id) or (None,):
                if pod.id in book.orders:
                    break
                watch = config.watch if run is None else watches[run.id]
                situation = Situation(
                    now=now,
                    figures=book.figures,
                    thresholds=tuple(book.budget.alert_thresholds),
                    alerted_pct=book.budget.alerted_pct,
                    manual_stop=pod.id == manual_stop_pod,
                    run=None if run is None else run_view(run),
                    other_live_runs=_others_heard_from(book, pod, run),
                    finished_linger_s=config.finished_linger_s,
                    resumed_at=pod.resumed_at,
                    resume_grace_s=config.resume_grace_s,
                    watch=watch,
                    gpus=telemetry.views(samples.get(pod.id, {}), now, watch, pod),
                    heard_since=heard_since,
                    canary=held.get(pod.id),
                    oom=None if run is None else foreseen.get(run.id),
                    team=team,
                )
                _act(book, session, pod, run, situation)
    records.write_back(session, BudgetRow, [b.budget for b in books])
    records.write_back(session, PodRow, [p for b in books for p in b.pods])
    records.write_back(session, RunRow, [r for b in books for r in b.runs])
    return books


def _steps_to_save(books: Sequence[LiveBook], pods: Sequence[LivePod]) -> dict[str, float | None]:
    """The live runs on these pods, each with the steps it takes in the time it is given to
    save, at its pace (None: no pace yet): the memory projection's horizon."""
    billing = {p.id for p in pods}
    steps: dict[str, float | None] = {}
    for book in books:
        for run in book.runs:
            if run.pod_id in billing and run.status.is_live:
                pace = run_view(run).steps_per_s
                steps[run.id] = None if pace is None else pace * run.checkpoint_grace_s
    return steps


def _others_heard_from(book: LiveBook, pod: LivePod, run: LiveRun | None) -> int:
    """How many other runs on the pod are alive as far as we know."""
    return sum(1 for r in book.runs_on(pod.id) if r is not run and heard_from(r, book.now))


def _act(
    book: LiveBook, session: Session, pod: LivePod, run: LiveRun | None, situation: Situation
) -> None:
    findings = evaluate(situation)
    decision = decide(findings)
    if decision is not None and decision.action is Action.STOP:
        order_stop(session, book, pod, decision)
    elif decision is not None and decision.action is Action.CHECKPOINT and run is not None:
        _ask_checkpoint(session, book, run, decision)
    for finding in findings:
        if finding.action is Action.CONTINUE:
            _warn(session, book, run, finding)


def order_stop(session: Session, book: LiveBook, pod: LivePod, finding: Finding) -> StopOrderRow:
    """Persist a stop order for `pod`; its jobs get `stop` with a deadline on their next call."""
    now = book.now
    live = [r for r in book.runs_on(pod.id) if r.status.is_live]
    grace = max((_save_grace_s(r, finding.reason, now) for r in live), default=0.0)
    safe = [_checkpoint(r) for r in live if finding.reason in HANGS and saved_since_progress(r)]
    order = StopOrderRow(
        id=new_id("stop"),
        budget_id=pod.budget_id,
        pod_id=pod.id,
        reason=finding.reason,
        state=StopState.REQUESTED,
        deadline=now + timedelta(seconds=grace),
        created_at=now,
        updated_at=now,
        next_attempt_at=now,
    )
    session.add(order)
    book.orders[pod.id] = order
    pod.state = PodState.STOPPING
    for run in book.runs_on(pod.id):
        run.directive = Action.STOP
        run.directive_reason = finding.reason
        run.directive_message = finding.message
    if finding.reason is Reason.CEILING:
        book.budget.state = after_ceiling(book.budget.state)
    saved = (
        f" Its work is already saved ({'; '.join(_said(c) for c in safe)}): no wait for a save."
        if safe
        else ""
    )
    _record(
        session,
        book,
        f"pod:{pod.id}",
        finding,
        f"Stop ordered ({finding.reason.value}): {finding.message}{saved}",
        stop_order=order.id,
        deadline=order.deadline.isoformat(),
        grace_s=grace,
        safe_checkpoints=safe,
    )
    session.flush()
    return order


def saved_since_progress(run: LiveRun) -> bool:
    """The job's latest checkpoint is no older than its latest progress (or, before any, its
    start): nothing to lose."""
    progress_at = run.progress_at or run.started_at
    return run.checkpoint_at is not None and run.checkpoint_at >= progress_at


def _save_grace_s(run: LiveRun, reason: Reason, now: datetime) -> float:
    return save_grace_s(
        reason,
        run.checkpoint_grace_s,
        heard=heard_lately(run, now),
        saved_since_progress=saved_since_progress(run),
    )


def _checkpoint(run: LiveRun) -> dict[str, object]:
    return {"run": run.id, "step": run.checkpoint_step, "path": run.checkpoint_path}


def _said(checkpoint: dict[str, object]) -> str:
    return f"run {checkpoint['run']}: checkpoint at step {checkpoint['step']}, {checkpoint['path']}"


def _may_retell(run: LiveRun) -> bool:
    """The run's directive may carry a new reason: it is not held to its canary (the hold's
    reason stays while it is held; its job reads it to keep to the canary)."""
    return run.directive is Action.CONTINUE and run.directive_reason is not Reason.CANARY_HOLD


def _ask_checkpoint(session: Session, book: LiveBook, run: LiveRun, finding: Finding) -> None:
    flag = CHECKPOINT_FLAG.get(finding.rule) or RUN_ALERT_FLAG.get(finding.reason)
    setattr(run, flag or "checkpoint_asked", True)
    if _may_retell(run):
        run.directive = Action.CHECKPOINT
        run.directive_reason = finding.reason
        run.directive_message = finding.message
    _record(
        session,
        book,
        f"run:{run.id}",
        finding,
        f"Checkpoint requested ({finding.reason.value}): {finding.message}",
    )


def _warn(session: Session, book: LiveBook, run: LiveRun | None, finding: Finding) -> None:
    subject = f"budget:{book.budget.id}"
    if finding.reason is Reason.THRESHOLD:
        # evidence values are typed `object`; the threshold rule's `threshold_pct` is an int
        book.budget.alerted_pct = int(finding.evidence["threshold_pct"])  # type: ignore[call-overload]
    elif run is not None:
        setattr(run, RUN_ALERT_FLAG[finding.reason], True)
        subject = f"run:{run.id}"
        if _may_retell(run):
            run.directive_reason = finding.reason
            run.directive_message = finding.message
    _record(session, book, subject, finding, finding.message)


def _record(
    session: Session,
    book: LiveBook,
    subject: str,
    finding: Finding,
    message: str,
    **evidence: object,
) -> None:
    """A rule's firing, as an event with the inputs that made it fire."""
    events.record(
        session,
        book.now,
        finding.severity,
        CATEGORY_OF[finding.reason],
        subject,
        message,
        budget_id=book.budget.id,
        evidence={**finding.evidence, "rule": finding.rule, **evidence},
    )


def enforce_all(ctx: ServiceContext) -> None:
    """Clear the hold of a team whose next period has started; then let the policy look at
    every budget with a pod that bills, and record what it decides: in batches of budgets,
    each a transaction of its own."""
    with ctx.read_only() as session:
        billing = repo.billing_budgets(session)
        holds_over = team_money.holds_over(session, ctx.clock.now())
    if holds_over:  # a held team's next period has started: its hold clears now
        with ctx.unit_of_work() as session:
            team_money.clear_past_holds(session, ctx.clock.now())
    for batch in batches(billing, ctx.pods_per_transaction):
        with ctx.unit_of_work() as session:
            repo.lock_budgets(session, batch)  # the clock is read once we hold them
            enforce_budgets(
                session, ctx.config, batch, ctx.clock.now(), heard_since=ctx.lease.resumed_at
            )
