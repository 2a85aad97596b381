"""The big clouds' lagging bills, reconciled with the meter: each billing adapter against a
fake of its cloud's bill (GCP's BigQuery billing export, AWS Cost Explorer), a governor on a
frozen clock that the fake cloud shares. A bill 10% over the meter is trued up and said to
drift once; an honest bill changes nothing; a bill that lags is compared over the window it
covers, so it gives no drift. Every exchange over HTTP is held to the provider's own
definition, as in the rest of the contract suite.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from governor.db import repository as repo
from governor.db import schema
from governor.db.tables import LedgerEntryRow
from governor.domain.model import EntryKind, Severity
from governor.fakes.http_cloud import running
from governor.services.fleet import pods
from tests.clock import FrozenClock
from tests.contract.conformance import Exchange, recorder
from tests.contract.conftest import HARNESSES, SECRET
from tests.contract.harness import BillingHarness
from tests.fake_clouds import TIMEOUT_S
from tests.integration.conftest import Governor, make_governor

BILLING = [h for h in HARNESSES if isinstance(h, BillingHarness)]


@dataclass
class Billed:
    gov: Governor
    harness: BillingHarness
    pod: str

    def run(self, seconds: float) -> None:
        for _ in range(int(seconds // self.harness.tick_s)):
            self.gov.tick(self.harness.tick_s)

    def true_ups(self) -> Decimal:
        with self.gov.session() as s:
            rows = s.scalars(
                select(LedgerEntryRow).where(
                    LedgerEntryRow.pod_id == self.pod, LedgerEntryRow.kind == EntryKind.TRUE_UP
                )
            )
            return sum((r.amount_usd for r in rows), Decimal(0))

    def drift_events(self) -> list[str]:
        with self.gov.session() as s:
            return [e.message for e in repo.events(s) if "more than 5% apart" in e.message]


@contextmanager
def billed(
    harness: BillingHarness, tmp_path: Path, factor: str = "1", lag_s: float = 0.0
) -> Iterator[Billed]:
    clock = FrozenClock()
    cloud = harness.billed_cloud(tmp_path / "cloud.json", SECRET, clock.now, factor, lag_s)
    url = f"sqlite:///{tmp_path / 'governor.db'}"
    schema.upgrade(url)
    exchanges: list[Exchange] = []
    hooks = {"response": [recorder(exchanges)]}
    with running(cloud) as server, httpx.Client(timeout=TIMEOUT_S, event_hooks=hooks) as client:
        adapter = harness.billed_adapter(server.url, SECRET, client)
        gov = make_governor(url, clock, others={harness.name: adapter})
        try:
            budget = gov.budget("100000")
            with gov.session() as s:
                registration = pods.Registration(harness.name, harness.running)
                pod = pods.register(s, gov.ctx, budget, registration, clock.now()).id
            yield Billed(gov, harness, pod)
        finally:
            gov.ctx.engine.dispose()
    assert harness.off_spec(exchanges) == []


@pytest.mark.parametrize("harness", BILLING, ids=lambda h: h.name)
def test_a_bill_ten_percent_over_the_meter_is_trued_up_and_drifts_once(
    harness: BillingHarness, tmp_path: Path
) -> None:
    with billed(harness, tmp_path, factor="1.10") as bill:
        bill.run(harness.settled_after_s)
        with bill.gov.session() as s:
            row = repo.get_pod(s, bill.pod)
            assert row.billed_usd is not None and row.billed_through is not None
            billed_usd = row.billed_usd
        trued = bill.true_ups()
        assert trued > 0
        assert trued == pytest.approx(billed_usd / Decimal("11"), rel=Decimal("0.01"))
        bill.run(harness.settled_after_s)  # more of the same bill: more true-ups, no new event
        assert bill.true_ups() > trued
        [drift] = bill.drift_events()
        assert harness.name in drift
        with bill.gov.session() as s:
            [event] = [e for e in repo.events(s) if e.message == drift]
            assert event.severity is Severity.WARNING


@pytest.mark.parametrize("harness", BILLING, ids=lambda h: h.name)
def test_an_honest_bill_changes_nothing(harness: BillingHarness, tmp_path: Path) -> None:
    with billed(harness, tmp_path) as bill:
        bill.run(harness.settled_after_s)
        with bill.gov.session() as s:
            row = repo.get_pod(s, bill.pod)
            assert row.billed_usd is not None and row.billed_usd > 0
            assert row.billing_drift is False
        assert bill.true_ups() == 0
        assert bill.drift_events() == []


@pytest.mark.parametrize("harness", BILLING, ids=lambda h: h.name)
def test_a_lagging_bill_is_compared_over_the_window_it_covers(
    harness: BillingHarness, tmp_path: Path
) -> None:
    lag_s = 2 * 3600.0
    with billed(harness, tmp_path, lag_s=lag_s) as bill:
        bill.run(harness.settled_after_s)
        with bill.gov.session() as s:
            row = repo.get_pod(s, bill.pod)
            assert row.billed_usd is not None and row.billed_usd > 0
            assert row.billed_through is not None
            assert row.billed_through <= bill.gov.clock.now() - timedelta(seconds=lag_s)
            # compared with all the meter charged, the bill would be far short of it
            assert row.billed_usd < row.recorded_usd * Decimal("0.9")
        assert bill.true_ups() == 0
        assert bill.drift_events() == []
