"""The records an enforcement pass reads are typed as the columns its statements select."""

from __future__ import annotations

from typing import get_args, get_type_hints

import pytest
from sqlalchemy import Select

from governor.db.tables import BudgetRow, PodRow, RunRow, StopOrderRow
from governor.services.money import book
from governor.services.money.book import LiveBudget, LiveOrder, LivePod, LiveRun

LIVE = [
    (LiveBudget, book._LIVE_BUDGETS, BudgetRow),
    (LivePod, book._LIVE_PODS, PodRow),
    (LiveRun, book._LIVE_RUNS, RunRow),
    (LiveOrder, book._ACTIVE_ORDERS, StopOrderRow),
]


@pytest.mark.parametrize(
    ("kind", "statement", "row"), LIVE, ids=lambda v: getattr(v, "__name__", "")
)
def test_a_live_record_names_what_its_statement_selects_typed_as_its_row(
    kind: type, statement: Select, row: type
) -> None:
    named = get_type_hints(kind)
    named.pop("changed")
    assert sorted(named) == sorted(c.key for c in statement.selected_columns)
    columns = get_type_hints(row)
    for name, typed in named.items():
        if name in columns:
            assert (typed,) == get_args(columns[name]), name
    assert set(named) - set(columns) <= {book._EXTENDED}
