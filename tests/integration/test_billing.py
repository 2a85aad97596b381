"""Reconciling the meter with what the provider billed: true-ups, drift, lag, baseline."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.tables import EventRow, LedgerEntryRow, PodRow
from governor.domain.model import BudgetState, EntryKind, PodState, Severity
from governor.domain.ports import Billed, ProviderError
from governor.fakes.cloud import BillingFakeProvider
from governor.services.fleet import budgets, pods
from governor.services.money import billing
from tests.clock import FrozenClock
from tests.integration.conftest import BY, Governor, counted, make_governor

Govern = Callable[..., Governor]


@pytest.fixture
def governed(migrated_url: str, clock: FrozenClock) -> Iterator[Govern]:
    """Governors over a fake cloud billing $36/h, `factor` times off and `lag_s` late."""
    made: list[Governor] = []

    def govern(factor: str = "1", lag_s: float = 0.0) -> Governor:
        cloud = BillingFakeProvider(
            clock,
            hourly_rate_usd=Decimal("36"),
            billing_factor=Decimal(factor),
            billing_lag_s=lag_s,
        )
        made.append(make_governor(migrated_url, clock, cloud=cloud))
        return made[-1]

    yield govern
    for gov in made:
        gov.ctx.engine.dispose()


def run_for(gov: Governor, minutes: int) -> None:
    for _ in range(minutes):
        gov.tick(60)


def true_ups(gov: Governor, pod_id: str) -> list[LedgerEntryRow]:
    with gov.session() as s:
        return list(
            s.scalars(
                select(LedgerEntryRow).where(
                    LedgerEntryRow.pod_id == pod_id, LedgerEntryRow.kind == EntryKind.TRUE_UP
                )
            )
        )


def drift_events(gov: Governor) -> list[EventRow]:
    with gov.session() as s:
        found = [e for e in repo.events(s) if "billed" in e.message or "agree" in e.message]
        return sorted(found, key=lambda e: e.id)


def test_an_honest_bill_changes_nothing(governed: Govern, clock: FrozenClock) -> None:
    gov = governed()
    budget = gov.budget("1000")
    pod = gov.pod(budget)
    run_for(gov, 60)
    assert true_ups(gov, pod) == []
    assert drift_events(gov) == []
    with gov.session() as s:
        row = repo.get_pod(s, pod)
        assert row.billed_usd is not None and row.billed_baseline_usd is not None
        assert row.billed_usd - row.billed_baseline_usd == Decimal("36")
    assert gov.book(budget).figures.spent == Decimal("36")


def test_a_higher_bill_is_trued_up_and_drift_is_said_once(
    governed: Govern, clock: FrozenClock
) -> None:
    gov = governed(factor="1.10")
    budget = gov.budget("1000")
    pod = gov.pod(budget)
    run_for(gov, 60)
    booked = sum((e.amount_usd for e in true_ups(gov, pod)), Decimal(0))
    assert booked == Decimal("3.6")  # an hour at $36/h billed 10% over the meter
    assert gov.book(budget).figures.spent == Decimal("39.6")  # spend counts the bill
    [drift] = drift_events(gov)
    assert drift.severity is Severity.WARNING
    assert "more than 5% apart" in drift.message
    with gov.session() as s:
        assert repo.get_pod(s, pod).billing_drift is True


def test_a_lower_bill_never_lowers_spend(governed: Govern, clock: FrozenClock) -> None:
    gov = governed(factor="0.80")
    budget = gov.budget("1000")
    pod = gov.pod(budget)
    run_for(gov, 30)
    assert true_ups(gov, pod) == []
    assert gov.book(budget).figures.spent == Decimal("18")
    assert len(drift_events(gov)) == 1


def test_drift_that_ends_is_said_to_have_ended(governed: Govern, clock: FrozenClock) -> None:
    gov = governed(factor="0.5")
    cloud = gov.cloud
    assert isinstance(cloud, BillingFakeProvider)
    budget = gov.budget("1000")
    gov.pod(budget)
    run_for(gov, 10)
    cloud.billing_factor = Decimal(1)  # the provider's bill catches up with the meter
    run_for(gov, 10)
    drifted, agreed = drift_events(gov)
    assert drifted.severity is Severity.WARNING
    assert agreed.severity is Severity.INFO and "agree again" in agreed.message


def test_lagging_bills_are_compared_over_the_same_window(
    governed: Govern, clock: FrozenClock
) -> None:
    gov = governed(lag_s=600)
    budget = gov.budget("1000")
    pod = gov.pod(budget)
    gov.tick(300)
    with gov.session() as s:  # the bill does not cover registration yet: no baseline
        assert repo.get_pod(s, pod).billed_baseline_through is None
    run_for(gov, 60)
    assert true_ups(gov, pod) == []
    assert drift_events(gov) == []
    with gov.session() as s:
        row = repo.get_pod(s, pod)
        assert row.billed_baseline_through is not None and row.billed_through is not None
        assert row.billed_baseline_through >= row.created_at
        assert row.billed_through == clock.now() - timedelta(seconds=600)


def test_a_provider_that_does_not_bill_is_skipped(gov: Governor) -> None:
    # the plain fake does not report billing
    budget = gov.budget("1000")
    gov.pod(budget)
    gov.tick(60)
    with counted(gov) as statements:
        assert billing.reconcile_all(gov.ctx) == 0
    assert statements == []  # no provider says what it billed: nothing to read


def test_a_closed_budgets_late_bill_lands_within_the_lag_window_and_not_after(
    governed: Govern, clock: FrozenClock
) -> None:
    gov = governed(factor="1.10", lag_s=600)
    budget = gov.budget("1000")
    pod = gov.pod(budget)
    run_for(gov, 20)
    with gov.session() as s:
        pods.stop_manually(s, gov.ctx, pod, "done", clock.now(), by=BY)
    gov.tick(1)
    gov.tick(30)  # the fake's stop latency
    with gov.session() as s:
        assert repo.get_pod(s, pod).state is PodState.STOPPED
        closed = budgets.close(s, budget, "done", False, clock.now(), by=BY)
        assert closed.state is BudgetState.CLOSED
        closed_at = closed.closed_at
    before = sum((e.amount_usd for e in true_ups(gov, pod)), Decimal(0))
    gov.tick(600)  # the bill catches up with the pod's last ten minutes
    late = [e for e in true_ups(gov, pod) if e.created_at > closed_at]
    assert late and late[-1].period_end > closed_at - timedelta(seconds=600)
    assert sum((e.amount_usd for e in late), before) > before
    with gov.session() as s:
        stopped_at = repo.get_pod(s, pod).stopped_at
        assert stopped_at is not None
        window = timedelta(seconds=gov.ctx.config.billing_lag_window_s)
        assert [p.id for p in repo.pods_to_reconcile(s, clock.now() - window, ["fake"])] == [pod]
    clock.advance(window.total_seconds())  # its last running instant is now past the window
    with gov.session() as s:
        assert clock.now() - window > stopped_at
        assert repo.pods_to_reconcile(s, clock.now() - window, ["fake"]) == []
    assert billing.reconcile_all(gov.ctx) == 0


class Counted(BillingFakeProvider):
    """The billing fake, keeping what each read of its bill asked (each pod's ref and its
    registration); `failing` refuses them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.asked: list[dict[str, datetime]] = []
        self.failing = False

    def billed(self, since: Mapping[str, datetime]) -> dict[str, Billed]:
        self.asked.append(dict(since))
        if self.failing:
            raise ProviderError("billing is down", retryable=True)
        return super().billed(since)


def test_a_providers_bill_is_read_once_for_all_its_pods(
    migrated_url: str, clock: FrozenClock
) -> None:
    fake, other = (Counted(clock, hourly_rate_usd=Decimal("36")) for _ in range(2))
    gov = make_governor(migrated_url, clock, cloud=fake, others={"other": other})
    try:
        refs = [f"pod-{i}" for i in range(6)]
        declared = [gov.budget("1000") for _ in range(3)]
        for i, ref in enumerate(refs):
            gov.pod(declared[i % 3], ref)  # two pods in each of three budgets
        elsewhere = gov.budget("1000")
        with gov.session() as s:
            registration = pods.Registration("other", "o-1")
            pods.register(s, gov.ctx, elsewhere, registration, clock.now())
        assert fake.asked[0] == {"pod-0": clock.now()}  # at its registration, for its baseline
        fake.asked.clear()
        other.asked.clear()
        registered = clock.now()
        clock.advance(60)
        with counted(gov) as statements:
            assert billing.reconcile_all(gov.ctx) == len(refs) + 1
        # one read each, every pod's bill counted from its registration
        assert fake.asked == [dict.fromkeys(refs, registered)]
        assert other.asked == [{"o-1": registered}]
        with gov.session() as s:  # each pod took in its own figure from the one read
            bills = {repo.get_pod(s, p).billed_through for p in pod_ids(s)}
        assert bills == {clock.now()}
        # taken in together, in as many statements for seven pods as for one: the pods to ask
        # about read; the four budgets locked; the pods read; their entries summed, and those
        # at the edges read; the pods written (and the BEGINs, on SQLite)
        locks = [q for q in statements if q.lstrip().startswith("SELECT budgets.id")]
        writes = [q for q in statements if q.lstrip().startswith("UPDATE")]
        assert len(locks) == len(writes) == 1 and len(statements) <= 8, statements
    finally:
        gov.ctx.engine.dispose()


def pod_ids(s: Session) -> list[str]:
    return list(s.scalars(select(PodRow.id)))


def test_one_providers_failed_read_leaves_the_others_booked(
    migrated_url: str, clock: FrozenClock, caplog: pytest.LogCaptureFixture
) -> None:
    fake, other = (Counted(clock, hourly_rate_usd=Decimal("36")) for _ in range(2))
    gov = make_governor(migrated_url, clock, cloud=fake, others={"other": other})
    try:
        pod = gov.pod(gov.budget("1000"))
        elsewhere = gov.budget("1000")
        with gov.session() as s:
            registration = pods.Registration("other", "o-1")
            theirs = pods.register(s, gov.ctx, elsewhere, registration, clock.now()).id
        fake.failing = True
        clock.advance(60)
        assert billing.reconcile_all(gov.ctx) == 1
        assert "could not read what fake billed for 1 pods: billing is down" in caplog.text
        with gov.session() as s:
            assert repo.get_pod(s, theirs).billed_through == clock.now()
            assert repo.get_pod(s, pod).billed_through < clock.now()
        fake.failing = False
        assert billing.reconcile_all(gov.ctx) == 2
        with gov.session() as s:
            assert repo.get_pod(s, pod).billed_through == clock.now()
    finally:
        gov.ctx.engine.dispose()


def test_a_bill_no_later_than_the_one_booked_costs_no_transaction(
    governed: Govern, clock: FrozenClock
) -> None:
    gov = governed(lag_s=600)
    pod = gov.pod(gov.budget("1000"))
    run_for(gov, 15)  # the bill now covers registration: a baseline, then figures after it
    with counted(gov) as statements:
        assert billing.reconcile_all(gov.ctx) == 1  # the same clock: the same bill
    # the pods to ask about, read in a snapshot; nothing written, locked or waited for
    said = [s.split(maxsplit=1)[0].upper() for s in statements]
    assert said.count("SELECT") == 1 and set(said) <= {"BEGIN", "SELECT"}, statements
    assert not any("FOR UPDATE" in s.upper() or "IMMEDIATE" in s.upper() for s in statements)
    clock.advance(60)
    with counted(gov) as statements:
        assert billing.reconcile_all(gov.ctx) == 1  # a minute more of bill: taken in
    assert any(s.lstrip().upper().startswith("UPDATE") for s in statements)
    with gov.session() as s:
        assert repo.get_pod(s, pod).billed_through == clock.now() - timedelta(seconds=600)


def test_bills_read_every_pass_leave_the_ledger_written_by_the_hour(governed: Govern) -> None:
    gov = governed(factor="1.02")  # billed 2% over the meter: true-ups, within the drift band
    budget = gov.budget("1000")
    pod = gov.pod(budget, storage_gb=730, storage="0.10")
    run_for(gov, 120)  # two hours, the bill read every minute
    with gov.session() as s:
        accruals = s.scalars(
            select(LedgerEntryRow).where(LedgerEntryRow.kind == EntryKind.ACCRUAL)
        ).all()
    assert len(accruals) == 2 * 2  # a compute and a storage entry an hour, not one a bill
    metered = sum((e.amount_usd for e in accruals), Decimal(0))
    assert metered == 2 * (Decimal(36) + Decimal("0.10"))
    trued_up = sum((e.amount_usd for e in true_ups(gov, pod)), Decimal(0))
    assert trued_up == Decimal("73.44") - metered  # the bill: two hours' compute, 2% over
    assert gov.book(budget).figures.spent == metered + trued_up
    assert drift_events(gov) == []


def test_a_days_lagging_honest_bill_stays_honest(governed: Govern) -> None:
    gov = governed(lag_s=1800)  # half an hour behind: every comparison cuts an hour's entry
    budget = gov.budget("10000")
    pod = gov.pod(budget, storage_gb=730, storage="0.10")
    for _ in range(26 * 6):  # 26 hours, the bill read every 10 minutes
        gov.tick(600)
    assert true_ups(gov, pod) == []  # the meter, summed and prorated, is what was billed
    assert drift_events(gov) == []
    with gov.session() as s:
        row = repo.get_pod(s, pod)
        assert row.billed_usd is not None and row.billed_baseline_usd is not None
        assert row.billed_usd - row.billed_baseline_usd == Decimal(36) * Decimal("25.5")
