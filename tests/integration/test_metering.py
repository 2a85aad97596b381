"""The meter: rate x time, downtime included, never twice, storage after a stop."""

import threading
from decimal import Decimal

import pytest
from sqlalchemy import func, select

from governor.db import repository as repo
from governor.db.tables import LedgerEntryRow, PodRow
from governor.domain.model import ChargeKind, EntryKind
from governor.scheduler import tasks
from governor.services.fleet import budgets, pods
from governor.services.money import metering
from tests.integration.conftest import BY, Governor

D = Decimal


def ledger_total(gov: Governor, pod_id: str) -> Decimal:
    with gov.session() as s:
        return s.scalar(
            select(func.sum(LedgerEntryRow.amount_usd)).where(LedgerEntryRow.pod_id == pod_id)
        ) or D(0)


def test_an_hour_at_the_providers_rate(gov: Governor) -> None:
    budget = gov.budget()
    pod = gov.pod(budget)
    gov.tick(3600)
    assert ledger_total(gov, pod) == D("3.60")
    assert gov.book(budget).figures.spent == D("3.60")


def test_time_the_governor_was_down_is_charged_once(gov: Governor) -> None:
    budget = gov.budget()  # the clock starts at 12:00
    pod = gov.pod(budget)
    gov.tick(60)
    gov.clock.advance(2 * 3600)  # nobody ran the meter for two hours
    gov.tick()
    gov.tick()  # the same instant again adds nothing
    assert gov.book(budget).figures.spent == D("3.60") * 2 + D("0.06")
    # The ledger holds the hours that have ended, one entry each: 12:00-13:00, 13:00-14:00.
    assert ledger_total(gov, pod) == D("3.60") * 2
    with gov.session() as s:
        entries = s.scalars(select(LedgerEntryRow).order_by(LedgerEntryRow.id)).all()
        assert repo.get_pod(s, pod).recorded_usd == D("7.20")
        assert repo.get_budget(s, budget).recorded_usd == D("7.20")
    assert [e.kind for e in entries] == [EntryKind.ACCRUAL, EntryKind.ACCRUAL]
    assert entries[0].period_end == entries[1].period_start  # contiguous, no gap, no overlap
    assert [e.period_start.hour for e in entries] == [12, 13]


def test_a_pass_between_hours_writes_nothing_and_the_ledger_grows_by_the_hour(
    gov: Governor,
) -> None:
    budget = gov.budget()
    pod = gov.pod(budget, storage_gb=730, storage="0.10")
    for _ in range(3 * 60):  # three hours of passes, one a minute
        gov.tick(60)
    with gov.session() as s:
        count = s.scalar(select(func.count()).select_from(LedgerEntryRow))
    assert count == 3 * 2  # one compute and one storage entry per hour, not per pass
    assert ledger_total(gov, pod) == gov.book(budget).figures.spent == D("3.70") * 3


def test_storage_keeps_billing_after_a_stop_at_the_stopped_rate(gov: Governor) -> None:
    budget = gov.budget()
    pod = gov.pod(budget, storage_gb=730, storage="0.10", stopped_storage="0.20")
    gov.tick(3600)  # running: $3.60 compute + 730 GB x $0.10 / 730 h = $0.10 storage
    assert ledger_total(gov, pod) == D("3.70")
    with gov.session() as s:
        pods.stop_manually(s, gov.ctx, pod, "end of day", gov.clock.now(), by=BY)
    gov.tick()  # no live job: the stop goes to the provider at once
    gov.tick(30)  # the fake cloud's stop latency
    stopped_at = gov.clock.now()
    spent_at_stop = ledger_total(gov, pod)
    assert gov.book(budget).figures.spent == spent_at_stop  # the stop wrote the meter up to it
    gov.tick(3600)  # stopped for an hour: storage only, at $0.20/GB-month
    assert gov.book(budget).figures.spent - spent_at_stop == D("0.20")
    with gov.session() as s:
        since_stop = select(LedgerEntryRow.charge).where(LedgerEntryRow.period_start >= stopped_at)
        assert set(s.scalars(since_stop)) == {ChargeKind.STORAGE}


def test_storage_tail_and_reserve_count_in_committed(gov: Governor) -> None:
    budget = gov.budget(reserve="5", tail_hours=730)
    gov.pod(budget, storage_gb=100, storage="0", stopped_storage="0.20")
    f = gov.book(budget).figures
    # spent 0; tail 100 GB x $0.20 for a month = $20; reserve $5; shutdown: 3.60/h x (0 + 30 + 20) s
    assert f.committed == D(20) + D(5) + D("0.05")


def test_the_meter_waits_while_a_budget_is_being_read(gov: Governor) -> None:
    """A reader's figures come from one picture of the ledger: the meter cannot move under it."""
    budget = gov.budget()
    pod = gov.pod(budget)
    gov.clock.advance(3600)
    reading, metered = threading.Event(), threading.Event()

    def meter() -> None:
        reading.wait()
        with gov.session() as s:
            metering.accrue_budgets(s, [budget], gov.clock.now())
        metered.set()

    writer = threading.Thread(target=meter)
    writer.start()
    with gov.session() as s:
        before = budgets.book(s, gov.ctx.config, budget, gov.clock.now())
        reading.set()
        assert not metered.wait(0.5), "the meter wrote while the budget was being read"
        after = budgets.book(s, gov.ctx.config, budget, gov.clock.now())
    writer.join(10)
    assert metered.is_set()
    assert before.figures.spent == after.figures.spent == D("3.60")
    assert ledger_total(gov, pod) == D("3.60")


def test_the_hours_close_is_spread_over_passes_and_spend_stays_exact(
    gov: Governor, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(metering, "ACCRUE_PODS_PER_PASS", 3)
    declared = [gov.budget() for _ in range(4)]
    for i in range(8):  # two pods in each budget
        gov.pod(declared[i % 4], f"pod-{i}")
    gov.clock.advance(3600)
    written = []
    for _ in range(4):
        tasks.accrue(gov.ctx)
        with gov.session() as s:
            written.append(s.scalar(select(func.count()).select_from(LedgerEntryRow)))
        # every budget's spend is its hour, written or not
        assert [gov.book(b).figures.spent for b in declared] == [D("7.20")] * 4
    # whole budgets of two pods, at most three pods a pass (always one budget): one hour each
    assert written == [2, 4, 6, 8]
    tasks.accrue(gov.ctx)  # nothing left to write
    with gov.session() as s:
        assert s.scalar(select(func.count()).select_from(LedgerEntryRow)) == 8
        assert {p.accrued_until for p in s.scalars(select(PodRow))} == {gov.clock.now()}
