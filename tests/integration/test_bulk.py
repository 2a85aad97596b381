"""Many rows written at once: what lands is what an executemany of the same rows would write,
on both databases, and on PostgreSQL one write however many rows."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from sqlalchemy import exc, select

from governor.db import bulk
from governor.db.tables import BudgetRow, LedgerEntryRow, PodRow
from governor.domain.model import ChargeKind, EntryKind
from tests.integration.conftest import Governor, counted

LEDGER, PODS = LedgerEntryRow.__table__, PodRow.__table__


def entry(gov: Governor, budget: str, pod: str, amount: str, note: str | None = None) -> dict:
    now = gov.clock.now()
    return {
        "budget_id": budget,
        "pod_id": pod,
        "kind": EntryKind.ACCRUAL,
        "charge": ChargeKind.STORAGE,
        "amount_usd": Decimal(amount),
        "period_start": now - timedelta(hours=1),
        "period_end": now,
        "note": note,
        "created_at": now,
    }


def test_inserted_rows_read_back_as_written(gov: Governor) -> None:
    budget = gov.budget()
    pod = gov.pod(budget)
    rows = [entry(gov, budget, pod, "0.000001"), entry(gov, budget, pod, "12.345678", "it's")]
    with gov.session() as s:
        bulk.insert_rows(s.connection(), LEDGER, rows)
    with gov.session() as s:
        written = s.scalars(select(LedgerEntryRow).order_by(LedgerEntryRow.id)).all()
    assert [(e.amount_usd, e.note, e.kind, e.charge) for e in written] == [
        (Decimal("0.000001"), None, EntryKind.ACCRUAL, ChargeKind.STORAGE),
        (Decimal("12.345678"), "it's", EntryKind.ACCRUAL, ChargeKind.STORAGE),
    ]
    assert {(e.period_start, e.period_end) for e in written} == {
        (rows[0]["period_start"], rows[0]["period_end"])
    }
    assert all(e.period_end.utcoffset() == timedelta(0) for e in written)


def test_a_row_the_table_refuses_writes_none_of_them(gov: Governor) -> None:
    budget = gov.budget()
    pod = gov.pod(budget)
    rows = [entry(gov, budget, pod, "1"), entry(gov, "no-such-budget", pod, "2")]
    with pytest.raises(exc.IntegrityError), gov.session() as s:
        bulk.insert_rows(s.connection(), LEDGER, rows)
    with gov.session() as s:
        assert s.scalars(select(LedgerEntryRow)).all() == []


def test_updates_set_or_add_by_id_and_touch_no_other_row(gov: Governor) -> None:
    budget = gov.budget()
    first, second, third = (gov.pod(budget, ref=f"pod-{n}") for n in range(3))
    with gov.session() as s:
        before = {p.id: (p.recorded_usd, p.accrued_until) for p in s.scalars(select(PodRow))}
    later = gov.clock.now() + timedelta(hours=2)
    moves = [
        {"id": second, "recorded_usd": Decimal("1.5"), "accrued_until": later},
        {"id": first, "recorded_usd": Decimal("0.25"), "accrued_until": later},
    ]
    for _ in range(2):
        with gov.session() as s:
            bulk.update_rows(s.connection(), PODS, moves, adding={"recorded_usd"})
    with gov.session() as s:
        after = {p.id: (p.recorded_usd, p.accrued_until) for p in s.scalars(select(PodRow))}
    assert after[first] == (before[first][0] + Decimal("0.5"), later)
    assert after[second] == (before[second][0] + Decimal("3"), later)
    assert after[third] == before[third]


def test_a_thousand_rows_are_one_statement_and_on_postgresql_the_same_as_two(
    gov: Governor,
) -> None:
    budgets = [gov.budget(), gov.budget()]

    def updates(ids: list[str]) -> list[str]:
        rows = [{"id": row_id, "reserve_usd": Decimal(n)} for n, row_id in enumerate(ids)]
        with counted(gov) as sent, gov.session() as s:
            bulk.update_rows(s.connection(), BudgetRow.__table__, rows)
        return [line for line in sent if line.lstrip().upper().startswith("UPDATE")]

    many = updates(budgets + [f"no-such-budget-{n}" for n in range(998)])
    assert len(many) == 1
    if gov.ctx.engine.dialect.name == "postgresql":
        assert many == updates(budgets)  # one array a column, not a parameter a row
    with gov.session() as s:
        reserves = s.scalars(select(BudgetRow.reserve_usd).order_by(BudgetRow.id)).all()
    assert sorted(reserves) == [Decimal(0), Decimal(1)]
