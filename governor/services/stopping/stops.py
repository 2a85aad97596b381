"""Carrying out stop orders: wait for the job or the deadline, then the provider's preserving
stop; for a terminate-only pod, its terminate, once the job saved where a terminate keeps it.

Every step is persisted before the external call it leads to, so a crash at any point is
resumed on the next pass and never doubles anything: stopping is idempotent.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum

from sqlalchemy import select
from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.engine import unit_of_work
from governor.db.tables import BudgetRow, PodRow, StopOrderRow
from governor.domain.budget_lifecycle import after_pods_stopped
from governor.domain.errors import NotLeader
from governor.domain.ledger import committed_in_parts
from governor.domain.loss import lost_at_stop
from governor.domain.model import Category, PodState, Reason, Severity
from governor.domain.money import dollars, format_usd
from governor.domain.policy import money_evidence
from governor.domain.ports import (
    AnyProvider,
    CallOutcome,
    CallResult,
    ProviderError,
    StopsPreserving,
    TerminateOnly,
)
from governor.domain.stop_order import (
    ACTIVE_STATES,
    ESCALATE_AFTER_ATTEMPTS,
    StopState,
    after_clock,
    retry_delay_s,
    saved_on,
)
from governor.services import events
from governor.services.context import GovernorConfig, ServiceContext
from governor.services.money.book import metered_state, open_book
from governor.services.money.metering import accrue_pod
from governor.services.runs import lifecycle
from governor.services.stopping import provider_states, stop_times

log = logging.getLogger(__name__)


HELD_RECHECK_S = 60.0  # how often a held pod is looked at (stopped by hand? saved since?)
HELD_ALERT_EVERY_S = 900.0  # how often a held pod's critical alert is repeated


class Action(StrEnum):
    STOP = "stop"  # a preserving stop
    TERMINATE = "terminate"  # terminate-only, after a checkpoint on the persistent filesystem
    LOOK = "look"  # a held pod: has someone stopped it by hand?


@dataclass(frozen=True)
class _Call:
    order_id: str
    provider: str
    ref: str
    action: Action
    sent_at: datetime
    keep: str | None = None


def advance(ctx: ServiceContext) -> int:
    """Move every due stop order one step; returns how many provider calls were made."""
    with unit_of_work(ctx.sessions) as session:
        budget_ids = session.scalars(
            select(StopOrderRow.budget_id).where(StopOrderRow.state.in_(ACTIVE_STATES)).distinct()
        ).all()
    calls = []
    for budget_id in budget_ids:  # one budget per transaction: writers never hold two
        with unit_of_work(ctx.sessions) as session:
            calls += _prepare(session, ctx, budget_id)
    for call in calls:
        if not ctx.leading():  # paused past the lease: the next leader makes the call
            raise NotLeader(f"the lease ran out before the call for stop order {call.order_id}")
        result = _call_provider(ctx, call)
        held = call.action is Action.LOOK and result.outcome is not CallOutcome.DONE
        if held and result.provider_state is None and result.state_known:
            continue  # still held: it is looked at again, and alerted on, as _hold set out
        with unit_of_work(ctx.sessions) as session:
            _record_outcome(session, ctx, call, result, held=held)
    return len(calls)


def _prepare(session: Session, ctx: ServiceContext, budget_id: str) -> list[_Call]:
    repo.get_budget(session, budget_id, lock=True)
    now = ctx.clock.now()  # read once the budget is ours, so the record keeps its true order
    calls = []
    for order in repo.active_stop_orders(session, [budget_id], lock=True):
        if order.next_attempt_at > now:
            continue
        pod = repo.get_pod(session, order.pod_id)
        _check_deadline(session, order, pod, now)
        if order.state is StopState.HELD or (
            pod.terminate_only
            and order.state.ready_for_provider
            and order.state is not StopState.PROVIDER_STOP_SENT
            and not _saved_on_persistent(order, pod)
        ):
            _hold(session, order, pod, now)
            calls.append(_Call(order.id, pod.provider, pod.provider_ref, Action.LOOK, now))
        elif order.state.ready_for_provider:
            _mark_sent(session, order, pod, now)
            action = Action.TERMINATE if pod.terminate_only else Action.STOP
            calls.append(
                _Call(
                    order.id, pod.provider, pod.provider_ref, action, now, pod.persistent_filesystem
                )
            )
    return calls


def _saved_on_persistent(order: StopOrderRow, pod: PodRow) -> bool:
    path = (order.ack_checkpoint or {}).get("path")
    return saved_on(path if isinstance(path, str) else None, pod.persistent_mount)


def _hold(session: Session, order: StopOrderRow, pod: PodRow, now: datetime) -> None:
    """A terminate-only pod the governor will not terminate: alert, and look again later."""
    order.state, order.updated_at = StopState.HELD, now
    order.next_attempt_at = now + timedelta(seconds=HELD_RECHECK_S)
    if order.alerted_at and (now - order.alerted_at).total_seconds() < HELD_ALERT_EVERY_S:
        return
    order.alerted_at = now
    where = (
        f"on its persistent filesystem {pod.persistent_filesystem!r} (under {pod.persistent_mount})"
        if pod.persistent_filesystem
        else "on a persistent filesystem (none was named when the pod was registered)"
    )
    events.record(
        session,
        now,
        Severity.CRITICAL,
        Category.PROVIDER,
        f"pod:{pod.id}",
        f"{pod.provider} can only terminate this pod, which would lose its disk, and the job "
        f"has not acknowledged a checkpoint {where}. The governor will not terminate it; the "
        "pod is still billing. Have the job save there, or stop the pod by hand.",
        budget_id=pod.budget_id,
        evidence={
            "stop_order": order.id,
            "ack_checkpoint": order.ack_checkpoint,
            "persistent_filesystem": pod.persistent_filesystem,
            "persistent_mount": pod.persistent_mount,
            "alert_every_s": HELD_ALERT_EVERY_S,
        },
    )


def _check_deadline(session: Session, order: StopOrderRow, pod: PodRow, now: datetime) -> None:
    state = after_clock(order.state, order.deadline, now)
    if state is order.state:
        return
    order.state, order.updated_at = state, now
    waited = order.deadline > order.created_at  # no wait at all: a silent job, a saved hang
    events.record(
        session,
        now,
        Severity.WARNING if waited else Severity.INFO,  # the job did not save in its time
        Category.HARNESS,
        f"pod:{pod.id}",
        "The stop deadline passed without the job acknowledging a checkpoint: "
        "stopping the pod anyway.",
        budget_id=pod.budget_id,
        evidence={"stop_order": order.id, "deadline": order.deadline.isoformat()},
    )


def _mark_sent(session: Session, order: StopOrderRow, pod: PodRow, now: datetime) -> None:
    first = order.state is not StopState.PROVIDER_STOP_SENT
    order.state = StopState.PROVIDER_STOP_SENT
    order.attempts += 1
    order.sent_at = order.sent_at or now
    order.updated_at = now
    if order.refused_request_at is not None:  # the retry of a refused request: time it
        span = (now - order.refused_request_at).total_seconds()
        order.longest_retry_s = max(order.longest_retry_s, span)
        order.retried_at, order.refused_request_at = now, None
    if first:
        if pod.terminate_only:
            asked = (
                f"Asking {pod.provider} to terminate the pod, keeping its persistent "
                f"filesystem {pod.persistent_filesystem!r}."
            )
        elif pod.loss_acknowledged is not None:
            asked = (
                f"Asking {pod.provider} to stop the pod; as acknowledged at registration, "
                f"the stop loses its workspace ({pod.cannot_preserve})."
            )
        else:
            asked = f"Asking {pod.provider} to stop the pod, keeping its workspace."
        events.record(
            session,
            now,
            Severity.INFO,
            Category.PROVIDER,
            f"pod:{pod.id}",
            asked,
            budget_id=pod.budget_id,
            evidence={
                "stop_order": order.id,
                "provider_ref": pod.provider_ref,
                "acked": order.acked_at is not None,
            },
        )


def _call_provider(ctx: ServiceContext, call: _Call) -> CallResult:
    provider = ctx.provider(call.provider)
    try:
        if call.action is Action.LOOK:
            return _look(provider, call.ref)
        if call.action is Action.TERMINATE:
            assert isinstance(provider, TerminateOnly) and call.keep is not None
            return provider.terminate(call.ref, keep=call.keep)
        assert isinstance(provider, StopsPreserving)
        return provider.stop(call.ref)
    except ProviderError as exc:
        return CallResult.failed(exc)
    except Exception as exc:  # a provider bug must not kill the pass: retry it
        log.exception("%s call to %s failed", call.action.value, call.provider)
        return CallResult(CallOutcome.RETRYABLE, f"{type(exc).__name__}: {exc}")


def _look(provider: AnyProvider, ref: str) -> CallResult:
    """A held pod is done once it no longer runs, whoever stopped it; never in a state the
    provider does not document."""
    described = provider.describe(ref)
    state, seen = described.state, (described.provider_state, described.state_known)
    if described.state_known and state in (PodState.STOPPED, PodState.GONE):
        return CallResult(
            CallOutcome.DONE, f"the provider says the pod is {state.value}", None, *seen
        )
    return CallResult(CallOutcome.PENDING, f"still {state.value}", None, *seen)


_DONE = {
    Action.STOP: "Pod stopped; its workspace is kept and its storage is still counted.",
    Action.TERMINATE: "Pod terminated after the job saved on its persistent filesystem {fs!r}, "
    "which is kept and still counted.",
    Action.LOOK: "The pod is no longer running (stopped outside the governor); its storage is "
    "still counted.",
}
_STOPPED_LOSING = (
    "Pod stopped; as acknowledged at registration, the stop lost its workspace ({lost}). "
    "Whatever storage remains is still counted."
)


def _lost(action: Action, pod: PodRow) -> str | None:
    """What the stop lost, as the provider said at registration; None: nothing."""
    return pod.cannot_preserve if action is Action.STOP and pod.loss_acknowledged else None


def _done(action: Action, pod: PodRow) -> str:
    """What a finished call is told as."""
    if (lost := _lost(action, pod)) is not None:
        return _STOPPED_LOSING.format(lost=lost)
    return _DONE[action].format(fs=pod.persistent_filesystem)


def _record_outcome(
    session: Session, ctx: ServiceContext, call: _Call, result: CallResult, *, held: bool = False
) -> None:
    """What the provider answered, on the order and its pod. A `held` pod's order is only
    looked at again later (as `_hold` set out): only the state the provider reported is
    recorded."""
    order = repo.get_stop_order(session, call.order_id)
    budget = repo.get_budget(session, order.budget_id, lock=True)
    now = ctx.clock.now()
    session.refresh(order, with_for_update=True)  # a heartbeat may have taken an ack meanwhile
    pod = repo.get_pod(session, order.pod_id)
    if result.outcome is CallOutcome.DONE and not result.state_known:
        result = replace(result, outcome=CallOutcome.PENDING)  # never done on an unknown state
    if not result.state_known or result.provider_state or result.outcome is CallOutcome.DONE:
        provider_states.note(session, pod, result.provider_state, result.state_known, now)
    if held:
        return
    subject = f"pod:{pod.id}"
    evidence = {"stop_order": order.id, "attempts": order.attempts, "detail": result.detail}
    if result.outcome is CallOutcome.DONE:
        if call.action is not Action.LOOK:  # asked of the provider: its time is learned from
            stop_times.record(session, pod, order, now)
        accrue_pod(session, pod, now)
        pod.state, pod.stopped_at = PodState.STOPPED, now
        order.state, order.confirmed_at, order.updated_at = StopState.STOPPED, now, now
        lifecycle.end_with_pod(
            session, pod, now, silence_told=order.reason is Reason.HEARTBEAT_LOST
        )
        events.record(
            session,
            now,
            Severity.INFO,
            Category.PROVIDER,
            subject,
            _done(call.action, pod),
            budget_id=pod.budget_id,
            evidence={**evidence, "reason": order.reason.value, "lost": _lost(call.action, pod)},
            always=True,  # whoever was told of the stop is told it is done
        )
        _settle_budget(session, ctx.config, budget, now)
    elif result.outcome is CallOutcome.PENDING:
        order.next_attempt_at, order.updated_at = now, now
    elif result.outcome is CallOutcome.RETRYABLE:
        delay = retry_delay_s(order.attempts, asked_s=result.retry_after_s, spread=random.random())
        order.last_error, order.updated_at = result.detail, now
        order.refusals, order.refused_request_at = order.refusals + 1, call.sent_at
        order.next_attempt_at = now + timedelta(seconds=delay)
        escalate = order.attempts >= ESCALATE_AFTER_ATTEMPTS
        events.record(
            session,
            now,
            Severity.CRITICAL if escalate else Severity.WARNING,
            Category.PROVIDER,
            subject,
            f"Stop attempt {order.attempts} failed ({result.detail}); retrying in {delay:.1f} s."
            + (" The pod is still billing." if escalate else ""),
            budget_id=pod.budget_id,
            evidence={**evidence, "retry_in_s": round(delay, 3), "asked_s": result.retry_after_s},
        )
    else:
        order.state, order.last_error, order.updated_at = StopState.FAILED, result.detail, now
        events.record(
            session,
            now,
            Severity.CRITICAL,
            Category.PROVIDER,
            subject,
            f"The provider refused to stop the pod ({result.detail}). It is still billing: "
            f"stop it by hand, then POST /v1/pods/{pod.id}/stop to record it.",
            budget_id=pod.budget_id,
            evidence=evidence,
        )


def _settle_budget(
    session: Session, config: GovernorConfig, budget: BudgetRow, now: datetime
) -> None:
    """A budget stopping at its ceiling is exhausted once none of its pods bills compute: it
    says what its committed spend is made of, and the extension that would let it go on."""
    pods = repo.pods_of(session, budget.id)
    if any(metered_state(p).bills_compute for p in pods):
        return
    state = after_pods_stopped(budget.state)
    if state is budget.state:
        return
    budget.state = state
    f = open_book(session, budget.id, now, config).figures
    losses = {p.name: lost for p in pods if (lost := _lost(Action.STOP, p)) is not None}
    lost = lost_at_stop(losses.items())
    stopped = "every pod is stopped with its workspace kept"
    if lost is not None:  # registered with an acknowledged loss: say what their stops lose
        others = "; the others keep theirs" if len(losses) < len(pods) else ""
        stopped = f"every pod is stopped; {lost}{others}"
    events.record(
        session,
        now,
        Severity.CRITICAL,
        Category.BUDGET,
        f"budget:{budget.id}",
        f"Budget exhausted: {stopped}. The ceiling "
        f"{dollars(f.effective_ceiling)} was reached at {committed_in_parts(f)}: approve an "
        f"extension of at least {dollars(f.extension_to_go_on)} to go on.",
        budget_id=budget.id,
        evidence={
            **money_evidence(f),
            "extension_to_go_on_usd": format_usd(f.extension_to_go_on),
            "lost_at_stop": losses,
        },
    )
