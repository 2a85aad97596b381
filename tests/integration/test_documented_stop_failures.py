"""The stop at the ceiling through each provider's real adapter and its fake cloud over HTTP,
the provider failing the stop call in its own documented words (each harness's first
documented transient failure and first refusal; the contract suite holds the adapters to all
of them): a transient failure is retried after a backoff and the pod ends stopped; a refusal
fails the stop order with a critical event, and the pod is never taken for stopped.
Terminate-only providers (Lambda) terminate only once a checkpoint is acknowledged, which
tests/integration/test_terminate_only.py covers."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path

import pytest

from governor.db import repository as repo
from governor.db.tables import StopOrderRow
from governor.domain.model import Reason, Severity
from governor.domain.stop_order import StopState
from governor.services.fleet import pods
from tests.clock import FrozenClock
from tests.contract.conftest import HARNESSES, Governed, govern
from tests.contract.harness import Harness
from tests.integration.conftest import Governor, make_governor

PRESERVING = [h for h in HARNESSES if h.keep is None]
OVER_THE_CEILING_S = 3 * 3600.0  # every fake's pod bills more than $1 in three hours


@contextmanager
def at_the_ceiling(
    harness: Harness, url: str, clock: FrozenClock, tmp_path: Path
) -> Iterator[tuple[Governed, Governor, str]]:
    """A $1 budget over a pod of `harness`'s fake cloud, registered through its adapter."""
    with govern(harness, tmp_path) as governed:
        gov = make_governor(url, clock, others={harness.name: governed.adapter})
        budget = gov.budget(ceiling="1")
        # Kubernetes reports no rate: the node's is declared
        registration = pods.Registration(harness.name, harness.running, Decimal("2.50"))
        with gov.session() as s:
            pod = pods.register(s, gov.ctx, budget, registration, clock.now()).id
        try:
            yield governed, gov, pod
        finally:
            gov.ctx.engine.dispose()


def order_of(gov: Governor, pod: str) -> StopOrderRow:
    with gov.session() as s:
        order = repo.latest_stop_order(s, pod)
        assert order is not None
        return order


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("harness", PRESERVING, ids=lambda h: h.name)
def test_a_documented_transient_failure_is_retried_until_the_pod_stops(
    harness: Harness, migrated_url: str, near_now: FrozenClock, tmp_path: Path
) -> None:
    with at_the_ceiling(harness, migrated_url, near_now, tmp_path) as (governed, gov, pod):
        governed.answer_next("", harness.transient_stop_failures[0])  # read, then the stop
        gov.tick(OVER_THE_CEILING_S)
        order = order_of(gov, pod)
        assert order.reason is Reason.CEILING
        assert order.state.is_active and order.attempts == 1, order.last_error
        assert order.last_error and order.next_attempt_at is not None
        assert harness.billing(governed.cloud, harness.running)
        for _ in range(20):  # backoff, then the stop again (and its confirmation, if pending)
            gov.tick(5.0)
            if order_of(gov, pod).state is StopState.STOPPED:
                break
        assert order_of(gov, pod).state is StopState.STOPPED
        assert harness.stopped(governed.cloud, harness.running)


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("harness", PRESERVING, ids=lambda h: h.name)
def test_a_documented_refusal_fails_the_stop_with_a_critical_event(
    harness: Harness, migrated_url: str, near_now: FrozenClock, tmp_path: Path
) -> None:
    with at_the_ceiling(harness, migrated_url, near_now, tmp_path) as (governed, gov, pod):
        governed.answer_next("", harness.stop_refusals[0])  # read, then the stop
        gov.tick(OVER_THE_CEILING_S)
        assert order_of(gov, pod).state is StopState.FAILED
        with gov.session() as s:
            critical = [e.message for e in repo.events(s, severity=Severity.CRITICAL)]
        assert any("refused to stop" in message for message in critical), critical
        assert harness.billing(governed.cloud, harness.running)
        assert not harness.stopped(governed.cloud, harness.running)
