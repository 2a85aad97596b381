"""The shipped fake provider: what the demo, the tests and the benchmarks govern."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from governor.domain.model import PodState
from governor.domain.ports import CallOutcome, ReportsBilling, StopsPreserving, TerminateOnly
from governor.fakes.cloud import BillingFakeProvider, FakeProvider
from tests.clock import FrozenClock


def test_it_can_only_stop_keeping_the_volume() -> None:
    fake = FakeProvider(FrozenClock())
    assert isinstance(fake, StopsPreserving) and not isinstance(fake, TerminateOnly)
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
    billed = fake.billed("p")
    assert billed.through == clock.now() - timedelta(seconds=60)
    assert billed.amount_usd == Decimal("38.94")  # 59 minutes at $36/h, times 1.1
