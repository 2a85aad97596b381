"""Stop orders end to end inside the process: decide, notify, save, stop, confirm."""

from datetime import timedelta
from decimal import Decimal
from pathlib import Path

from governor.db import repository as repo
from governor.db.tables import StopOrderRow
from governor.domain.model import (
    Action,
    BudgetState,
    PodState,
    Reason,
    RunStatus,
    Severity,
)
from governor.domain.ports import CallOutcome, CallResult, PodDescription
from governor.domain.stop_order import StopState
from governor.fakes.cloud import FakeProvider
from governor.services.fleet import pods
from governor.services.jobs.checkins import Checkpoint
from tests.clock import FrozenClock
from tests.integration.conftest import BY, Governor, make_governor


def order_of(gov: Governor, pod_id: str) -> StopOrderRow:
    with gov.session() as s:
        order = repo.latest_stop_order(s, pod_id)
        assert order is not None
        return order


def pod_state(gov: Governor, pod_id: str) -> PodState:
    with gov.session() as s:
        return repo.get_pod(s, pod_id).state


def messages(gov: Governor) -> list[str]:
    with gov.session() as s:
        return [e.message for e in reversed(repo.events(s, limit=1000))]


def test_ceiling_stop_waits_for_the_checkpoint_then_keeps_the_workspace(gov: Governor) -> None:
    # $3.60/h; committed = spent + 3.60/h x (60 s grace + 30 s latency + 20 s reaction)
    budget = gov.budget(ceiling="1.00")
    pod = gov.pod(budget)
    run = gov.run(budget, pod, grace_s=60, timeout_s=600)
    assert gov.beat(run).action is Action.CONTINUE
    gov.tick(600)  # spent 0.60
    assert gov.beat(run, step=10).action is Action.CONTINUE
    gov.tick(300)  # spent 0.90, committed 1.01: the pass orders the stop
    directive = gov.beat(run, step=15)
    assert (directive.action, directive.reason) == (Action.STOP, Reason.CEILING)
    assert directive.deadline == gov.clock.now() + timedelta(seconds=60)
    assert order_of(gov, pod).state is StopState.JOB_NOTIFIED
    assert pod_state(gov, pod) is PodState.STOPPING

    gov.tick(5)  # the deadline has not passed and the job has not saved: nothing is sent
    assert order_of(gov, pod).state is StopState.JOB_NOTIFIED
    assert gov.cloud.state.pods["pod-1"].stop_calls == 0

    ack = gov.beat(
        run, step=16, status=RunStatus.STOPPING, checkpoint=Checkpoint(16, "/ws/ckpt-16")
    )
    assert ack.action is Action.STOP  # once stop, always stop
    order = order_of(gov, pod)
    assert order.state is StopState.JOB_ACKED
    assert order.ack_checkpoint == {"step": 16, "path": "/ws/ckpt-16"}

    gov.tick(1)  # sent; the provider is still stopping
    assert order_of(gov, pod).state is StopState.PROVIDER_STOP_SENT
    gov.tick(30)
    assert order_of(gov, pod).state is StopState.STOPPED
    assert pod_state(gov, pod) is PodState.STOPPED
    book = gov.book(budget)
    assert book.budget.state is BudgetState.EXHAUSTED
    assert book.figures.spent <= Decimal("1.00")
    assert book.figures.spent >= gov.cloud.state.pods["pod-1"].bill_usd(gov.clock.now())


def test_a_job_that_ignores_stop_is_stopped_at_the_deadline(gov: Governor) -> None:
    budget = gov.budget(ceiling="1.00")
    pod = gov.pod(budget)
    run = gov.run(budget, pod, grace_s=60, timeout_s=600)
    gov.clock.advance(900)
    gov.beat(run, step=5)
    gov.tick()  # the pass orders the stop
    assert gov.beat(run, step=5).action is Action.STOP
    gov.tick(30)
    assert gov.beat(run, step=6).action is Action.STOP  # still running, still told to stop
    gov.tick(30)  # the deadline
    assert order_of(gov, pod).state is StopState.PROVIDER_STOP_SENT
    gov.tick(30)
    assert order_of(gov, pod).state is StopState.STOPPED
    assert any("deadline passed" in m for m in messages(gov))


def test_a_silent_job_is_stopped_without_waiting_for_it(gov: Governor) -> None:
    budget = gov.budget(ceiling="1000")
    pod = gov.pod(budget)
    run = gov.run(budget, pod, timeout_s=60, grace_s=300)
    gov.beat(run)
    gov.tick(61)
    order = order_of(gov, pod)
    assert order.reason is Reason.HEARTBEAT_LOST
    assert order.deadline == order.created_at  # nobody to wait for
    assert order.state is StopState.PROVIDER_STOP_SENT


def test_a_finished_run_lingers_then_its_pod_is_stopped(gov: Governor) -> None:
    budget = gov.budget()
    pod = gov.pod(budget)
    run = gov.run(budget, pod)
    gov.beat(run, step=100, status=RunStatus.FINISHED)
    gov.tick(30)
    assert pod_state(gov, pod) is PodState.RUNNING
    gov.tick(31)
    assert order_of(gov, pod).reason is Reason.FINISHED


def test_pre_stop_checkpoint_is_asked_once_and_cleared_by_a_checkpoint(gov: Governor) -> None:
    budget = gov.budget(ceiling="1.00")
    pod = gov.pod(budget)
    run = gov.run(budget, pod, grace_s=0, timeout_s=1200)
    gov.tick(870)  # spent 0.87, committed 0.92: the pass asks for a checkpoint
    directive = gov.beat(run, step=50)
    assert (directive.action, directive.reason) == (Action.CHECKPOINT, Reason.PRE_STOP)
    assert gov.beat(run, step=51).action is Action.CHECKPOINT  # until it saves
    assert gov.beat(run, step=52, checkpoint=Checkpoint(52, "/ws/c52")).action is Action.CONTINUE
    assert gov.beat(run, step=53).action is Action.CONTINUE  # asked once only


def test_thresholds_are_announced_once_each(gov: Governor) -> None:
    budget = gov.budget(ceiling="100")
    gov.pod(budget)
    gov.tick(3600 * 15)  # $54 spent: 50% crossed
    gov.tick(3600)  # $57.60: nothing new
    gov.tick(3600 * 7)  # $82.80: 80% crossed
    crossed = [m for m in messages(gov) if m.startswith("Spend has passed")]
    assert crossed == [
        "Spend has passed 50% of the ceiling ($54.00 of $100.00).",
        "Spend has passed 80% of the ceiling ($82.80 of $100.00).",
    ]


def test_retryable_provider_failures_back_off_then_succeed(
    migrated_url: str, clock: FrozenClock
) -> None:
    gov = make_governor(migrated_url, clock, failures=2, latency=0)
    budget = gov.budget()
    pod = gov.pod(budget)
    with gov.session() as s:
        pods.stop_manually(s, gov.ctx, pod, "test", clock.now(), by=BY)
    gov.tick()  # attempt 1 fails: retry in 0.8 to 1 s (backoff less jitter)
    order = order_of(gov, pod)
    assert (order.attempts, order.last_error) == (1, "simulated provider error (HTTP 503)")
    wait = order.next_attempt_at - clock.now()
    assert timedelta(seconds=0.8) < wait <= timedelta(seconds=1)
    gov.tick(0.5)  # not yet due
    assert order_of(gov, pod).attempts == 1
    gov.tick(0.5)  # attempt 2 fails: retry in 2 s
    assert order_of(gov, pod).attempts == 2
    gov.tick(2)  # attempt 3 succeeds
    assert order_of(gov, pod).state is StopState.STOPPED
    assert gov.cloud.state.pods["pod-1"].stop_calls == 3
    gov.ctx.engine.dispose()


def test_a_providers_retry_after_is_waited_out(migrated_url: str, clock: FrozenClock) -> None:
    cloud = FakeProvider(clock, stop_failures=1, stop_latency_s=0, retry_after_s=30.0)
    gov = make_governor(migrated_url, clock, cloud=cloud)
    pod = gov.pod(gov.budget())
    with gov.session() as s:
        pods.stop_manually(s, gov.ctx, pod, "test", clock.now(), by=BY)
    gov.tick()  # refused: "retry after 30 s", far longer than the 1 s backoff
    assert order_of(gov, pod).next_attempt_at == clock.now() + timedelta(seconds=30)
    gov.tick(29)
    assert order_of(gov, pod).attempts == 1
    gov.tick(1)
    assert order_of(gov, pod).state is StopState.STOPPED
    gov.ctx.engine.dispose()


class RefusingProvider:
    """A provider that will never stop anything (say, a revoked API key)."""

    stop_latency_s = 0.0

    def describe(self, ref: str) -> PodDescription:
        return PodDescription(PodState.RUNNING, Decimal("3.60"))

    def stop(self, ref: str) -> CallResult:
        return CallResult(CallOutcome.PERMANENT, "HTTP 403 forbidden")


def test_a_permanent_failure_is_critical_and_an_operator_can_retry(gov: Governor) -> None:
    budget = gov.budget()
    pod = gov.pod(budget)
    gov.ctx.providers["fake"] = RefusingProvider()  # type: ignore[index]
    with gov.session() as s:
        first = pods.stop_manually(s, gov.ctx, pod, "test", gov.clock.now(), by=BY).id
    gov.tick()
    assert order_of(gov, pod).state is StopState.FAILED
    assert pod_state(gov, pod) is PodState.STOPPING  # still billing, and shown so
    with gov.session() as s:
        critical = repo.events(s, severity=Severity.CRITICAL)
        assert "refused to stop" in critical[0].message
        second = pods.stop_manually(s, gov.ctx, pod, "retry", gov.clock.now(), by=BY).id
    assert second != first


def test_asking_twice_for_a_manual_stop_returns_the_same_order(gov: Governor) -> None:
    budget = gov.budget()
    pod = gov.pod(budget)
    with gov.session() as s:
        first = pods.stop_manually(s, gov.ctx, pod, "one", gov.clock.now(), by=BY).id
    with gov.session() as s:
        second = pods.stop_manually(s, gov.ctx, pod, "two", gov.clock.now(), by=BY).id
    assert first == second


def test_an_order_interrupted_by_a_restart_completes_and_is_not_charged_twice(
    migrated_url: str, clock: FrozenClock, tmp_path: Path
) -> None:
    cloud_file = tmp_path / "cloud.json"
    before = make_governor(migrated_url, clock, state_file=cloud_file)
    budget = before.budget()
    pod = before.pod(budget)
    with before.session() as s:
        pods.stop_manually(s, before.ctx, pod, "test", clock.now(), by=BY)
    before.tick(600)  # sent; the cloud takes 30 s
    assert order_of(before, pod).state is StopState.PROVIDER_STOP_SENT
    before.ctx.engine.dispose()  # the process dies here

    clock.advance(3600)  # down for an hour
    after = make_governor(migrated_url, clock, state_file=cloud_file)
    after.tick()
    assert order_of(after, pod).state is StopState.STOPPED
    # Metered until the stop was confirmed (the conservative side), once: 70 min at $3.60/h.
    assert after.book(budget).figures.spent == Decimal("4.20")
    assert after.cloud.state.pods["pod-1"].stop_calls == 2  # the stop was asked again: idempotent
    after.ctx.engine.dispose()
