"""What the reads of the ledger by period cost, without and with its index on period start.

The FOCUS cost export reads the ledger's entries a UTC day at a time, by the hour they start,
in order; a team's money in its period sums its budgets' entries that start in the period.
This script fills a scratch database with --rows hourly entries (3 teams of 10 budgets, a pod
each, the entries spread evenly over as many hours as it takes), then, in the same run and
database, drops the index `ix_ledger_entries_period_start_id` and times both reads (the
median of --repeat), prints each one's query plan, recreates the index and does the same:
the ratios are of the same data on the same machine.

    .venv/bin/python bench/ledger_reads.py --rows 100000 --db both
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from fleet import (
    START,
    SimClock,
    build_context,
    database_kinds,
    emit,
    exit_cleanly_on_sigterm,
    progress,
    quiet_event_log,
    scratch_database,
)
from server_process import DEFAULT_ADMIN_URL
from sqlalchemy import event, insert, text
from sqlalchemy.engine import Engine

from governor.db.engine import unit_of_work
from governor.db.tables import LedgerEntryRow
from governor.domain.model import ChargeKind, EntryKind, Role
from governor.domain.teams import EVERY_TEAM, Period
from governor.fakes.cloud import FakeProvider
from governor.services.context import ServiceContext
from governor.services.fleet import budgets, pods, teams
from governor.services.money import team_money
from governor.services.security.tokens import Principal
from governor.services.view import costs

INDEX = "ix_ledger_entries_period_start_id"
TEAMS, BUDGETS_PER_TEAM = 3, 10
BY = Principal(Role.OPERATOR, token_id="tok_bench", label="bench")
BATCH = 10_000
MONTH = timedelta(days=31)


def fill(ctx: ServiceContext, rows: int) -> tuple[str, datetime, datetime]:
    """The teams, budgets, pods and `rows` hourly entries; the first team's id, and the first
    and last hour the entries start in."""
    now = ctx.clock.now()
    pod_ids: list[tuple[str, str]] = []
    with unit_of_work(ctx.sessions) as session:
        team_ids = [
            teams.create(session, teams.TeamDeclaration(f"team-{t}"), now, by=BY).id
            for t in range(TEAMS)
        ]
        for t, team_id in enumerate(team_ids):
            for b in range(BUDGETS_PER_TEAM):
                declared = budgets.Declaration(f"b-{t}-{b}", Decimal(10**6), team=team_id)
                budget = budgets.declare(session, declared, now)
                registration = pods.Registration("fake", f"pod-{t}-{b}")
                pod = pods.register(session, ctx, budget.id, registration, now)
                pod_ids.append((budget.id, pod.id))
    hours = -(-rows // len(pod_ids))
    first = START - timedelta(hours=hours)
    entries = (
        {
            "budget_id": budget_id,
            "pod_id": pod_id,
            "kind": EntryKind.ACCRUAL,
            "charge": ChargeKind.COMPUTE,
            "amount_usd": Decimal("3.6"),
            "period_start": first + timedelta(hours=h),
            "period_end": first + timedelta(hours=h + 1),
            "note": None,
            "created_at": first + timedelta(hours=h + 1),
        }
        for h in range(hours)
        for budget_id, pod_id in pod_ids
    )
    batch: list[dict[str, Any]] = []
    written = 0
    for entry in entries:
        if written + len(batch) >= rows:
            break
        batch.append(entry)
        if len(batch) == BATCH:
            written += _write(ctx, batch)
            batch = []
    written += _write(ctx, batch)
    return team_ids[0], first, first + timedelta(hours=hours - 1)


def _write(ctx: ServiceContext, batch: list[dict[str, Any]]) -> int:
    if batch:
        with unit_of_work(ctx.sessions) as session:
            session.execute(insert(LedgerEntryRow), batch)
    return len(batch)


@contextmanager
def statements(engine: Engine) -> Iterator[list[tuple[str, Any]]]:
    """The statements the engine runs meanwhile, with their parameters."""
    seen: list[tuple[str, Any]] = []

    def note(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        seen.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", note)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", note)


def median_s(read: Callable[[], object], repeat: int) -> float:
    took = []
    for _ in range(repeat):
        started = time.perf_counter()
        read()
        took.append(time.perf_counter() - started)
    return statistics.median(took)


def plan(ctx: ServiceContext, statement: str, parameters: Any) -> list[str]:
    explain = "EXPLAIN " if ctx.engine.dialect.name == "postgresql" else "EXPLAIN QUERY PLAN "
    with ctx.engine.connect() as conn:
        lines = conn.exec_driver_sql(explain + statement, parameters).all()
    return [str(line[-1]) for line in lines]


def measure(
    ctx: ServiceContext, team_id: str, month: Period, repeat: int, indexed: bool
) -> dict[str, Any]:
    with ctx.engine.begin() as conn:
        if indexed:
            conn.execute(text(f"CREATE INDEX {INDEX} ON ledger_entries (period_start, id)"))
        else:
            conn.execute(text(f"DROP INDEX {INDEX}"))
        conn.execute(text("ANALYZE ledger_entries"))
    query = costs.CostQuery(month.start, month.end)

    def export() -> int:
        return sum(1 for _ in costs.lines(ctx, query, EVERY_TEAM))

    def team_month() -> Decimal:
        with unit_of_work(ctx.sessions) as session:
            return team_money.spent_in(session, team_id, month)

    with statements(ctx.engine) as seen:
        lines = export()
    day = next(s for s in seen if "ledger_entries" in s[0] and "ORDER BY" in s[0])
    with statements(ctx.engine) as seen:
        spent = team_month()
    summed = next(s for s in seen if "ledger_entries" in s[0])
    return {
        "indexed": indexed,
        "export_lines": lines,
        "export_s": median_s(export, repeat),
        "team_spent_usd": str(spent),
        "team_month_s": median_s(team_month, repeat),
        "export_day_plan": plan(ctx, *day),
        "team_month_plan": plan(ctx, *summed),
    }


def run(kind: str, rows: int, repeat: int, postgres_url: str) -> None:
    with scratch_database(kind, postgres_url) as url:
        clock = SimClock()
        ctx = build_context(url, clock, {"fake": FakeProvider(clock, hourly_rate_usd=Decimal(3))})
        progress(f"{kind}: writing {rows} ledger entries")
        team_id, first, last = fill(ctx, rows)
        middle = first + (last - first) / 2
        month = Period(
            start=datetime(middle.year, middle.month, 1, tzinfo=UTC),
            end=datetime(middle.year, middle.month, 1, tzinfo=UTC) + MONTH,
        )
        results = {}
        for indexed in (False, True):
            progress(f"{kind}: reading {'with' if indexed else 'without'} the index")
            results[indexed] = measure(ctx, team_id, month, repeat, indexed)
            emit({"bench": "ledger_reads", "db": kind, "rows": rows, **results[indexed]})
        before, after = results[False], results[True]
        assert before["export_lines"] == after["export_lines"]
        assert before["team_spent_usd"] == after["team_spent_usd"]
        emit(
            {
                "bench": "ledger_reads",
                "db": kind,
                "rows": rows,
                "export_ratio": round(before["export_s"] / after["export_s"], 2),
                "team_month_ratio": round(before["team_month_s"] / after["team_month_s"], 2),
            }
        )
        ctx.engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000, help="ledger entries written")
    parser.add_argument("--repeat", type=int, default=3, help="each read timed so many times")
    parser.add_argument("--db", default="postgres", help="sqlite, postgres or both")
    parser.add_argument("--postgres-url", default=DEFAULT_ADMIN_URL, help="an admin connection")
    parser.add_argument("--quick", action="store_true", help="600 entries once, to check it runs")
    args = parser.parse_args()
    rows, repeat = (600, 1) if args.quick else (args.rows, args.repeat)
    exit_cleanly_on_sigterm()
    quiet_event_log()
    for kind in database_kinds(args.db):
        run(kind, rows, repeat, args.postgres_url)


if __name__ == "__main__":
    main()
