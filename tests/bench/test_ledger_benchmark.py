"""bench/ledger_reads.py, run once at a tiny size (--quick) on SQLite and PostgreSQL.

Checked: exit 0, a JSON line for the reads without the ledger's period index, one with it and
their ratios; both read the same lines and the same team spend, and with the index the
export's day query reads the ledger through it on SQLite (PostgreSQL's planner, at this size,
rightly scans the table: its use at 100,000 entries is in docs/performance.md). No timing is
asserted.
"""

from __future__ import annotations

import pytest

from governor.db.tables import LedgerEntryRow
from tests.bench.scripts import DATABASES, run_script

INDEX = "ix_ledger_entries_period_start_id"


@pytest.mark.parametrize("db", DATABASES)
def test_the_ledger_bench_reads_the_same_lines_without_and_with_the_period_index(
    db: str,
) -> None:
    without, indexed, ratios = run_script("ledger_reads.py", db, "--quick")
    assert {r["bench"] for r in (without, indexed, ratios)} == {"ledger_reads"}
    assert (without["indexed"], indexed["indexed"]) == (False, True)
    assert without["export_lines"] == indexed["export_lines"] > 0
    assert without["team_spent_usd"] == indexed["team_spent_usd"]
    assert not any(INDEX in line for line in without["export_day_plan"])
    if db == "sqlite":  # PostgreSQL's planner scans a table this small whole, index or not
        assert any(INDEX in line for line in indexed["export_day_plan"])
    assert indexed["team_month_plan"] and without["team_month_plan"]
    assert ratios["export_ratio"] > 0 and ratios["team_month_ratio"] > 0
    # the index the bench drops and makes again is the schema's own
    assert [i.name for i in LedgerEntryRow.__table__.indexes if i.name == INDEX] == [INDEX]
