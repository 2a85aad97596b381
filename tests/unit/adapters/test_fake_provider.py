"""The shipped fake provider: what the demo, the tests and the benchmarks govern."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from pathlib import Path

from governor.domain.model import PodState
from governor.domain.ports import (
    CallOutcome,
    ReportsBilling,
    Resumes,
    StopsPreserving,
    TerminateOnly,
)
from governor.fakes.cloud import BillingFakeProvider, FakeCloudState, FakeProvider
from tests.clock import FrozenClock

SINCE = FrozenClock().now()  # when the tests' pods are registered


def test_it_can_only_stop_keeping_the_volume_and_resume() -> None:
    fake = FakeProvider(FrozenClock())
    assert isinstance(fake, StopsPreserving) and not isinstance(fake, TerminateOnly)
    assert isinstance(fake, Resumes)
    assert not hasattr(fake, "terminate")


def test_a_stop_takes_the_latency_then_is_done_and_idempotent() -> None:
    clock = FrozenClock()
    fake = FakeProvider(clock, stop_latency_s=2.0)
    assert fake.stop("p").outcome is CallOutcome.PENDING
    assert fake.describe("p").state is PodState.STOPPING
    clock.advance(2)
    assert fake.stop("p").outcome is CallOutcome.DONE
    assert fake.stop("p").outcome is CallOutcome.DONE
    assert fake.describe("p").state is PodState.STOPPED


def test_failing_stops_carry_the_wait_the_provider_asks_for() -> None:
    fake = FakeProvider(FrozenClock(), stop_failures=1, retry_after_s=30.0)
    failed = fake.stop("p")
    assert failed.outcome is CallOutcome.RETRYABLE and failed.retry_after_s == 30.0
    assert fake.stop("p").outcome is not CallOutcome.RETRYABLE


def test_it_bills_late_and_as_far_off_as_it_is_told() -> None:
    clock = FrozenClock()
    fake = BillingFakeProvider(
        clock, hourly_rate_usd=Decimal(36), billing_factor=Decimal("1.1"), billing_lag_s=60
    )
    assert not isinstance(FakeProvider(clock), ReportsBilling)
    assert isinstance(fake, ReportsBilling)
    fake.describe("p")
    clock.advance(3600)
    billed = fake.billed(dict.fromkeys(["p"], SINCE))["p"]
    assert billed.through == clock.now() - timedelta(seconds=60)
    assert billed.amount_usd == Decimal("38.94")  # 59 minutes at $36/h, times 1.1


def test_a_stopped_pod_resumes_and_bills_again(tmp_path: Path) -> None:
    clock, state = FrozenClock(), tmp_path / "cloud.json"
    fake = BillingFakeProvider(
        clock, hourly_rate_usd=Decimal(36), stop_latency_s=0, state_file=state
    )
    fake.describe("p")
    clock.advance(600)
    fake.stop("p")
    clock.advance(3600)  # stopped: not billed
    result = fake.resume("p")
    assert result.outcome is CallOutcome.DONE, result
    assert fake.describe("p").state is PodState.RUNNING
    clock.advance(600)
    assert fake.billed(dict.fromkeys(["p"], SINCE))["p"].amount_usd == Decimal(
        12
    )  # 20 minutes at $36/h
    assert FakeCloudState.load(state).pods["p"].started_at == fake.state.pods["p"].started_at
    again = fake.resume("p")
    assert again.outcome is CallOutcome.DONE and "already running" in again.detail


def test_a_resume_is_refused_while_stopping_for_an_unknown_pod_or_without_capacity() -> None:
    clock = FrozenClock()
    fake = FakeProvider(clock, stop_latency_s=2.0, resume_refusals=1)
    assert fake.resume("never-seen").outcome is CallOutcome.PERMANENT
    fake.stop("p")
    assert fake.resume("p").outcome is CallOutcome.RETRYABLE  # still stopping
    clock.advance(2)
    refused = fake.resume("p")
    assert refused.outcome is CallOutcome.PERMANENT and "no capacity" in refused.detail
    assert fake.describe("p").state is PodState.STOPPED
    assert fake.resume("p").outcome is CallOutcome.DONE  # once there is room again
