"""A job's heartbeat: record what it says, hand back the directive the policy left for it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, Protocol

from sqlalchemy.orm import Session, sessionmaker

from governor.db import repository as repo
from governor.db.engine import unit_of_work
from governor.db.heartbeats import PlainRun, PlainWrite, commit_plain, read_plain_runs
from governor.db.tables import RunPhaseRow, RunRow, StopOrderRow
from governor.domain.errors import NotFound, RunEnded
from governor.domain.health import Response
from governor.domain.ledger import (
    RESERVE_DOC,
    SHUTDOWN_DOC,
    STORAGE_TAIL_DOC,
    Figures,
    figures_of,
)
from governor.domain.model import Action, Category, Phase, Reason, Role, RunStatus, Severity
from governor.domain.policy import next_heartbeat_s
from governor.domain.run_lifecycle import after_report
from governor.domain.stop_order import ACTIVE_STATES, StopState, after_ack, after_delivery
from governor.services import events
from governor.services.context import GovernorConfig
from governor.services.jobs import training_health
from governor.services.money.book import KEPT_FIGURES, open_book
from governor.services.monitoring import metric_history
from governor.services.security.tokens import Principal
from governor.services.stopping.enforcement import enforce


@dataclass(frozen=True)
class Checkpoint:
    step: int
    path: str


@dataclass(frozen=True)
class Heartbeat:
    step: int
    total_steps: int | None = None
    phase: Phase | None = None
    status: RunStatus = RunStatus.RUNNING
    checkpoint: Checkpoint | None = None
    metrics: dict[str, Any] | None = None


@dataclass(frozen=True)
class BudgetBrief:
    """The budget's figures a heartbeat is answered with: committed spend is spent + shutdown
    + storage_tail + reserve, and the budget stops when it reaches the effective ceiling."""

    spent: Decimal
    shutdown: Decimal = field(metadata={"doc": SHUTDOWN_DOC})
    storage_tail: Decimal = field(metadata={"doc": STORAGE_TAIL_DOC})
    reserve: Decimal = field(metadata={"doc": RESERVE_DOC})
    committed: Decimal
    effective_ceiling: Decimal
    remaining: Decimal
    burn_rate_per_hour: Decimal
    as_of: datetime = field(
        metadata={
            "doc": "when these figures were taken: the latest enforcement pass over the budget"
        }
    )


@dataclass(frozen=True)
class Directive:
    action: Action
    reason: Reason | None
    message: str | None
    deadline: datetime | None
    budget: BudgetBrief
    next_heartbeat_s: float


def check_in(
    sessions: sessionmaker[Session],
    config: GovernorConfig,
    run_id: str,
    beat: Heartbeat,
    now: datetime,
) -> Directive:
    """Take a job's heartbeat: its cost does not depend on the size of the budget.

    A beat that may be plain is taken as one of a group (`check_in_group`, a group of one
    here); any other beat takes the full path (`check_in_fully`)."""
    [answer] = check_in_group(sessions, [(run_id, beat)], now)
    if answer is None:
        return check_in_fully(sessions, config, run_id, beat, now)
    if isinstance(answer, Exception):
        raise answer
    return answer


def check_in_fully(
    sessions: sessionmaker[Session],
    config: GovernorConfig,
    run_id: str,
    beat: Heartbeat,
    now: datetime,
) -> Directive:
    """Take any heartbeat the full way (`heartbeat`), in a unit of work of its own."""
    with unit_of_work(sessions) as session:
        return heartbeat(session, config, run_id, beat, now)


def check_in_group(
    sessions: sessionmaker[Session],
    beats: Sequence[tuple[str, Heartbeat]],
    now: datetime,
) -> list[Directive | Exception | None]:
    """Take the plain beats among these runs' beats, together: for each, its directive, what
    refused it (`NotFound`, `RunEnded`, or what stopped its write), or None for a beat that is
    not plain and must take the full path (`check_in_fully`), as must a second beat of a run
    in one group (it follows the first, which the group writes).

    A plain beat (progress, phase and metrics; no checkpoint, no new status, no step back,
    no stop under way, on a budget a pass has looked at) reads its run and the figures the
    latest enforcement pass kept on its budget (`PlainRun`: one read for up to 256 runs of
    the group), then writes the run's own columns, its metrics and the phase it entered, if
    any, committed together with the group's other plain beats and with any others that
    arrive meanwhile (`commit_plain`): under load many beats share one read and one commit,
    and on SQLite one turn of its single writer. An answer is given once its write is
    committed. A beat that says by itself that it is not plain (a checkpoint, an ended
    status: a stop's acknowledgement) is not read here at all. Deciding stays with the
    enforcement pass, whose reaction time the committed spend already covers.
    """
    engine = sessions.kw["bind"]
    runs = read_plain_runs(engine, {run_id for run_id, beat in beats if _may_be_plain(beat)})
    answers: list[Directive | Exception | None] = []
    writes: dict[int, PlainWrite] = {}  # by the place of its beat's answer
    seen: set[str] = set()
    for run_id, beat in beats:
        answer: Directive | Exception | None = None
        write: PlainWrite | None = None
        if run_id not in seen and _may_be_plain(beat):
            try:
                answer, write = _plain_beat(runs.get(run_id), run_id, beat, now)
            except (NotFound, RunEnded) as refusal:
                answer = refusal
        seen.add(run_id)
        if write is not None:
            writes[len(answers)] = write
        answers.append(answer)
    failures = commit_plain(engine, list(writes.values()))
    for place, failure in zip(writes, failures, strict=True):
        if failure is not None and not isinstance(failure, Exception):
            raise failure  # interrupted
        if failure is not None:
            answers[place] = failure
    return answers


def _may_be_plain(beat: Heartbeat) -> bool:
    """A beat that names a checkpoint or an ended status is never plain, whatever its run."""
    return beat.checkpoint is None and beat.status.is_live


class RunFacts(Protocol):
    """What a beat's answer and its checks read of its run: a plain beat's `PlainRun` or the
    full path's row."""

    @property
    def id(self) -> str: ...
    @property
    def status(self) -> RunStatus: ...
    @property
    def ended_at(self) -> datetime | None: ...
    @property
    def step(self) -> int: ...
    @property
    def phase(self) -> Phase | None: ...
    @property
    def pace_at(self) -> datetime | None: ...
    @property
    def heartbeat_timeout_s(self) -> float: ...
    @property
    def directive(self) -> Action: ...
    @property
    def directive_reason(self) -> Reason | None: ...
    @property
    def directive_message(self) -> str | None: ...
    @property
    def health_rules(self) -> list[dict[str, Any]] | None: ...
    @property
    def health_state(self) -> dict[str, Any] | None: ...


def _plain_beat(
    run: PlainRun | None, run_id: str, beat: Heartbeat, now: datetime
) -> tuple[Directive | None, PlainWrite | None]:
    """A plain beat's directive and what it writes; (None, None) for a beat that is not."""
    if run is None:
        raise NotFound(f"no run {run_id!r}")
    refuse_after_end(run)
    health, found = training_health.judge(
        run.health_rules, run.health_state, beat.metrics, beat.step
    )
    figures = figures_of(run)
    if figures is None or found or not _plain(run, beat):
        return None, None
    points = metric_history.points(run_id, beat.step, beat.metrics, now)
    entered = {"run_id": run_id, "phase": beat.phase, "at": now, "step": beat.step}
    phases = [entered] if _new_phase(run, beat) else []
    write = PlainWrite(run_id, _changes(run, beat, now, health), points, phases)
    return _directive(run, run.figures_at, None, figures, now), write


def heartbeat(
    session: Session, config: GovernorConfig, run_id: str, beat: Heartbeat, now: datetime
) -> Directive:
    """Record any beat and answer with the run's directive, in the caller's transaction: the
    run's own row, its pod's stop order when it has been told to stop (locked alone, to take
    an acknowledgement), and the figures the latest enforcement pass kept on the budget.

    Rows are locked in the order the enforcement pass and the stop task take them: the budget,
    the stop order, then the run's row; the other way round, a beat writing its run while the
    stop task ends that run under the order's lock would deadlock."""
    run, kept = repo.run_with(session, run_id, *KEPT_FIGURES)
    refuse_after_end(run, late_ack=_late_ack(beat))
    health, found = training_health.judge(
        run.health_rules, run.health_state, beat.metrics, beat.step
    )
    stopping = run.health_stop is None and any(f.action is Response.STOP for f in found)
    if stopping:
        repo.get_budget(session, run.budget_id, lock=True)
    told = run.directive is Action.STOP
    order = repo.latest_stop_order(session, run.pod_id, lock=True) if told else None
    _record(session, run, beat, now, health)
    if run.status.is_live and training_health.act(session, run, found, now):
        session.flush()
        enforce(session, config, run.budget_id, now)  # a health stop is ordered at once
        if run.directive is Action.STOP:  # the order this beat gave: this transaction's own
            order = repo.latest_stop_order(session, run.pod_id, lock=True)
    if order is not None and order.state in ACTIVE_STATES:
        _advance_order(session, run, order, beat, now)
    figures = figures_of(kept)
    if figures is None:  # no pass has looked at this budget yet
        figures = open_book(session, run.budget_id, now, config).figures
    return _directive(run, kept.figures_at, order, figures, now)


def refuse_after_end(run: RunFacts, *, late_ack: bool = False) -> None:
    """A job may act for its run only while the run lives; after its end only a stop's late
    acknowledgement is taken (its checkpoint is worth recording). RunEnded otherwise."""
    if run.status.is_live or late_ack:
        return
    at = "" if run.ended_at is None else f" at {run.ended_at:%Y-%m-%d %H:%M:%S} UTC"
    raise RunEnded(
        f"run {run.id} ended ({run.status.value}){at}: nothing more is taken from its job, "
        "which should stop"
    )


def refuse_ended_job(session: Session, caller: Principal) -> None:
    """A job token acts only while its run lives (its events, extension requests, plans)."""
    if caller.role is Role.JOB and caller.run_id is not None:
        refuse_after_end(repo.get_run(session, caller.run_id))


def _late_ack(beat: Heartbeat) -> bool:
    return beat.checkpoint is not None and beat.status in (RunStatus.STOPPING, RunStatus.STOPPED)


def _plain(run: RunFacts, beat: Heartbeat) -> bool:
    """A beat that changes nothing but the run's own progress columns (its phase too, with a
    row of the run's phase history)."""
    return (
        beat.checkpoint is None
        and beat.status is run.status
        and beat.step >= run.step
        and run.directive is not Action.STOP
    )


def _new_phase(run: RunFacts, beat: Heartbeat) -> bool:
    return beat.phase is not None and beat.phase is not run.phase


def _directive(
    run: RunFacts,
    figures_at: datetime | None,
    order: StopOrderRow | None,
    figures: Figures,
    now: datetime,
) -> Directive:
    age_s = 0.0 if figures_at is None else (now - figures_at).total_seconds()
    to_ceiling = figures.seconds_to_ceiling()
    return Directive(
        action=run.directive if run.status.is_live else Action.STOP,  # a late ack: stay stopped
        reason=run.directive_reason,
        message=run.directive_message,
        deadline=None if order is None else order.deadline,
        budget=BudgetBrief(
            spent=figures.spent,
            shutdown=figures.shutdown,
            storage_tail=figures.storage_tail,
            reserve=figures.reserve,
            committed=figures.committed,
            effective_ceiling=figures.effective_ceiling,
            remaining=figures.remaining,
            burn_rate_per_hour=figures.burn_per_hour,
            as_of=figures_at or now,
        ),
        next_heartbeat_s=next_heartbeat_s(
            run.heartbeat_timeout_s, None if to_ceiling is None else max(0.0, to_ceiling - age_s)
        ),
    )


def _changes(
    run: RunFacts, beat: Heartbeat, now: datetime, health: dict[str, Any] | None
) -> dict[str, Any]:
    """The run's own columns a beat moves: when it was heard, its step, phase and metrics, and
    its health rules' running statistics."""
    changes: dict[str, Any] = {"last_heartbeat_at": now, "step": beat.step}
    if beat.step > run.step:  # backwards is a restart from a checkpoint: no progress yet
        changes.update(progress_at=now, stall_alerted=False, idle_alerted=False)
    if beat.total_steps is not None:
        changes["total_steps"] = beat.total_steps
    if _new_phase(run, beat):  # idleness counts from a phase's start, and is warned of anew
        changes.update(phase=beat.phase, phase_since=now, idle_alerted=False)
    if beat.metrics is not None:
        changes["metrics"] = beat.metrics
    if health is not run.health_state:
        changes["health_state"] = health
    if run.pace_at is None and beat.step > 0 and beat.phase in (None, Phase.TRAINING):
        changes.update(pace_step=beat.step, pace_at=now)
    return changes


def _record(
    session: Session, run: RunRow, beat: Heartbeat, now: datetime, health: dict[str, Any] | None
) -> None:
    if _new_phase(run, beat):
        session.add(RunPhaseRow(run_id=run.id, phase=beat.phase, at=now, step=beat.step))
    if beat.step < run.step and run.last_heartbeat_at is not None:
        _restarted(session, run, beat.step, now)
    for column, value in _changes(run, beat, now, health).items():
        setattr(run, column, value)
    metric_history.record(session, run.id, beat.step, beat.metrics, now)
    status = after_report(run.status, beat.status)
    if status is not run.status:
        _status_changed(session, run, status, now)
    if beat.checkpoint is not None:
        run.checkpoint_step = beat.checkpoint.step
        run.checkpoint_path = beat.checkpoint.path
        run.checkpoint_at = now
        if run.directive is Action.CHECKPOINT:
            run.directive, run.directive_reason, run.directive_message = Action.CONTINUE, None, None
        events.record(
            session,
            now,
            Severity.INFO,
            Category.HARNESS,
            f"run:{run.id}",
            f"Checkpoint saved at step {beat.checkpoint.step}: {beat.checkpoint.path}",
            budget_id=run.budget_id,
            evidence={"step": beat.checkpoint.step, "path": beat.checkpoint.path},
            routine=True,
        )


def _restarted(session: Session, run: RunRow, step: int, now: datetime) -> None:
    """The step went backwards within an attempt: the job restarted from a checkpoint (the
    stall clock runs on). An attempt's first beat is never a restart: a resumed run's new
    attempt begins where its job says, which may be before the checkpoint it will load."""
    events.record(
        session,
        now,
        Severity.WARNING,
        Category.HARNESS,
        f"run:{run.id}",
        f"The job restarted from step {step} (it had reached step {run.step}); "
        + (
            f"its last checkpoint was at step {run.checkpoint_step}."
            if run.checkpoint_step is not None
            else "it had named no checkpoint."
        ),
        budget_id=run.budget_id,
        evidence={"from_step": run.step, "to_step": step, "checkpoint_step": run.checkpoint_step},
    )


def _status_changed(session: Session, run: RunRow, status: RunStatus, now: datetime) -> None:
    previous, run.status = run.status, status
    if not status.is_live and run.ended_at is None:
        run.ended_at = now
    events.record(
        session,
        now,
        Severity.WARNING if status is RunStatus.FAILED else Severity.INFO,
        Category.HARNESS,
        f"run:{run.id}",
        f"Run status {previous.value} -> {status.value} at step {run.step}.",
        budget_id=run.budget_id,
        evidence={"from": previous.value, "to": status.value, "step": run.step},
        routine=True,
    )


def _advance_order(
    session: Session, run: RunRow, order: StopOrderRow, beat: Heartbeat, now: datetime
) -> None:
    acked = beat.status is RunStatus.STOPPED or (
        beat.status is RunStatus.STOPPING and beat.checkpoint is not None
    )
    state = after_ack(order.state) if acked else after_delivery(order.state)
    if state is order.state:
        return
    order.state, order.updated_at = state, now
    if state is StopState.JOB_NOTIFIED:
        order.notified_at = now
        message = "The job has received its stop directive."
        evidence: dict[str, object] = {"deadline": order.deadline.isoformat()}
    else:
        order.acked_at = now
        checkpoint = beat.checkpoint
        order.ack_checkpoint = (
            None if checkpoint is None else {"step": checkpoint.step, "path": checkpoint.path}
        )
        message = (
            f"The job acknowledged the stop with a checkpoint at step {checkpoint.step}."
            if checkpoint
            else "The job reported it has stopped (no checkpoint named)."
        )
        evidence = {"checkpoint": order.ack_checkpoint, "status": beat.status.value}
    events.record(
        session,
        now,
        Severity.INFO,
        Category.HARNESS,
        f"run:{run.id}",
        message,
        budget_id=run.budget_id,
        evidence={**evidence, "stop_order": order.id},
    )
