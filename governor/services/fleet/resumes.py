"""Resuming a stopped pod once its budget is open again, and its run's next attempt.

An operator asks. The governor reads the pod's rate again at the provider (capacity can come
back at another price), checks that the budget would still hold with the pod running
(committed spend below the effective ceiling) and that the budget's plan still passes
preflight, then marks the pod `resuming`, persisted before the provider is asked: from
then on it bills compute (fail closed). Then the provider's own start call: accepted, the
pod runs and the run it stopped with takes up its next attempt with a new job token (the
old one ends) from its last checkpoint; refused, the pod is `stopped` again, with an event.

The governor starts no process: whatever launched the job (the pod's entrypoint, a
supervisor, a person) launches it again with the new token.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.engine import read_only, unit_of_work
from governor.db.tables import PodRow, RunRow
from governor.domain.errors import Conflict, Invalid, Unavailable
from governor.domain.ledger import committed_in_parts
from governor.domain.model import (
    Action,
    BudgetState,
    Category,
    PodState,
    Role,
    RunStatus,
    Severity,
)
from governor.domain.money import charge, dollars, dollars_per_hour, format_usd
from governor.domain.ports import (
    CallOutcome,
    CallResult,
    PodDescription,
    Provider,
    ProviderError,
    Resumes,
)
from governor.domain.preflight.rules import Verdict
from governor.services import events
from governor.services.context import ServiceContext
from governor.services.money import team_money
from governor.services.money.book import meter, open_book
from governor.services.money.metering import accrue_pod
from governor.services.plans import admission
from governor.services.security import tokens
from governor.services.security.tokens import Principal
from governor.services.stopping import provider_states

log = logging.getLogger(__name__)

SETTLE_AFTER_S = 300.0  # a resume still `resuming` this long was cut short: look at the pod
RESUMABLE_RUNS = (RunStatus.STOPPED, RunStatus.LOST)  # ended with their pod, work unfinished
UNHEARD = (
    "found running after a resume cut short; the new attempt's token was never handed "
    "out, so its job cannot check in and the pod is stopped once the heartbeat timeout "
    "passes: resume it again then"
)


class ResumeRefused(Conflict):
    """The provider would not start the pod now (no capacity, refused); it stays stopped."""


@dataclass(frozen=True)
class Resumed:
    pod: PodRow
    run: RunRow | None  # the run taking up its next attempt, if the pod stopped with one
    token: str | None  # that attempt's job token, shown once


def resume(ctx: ServiceContext, pod_id: str, reason: str, *, by: Principal) -> Resumed:
    """Resume a stopped pod for an operator; see the module's docstring for the order."""
    with unit_of_work(ctx.sessions) as session:
        pod = repo.get_pod(session, pod_id)
        name, ref = pod.provider, pod.provider_ref
    provider = ctx.provider(name)
    if not isinstance(provider, Resumes):
        raise Conflict(
            f"{name} cannot start a stopped pod again: launch a new one on the kept "
            "workspace and register it under the budget"
        )
    described = _describe(provider, name, ref)
    with unit_of_work(ctx.sessions) as session:
        _note(session, pod_id, described.provider_state, described.state_known, ctx.clock.now())
    if not described.state_known:
        raise Conflict(
            f"{name} says pod {ref!r} is {described.provider_state!r}, a state it does not "
            "document: it is not resumed until the provider reports one it documents"
        )
    with unit_of_work(ctx.sessions) as session:
        _begin(session, ctx, pod_id, reason, by, described, ctx.clock.now())
    try:
        result = provider.resume(ref)
    except ProviderError as exc:
        result = CallResult.failed(exc)
    except Exception as exc:  # a provider bug must not leave the pod resuming
        log.exception("resume call to %s failed", name)
        result = CallResult(CallOutcome.RETRYABLE, f"{type(exc).__name__}: {exc}")
    with unit_of_work(ctx.sessions) as session:
        if result.provider_state is not None or not result.state_known:
            _note(session, pod_id, result.provider_state, result.state_known, ctx.clock.now())
        resumed = _finish(session, pod_id, result, ctx.clock.now())
    if resumed is not None and resumed.run is not None:
        run_id = resumed.run.id  # its earlier token ends here now, on other replicas within a TTL
        ctx.tokens.forget(lambda p: p.run_id == run_id)
    if resumed is None:
        if result.outcome is CallOutcome.RETRYABLE:
            raise Unavailable(f"{name} did not start the pod: {result.detail}")
        raise ResumeRefused(f"{name} refused to start the pod: {result.detail}")
    return resumed


def _describe(provider: Provider, name: str, ref: str) -> PodDescription:
    try:
        return provider.describe(ref)
    except ProviderError as exc:
        if exc.retryable:
            raise Unavailable(f"{name} did not answer: {exc}") from exc
        raise Conflict(f"{name} cannot describe {ref!r}: {exc}") from exc


def _note(
    session: Session, pod_id: str, provider_state: str | None, known: bool, now: datetime
) -> None:
    """The state the provider reported for the pod, recorded under its budget's lock."""
    pod = repo.get_pod(session, pod_id)
    repo.get_budget(session, pod.budget_id, lock=True)
    session.refresh(pod)
    provider_states.note(session, pod, provider_state, known, now)


def _begin(
    session: Session,
    ctx: ServiceContext,
    pod_id: str,
    reason: str,
    by: Principal,
    described: PodDescription,
    now: datetime,
) -> None:
    """Check, under the budget's lock, that the pod may resume; then mark it resuming."""
    pod = repo.get_pod(session, pod_id)
    budget = repo.get_budget(session, pod.budget_id, lock=True)
    session.refresh(pod)
    if pod.state is not PodState.STOPPED:
        raise Conflict(f"pod {pod.id} is {pod.state.value}: only a stopped pod can be resumed")
    if described.state is PodState.GONE:
        raise Conflict(f"{pod.provider} says pod {pod.provider_ref!r} is gone: nothing to resume")
    if budget.state is not BudgetState.OPEN:
        figures = open_book(session, budget.id, now, ctx.config).figures
        raise Conflict(
            f"budget {budget.id} is {budget.state.value}: {committed_in_parts(figures)} of "
            f"{dollars(figures.effective_ceiling)}; approve an extension of at least "
            f"{dollars(figures.extension_to_go_on)} to reopen it first"
        )
    team_money.refuse_if_held(session, budget.team_id, "resume", now)
    accrue_pod(session, pod, now)  # its storage, at the stopped rate, up to the resume
    previous_rate = pod.hourly_rate_usd
    if described.hourly_rate_usd is not None:
        pod.hourly_rate_usd = described.hourly_rate_usd
    pod.state, pod.resumed_at = PodState.RESUMING, now
    run = _resumable_run(session, pod)
    figures = open_book(session, budget.id, now, ctx.config).figures
    grace = 0.0 if run is None else run.checkpoint_grace_s  # its next attempt may save first
    committed = figures.committed + charge(meter(pod).burn_per_hour, grace)
    if committed >= figures.effective_ceiling:
        raise Conflict(
            f"resuming pod {pod.id} at {dollars_per_hour(pod.hourly_rate_usd)} would commit "
            f"{dollars(committed)} of the effective ceiling "
            f"{dollars(figures.effective_ceiling)} (spent {dollars(figures.spent)}): "
            f"an extension of more than {dollars(committed - figures.effective_ceiling)} "
            "is needed"
        )
    verdict = admission.recheck(session, ctx.config, budget.id, now)
    if verdict is not None and verdict.verdict is Verdict.NO_GO:
        reasons = "; ".join(str(r.get("message", "")) for r in verdict.reasons) or "see the plan"
        raise Conflict(
            f"the budget's plan {verdict.job_id!r} no longer passes preflight ({reasons}): "
            "submit a plan that fits before resuming"
        )
    events.record(
        session,
        now,
        Severity.WARNING,
        Category.OPERATOR,
        f"pod:{pod.id}",
        f"Pod resume asked by {by.said}: {reason}. It bills "
        f"{dollars_per_hour(pod.hourly_rate_usd)} from now"
        + (
            f" (was {dollars_per_hour(previous_rate)})."
            if pod.hourly_rate_usd != previous_rate
            else "."
        ),
        budget_id=budget.id,
        evidence={
            "reason": reason,
            "hourly_rate_usd": format_usd(pod.hourly_rate_usd),
            "previous_rate_usd": format_usd(previous_rate),
            "committed_usd": format_usd(committed),
            "effective_ceiling_usd": format_usd(figures.effective_ceiling),
            "run_id": None if run is None else run.id,
            "by": by.evidence,
        },
    )


def _resumable_run(session: Session, pod: PodRow) -> RunRow | None:
    """The run that stopped with the pod and had not finished: the latest one on it."""
    runs = repo.runs_on_pod(session, pod.id)
    latest = max(runs, key=lambda r: r.created_at, default=None)
    return latest if latest is not None and latest.status in RESUMABLE_RUNS else None


def _finish(session: Session, pod_id: str, result: CallResult, now: datetime) -> Resumed | None:
    """The provider has answered: the pod runs and its run's next attempt begins, or it is
    stopped again. None when the provider refused."""
    pod = repo.get_pod(session, pod_id)
    repo.get_budget(session, pod.budget_id, lock=True)
    session.refresh(pod)
    run = _resumable_run(session, pod)
    if result.outcome is not CallOutcome.DONE:
        _back_to_stopped(session, pod, run, result.detail, now)
        return None
    if pod.state is PodState.RESUMING:
        pod.state = PodState.RUNNING
    token = None if run is None else _next_attempt(session, run, now)
    events.record(
        session,
        now,
        Severity.INFO,
        Category.PROVIDER,
        f"pod:{pod.id}",
        f"{pod.provider} started the pod again on its kept workspace ({result.detail})."
        + (
            f" Run {run.name!r} continues as attempt {run.attempt}"
            + (
                f" from its checkpoint at step {run.checkpoint_step} ({run.checkpoint_path})"
                if run.checkpoint_path
                else " with no checkpoint named"
            )
            + ": relaunch the job with the new token."
            if run is not None
            else " No unfinished run stopped with it: create a run for the next job."
        ),
        budget_id=pod.budget_id,
        evidence={"detail": result.detail, "run_id": None if run is None else run.id},
    )
    return Resumed(pod, run, token)


def _next_attempt(session: Session, run: RunRow, now: datetime) -> str:
    """The run starts over from its last checkpoint, with a new job token; the old one ends."""
    tokens.revoke_of_run(session, run.id, now)
    run.attempt, run.started_at = run.attempt + 1, now
    run.status, run.ended_at, run.last_heartbeat_at = RunStatus.RUNNING, None, None
    run.step = run.checkpoint_step or 0
    run.progress_at, run.pace_step, run.pace_at = now, None, None
    run.phase, run.phase_since = None, None
    run.directive, run.directive_reason, run.directive_message = Action.CONTINUE, None, None
    run.checkpoint_asked = run.team_checkpoint_asked = run.forecast_warned = False
    run.idle_alerted = run.stall_alerted = run.headroom_warned = False
    run.health_state = run.health_stop = None  # its health is judged afresh from the checkpoint
    return tokens.issue(session, Role.JOB, now, run_id=run.id, budget_id=run.budget_id)


def _back_to_stopped(
    session: Session, pod: PodRow, run: RunRow | None, detail: str, now: datetime
) -> None:
    """The provider did not start the pod: it is stopped again; its run stays as it ended."""
    if pod.state is PodState.RESUMING:
        accrue_pod(session, pod, now)
        pod.state = PodState.STOPPED
    events.record(
        session,
        now,
        Severity.WARNING,
        Category.PROVIDER,
        f"pod:{pod.id}",
        f"{pod.provider} did not start the pod again ({detail}); it stays stopped with its "
        "workspace kept. Try again later, or on another machine.",
        budget_id=pod.budget_id,
        evidence={"detail": detail, "run_id": None if run is None else run.id},
    )


def settle(ctx: ServiceContext) -> int:
    """Pods left `resuming` by a resume cut short (a crash between asking and recording):
    the provider says what became of them. Returns how many were settled."""
    now = ctx.clock.now()
    with read_only(ctx.sessions) as session:
        stale = [
            (p.id, p.provider, p.provider_ref)
            for p in repo.pods_in_state(session, PodState.RESUMING)
            if p.resumed_at is None or now - p.resumed_at > timedelta(seconds=SETTLE_AFTER_S)
        ]
    settled = 0
    for pod_id, name, ref in stale:
        try:
            described = ctx.provider(name).describe(ref)
        except (ProviderError, Invalid):
            continue  # asked again at the next pass
        state, known = described.state, described.state_known
        if not known:  # it stays resuming, billing, until a documented state arrives
            with unit_of_work(ctx.sessions) as session:
                _note(session, pod_id, described.provider_state, known, ctx.clock.now())
            continue
        result = (
            CallResult(CallOutcome.DONE, UNHEARD)
            if state.bills_compute
            else CallResult(CallOutcome.PERMANENT, f"found {state.value} after a resume cut short")
        )
        with unit_of_work(ctx.sessions) as session:
            _note(session, pod_id, described.provider_state, known, ctx.clock.now())
            _finish(session, pod_id, result, ctx.clock.now())
        settled += 1
    return settled
