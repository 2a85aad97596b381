"""How each periodic task's pass grows with the fleet: 100, 1,000 and 10,000 pods.

The fleet is built through the services (budgets.declare, pods.register, lifecycle.create) in
budgets of 10 pods, each pod on the fake provider that reports billing (so the `billing` task
reads its bill and takes in every pod's), with 100 GB of storage and one live run;
ceilings are far out of reach, so nothing ever stops. On PostgreSQL the fleet's tables are
analysed once built, as autovacuum would. Each repetition moves the clock one
enforce interval (5 s), heartbeats every run through the service call the API's heartbeat
route makes (fleet.check_in; timed too), then times every task in
governor.scheduler.tasks.TASKS once; last, the clock moves to the top of the next hour and
the accrue passes that write that hour for every pod are timed too (`accrue_hour`: the
ledger is written by the hour, at most ACCRUE_PODS_PER_PASS pods a pass; its figure is the
longest of those passes, with how many it took and their total). A task's figure is its best
of the repetitions; the growth factor is how much it grows per x10 pods (10 would be linear).
The ledger's row count afterwards, per pod and accrue pass, shows how the ledger grows.

    .venv/bin/python bench/enforce_scale.py                    # 100, 1,000, 10,000 on both
    .venv/bin/python bench/enforce_scale.py --quick --db sqlite
    .venv/bin/python bench/enforce_scale.py --pods 100,1000 --db postgres --postgres-url URL

One JSON line per measurement on stdout, then a summary table; progress on stderr.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from fleet import (
    SimClock,
    Stopwatch,
    build_context,
    check_in,
    database_kinds,
    emit,
    exit_cleanly_on_sigterm,
    ledger_rows,
    progress,
    quiet_event_log,
    scratch_database,
    sizes,
)
from server_process import DEFAULT_ADMIN_URL
from sqlalchemy import text
from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.engine import unit_of_work
from governor.domain.ledger import slice_start
from governor.fakes.cloud import BillingFakeProvider
from governor.scheduler.tasks import TASKS
from governor.services.context import ServiceContext
from governor.services.fleet import budgets, pods
from governor.services.jobs import checkins
from governor.services.money import metering
from governor.services.runs import lifecycle

BENCH = "enforce_scale"
PODS_PER_BUDGET = 10
BUDGETS_PER_UNIT = 20  # budgets set up per unit of work
CEILING_USD = Decimal(10_000_000)  # out of reach: nothing stops
HOURLY_RATE_USD = Decimal("2.00")
STORAGE_GB = 100.0
STORAGE_USD_PER_GB_MONTH = Decimal("0.10")
HEARTBEAT_TIMEOUT_S = 120.0
CHECKPOINT_GRACE_S = 300.0
FULL_SIZES = "100,1000,10000"
QUICK_SIZES = "20,200"


@dataclass
class Measurement:
    """One task's times at one fleet size (heartbeat: all runs checking in once)."""

    db: str
    task: str
    pods: int
    times_s: list[float]
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def best_s(self) -> float:
        return min(self.times_s)

    def record(self) -> dict[str, Any]:
        return {
            "bench": BENCH,
            "db": self.db,
            "task": self.task,
            "pods": self.pods,
            "best_s": round(self.best_s, 6),
            "runs": len(self.times_s),
            **self.extra,
        }


@dataclass(frozen=True)
class LedgerGrowth:
    """How many ledger rows the repetitions added, and what was left stopping."""

    db: str
    pods: int
    repetitions: int
    rows: int
    rows_added: int
    stop_orders: int

    def record(self) -> dict[str, Any]:
        return {
            "bench": BENCH,
            "db": self.db,
            "task": "ledger_rows",
            "pods": self.pods,
            "rows": self.rows,
            "rows_added": self.rows_added,
            "accrue_passes": self.repetitions,
            "rows_per_pod_per_pass": round(self.rows_added / self.pods / self.repetitions, 3),
            "stop_orders": self.stop_orders,
        }


def build_fleet(ctx: ServiceContext, pod_count: int) -> list[str]:
    """Budgets of PODS_PER_BUDGET pods, one live run on each; returns the run ids."""
    now = ctx.clock.now()
    budget_count = math.ceil(pod_count / PODS_PER_BUDGET)
    run_ids: list[str] = []
    watch = Stopwatch()
    for first in range(0, budget_count, BUDGETS_PER_UNIT):
        with unit_of_work(ctx.sessions) as session:
            for b in range(first, min(first + BUDGETS_PER_UNIT, budget_count)):
                declaration = budgets.Declaration(f"fleet-{b}", CEILING_USD)
                budget_id = budgets.declare(session, declaration, now).id
                in_budget = min(PODS_PER_BUDGET, pod_count - b * PODS_PER_BUDGET)
                for p in range(in_budget):
                    run_ids.append(_pod_with_run(session, ctx, budget_id, f"pod-{b}-{p}"))
        progress(f"  set up {len(run_ids)}/{pod_count} pods ({watch})")
    return run_ids


def _pod_with_run(session: Session, ctx: ServiceContext, budget_id: str, ref: str) -> str:
    now = ctx.clock.now()
    registration = pods.Registration(
        "fake",
        ref,
        gpu_type="H100",
        gpu_count=1,
        storage_gb=STORAGE_GB,
        storage_usd_per_gb_month=STORAGE_USD_PER_GB_MONTH,
    )
    pod = pods.register(session, ctx, budget_id, registration, now)
    spec = lifecycle.RunSpec("train", pod.id, 1_000_000, HEARTBEAT_TIMEOUT_S, CHECKPOINT_GRACE_S)
    run, _token = lifecycle.create(session, ctx.config, budget_id, spec, now)
    return run.id


def heartbeat_all(ctx: ServiceContext, run_ids: Sequence[str], step: int) -> float:
    """Every run checks in once, as its request would; returns the seconds it took."""
    beat = checkins.Heartbeat(step=step)
    start = time.perf_counter()
    for run_id in run_ids:
        check_in(ctx, run_id, beat, ctx.clock.now())
    return time.perf_counter() - start


def timed(task: Callable[[ServiceContext], None], ctx: ServiceContext) -> float:
    start = time.perf_counter()
    task(ctx)
    return time.perf_counter() - start


def repeat_passes(
    ctx: ServiceContext, clock: SimClock, run_ids: Sequence[str], repeats: int
) -> dict[str, list[float]]:
    """Each repetition: one enforce interval passes, every run checks in, every task runs."""
    times: dict[str, list[float]] = {name: [] for name in ["heartbeat", *TASKS]}
    for repeat in range(repeats):
        clock.advance(ctx.config.enforce_interval_s)
        times["heartbeat"].append(heartbeat_all(ctx, run_ids, step=repeat + 1))
        for name, task in TASKS.items():
            times[name].append(timed(task.run, ctx))
        progress(
            f"  repetition {repeat + 1}/{repeats}: heartbeats {times['heartbeat'][-1]:.2f} s, "
            + ", ".join(f"{n} {times[n][-1]:.3f} s" for n in TASKS)
        )
    # The ledger is written by the hour: the passes from the top of the hour write every pod's.
    clock.move_to(3600 * math.ceil((clock.elapsed_s() + 1) / 3600))
    times["accrue_hour"] = closing = [timed(TASKS["accrue"].run, ctx)]
    while due_pods(ctx):
        closing.append(timed(TASKS["accrue"].run, ctx))
    progress(
        f"  the accrue passes that close an hour: {len(closing)}, the first "
        f"{closing[0]:.3f} s, {sum(closing):.3f} s in all"
    )
    return times


def due_pods(ctx: ServiceContext) -> int:
    """How many pods' ended hours are still to be written."""
    with unit_of_work(ctx.sessions) as session:
        due = metering.due_budgets(session, slice_start(ctx.clock.now()))
    return sum(pods for _budget, pods in due)


def analyze(ctx: ServiceContext) -> None:
    """Give the planner its statistics of the new fleet, as autovacuum does within a minute of
    it being registered (without them PostgreSQL plans the pass's reads as for empty tables)."""
    with ctx.engine.connect() as connection:
        connection.execute(text("ANALYZE"))
        connection.commit()


def active_stop_orders(ctx: ServiceContext) -> int:
    with unit_of_work(ctx.sessions) as session:
        return len(repo.active_stop_orders(session))


@contextmanager
def built_fleet(
    kind: str, url: str, pod_count: int
) -> Iterator[tuple[SimClock, ServiceContext, list[str]]]:
    """A fleet built in the database at `url` (analysed on PostgreSQL), the governor's services
    over it on a simulated clock, and its runs; the connections are let go afterwards."""
    clock = SimClock()
    cloud = BillingFakeProvider(clock, hourly_rate_usd=HOURLY_RATE_USD, stop_latency_s=30.0)
    ctx = build_context(url, clock, {"fake": cloud})
    try:
        progress(f"{kind}: {pod_count} pods")
        run_ids = build_fleet(ctx, pod_count)
        if kind == "postgres":
            analyze(ctx)
        yield clock, ctx, run_ids
    finally:
        ctx.engine.dispose()


def measure_size(
    kind: str, url: str, pod_count: int, repeats: int
) -> tuple[list[Measurement], LedgerGrowth]:
    """Build one fleet in a fresh database and time every task on it."""
    with built_fleet(kind, url, pod_count) as (clock, ctx, run_ids):
        rows_before = ledger_rows(ctx)
        times = repeat_passes(ctx, clock, run_ids, repeats)
        stopping = active_stop_orders(ctx)
        if stopping:
            progress(f"  warning: {stopping} stop orders were made; the fleet was meant to run")
        rows = ledger_rows(ctx)
    closing = times.pop("accrue_hour")
    timings = [Measurement(kind, name, pod_count, values) for name, values in times.items()]
    beats = timings[0]
    beats.extra = {"calls": len(run_ids), "per_call_s": round(beats.best_s / len(run_ids), 9)}
    # the longest pass that closes the hour (the first), and all of them
    hour = Measurement(kind, "accrue_hour", pod_count, [max(closing)])
    hour.extra = {"passes_to_close": len(closing), "close_total_s": round(sum(closing), 6)}
    timings.append(hour)
    passes = repeats + len(closing)
    return timings, LedgerGrowth(kind, pod_count, passes, rows, rows - rows_before, stopping)


def growth_per_x10(smaller: Measurement, larger: Measurement) -> float | None:
    """How much the time grows per x10 pods between two sizes (10: linear)."""
    if min(smaller.best_s, larger.best_s) <= 0 or larger.pods == smaller.pods:
        return None
    exponent = math.log(larger.best_s / smaller.best_s) / math.log(larger.pods / smaller.pods)
    return round(10**exponent, 3)


def with_growth(results: list[Measurement], previous: list[Measurement]) -> None:
    """Add each task's growth since the previous (smaller) fleet size."""
    earlier = {m.task: m for m in previous}
    for m in results:
        before = earlier.get(m.task)
        m.extra["growth_per_x10"] = None if before is None else growth_per_x10(before, m)


def summary(timings: list[Measurement], ledgers: list[LedgerGrowth]) -> str:
    """A table per database: best seconds per task and size, and the growth per x10 pods."""
    lines = ["", "enforce_scale: best seconds per pass (x10: growth per ten times the pods)"]
    for kind in dict.fromkeys(m.db for m in timings):
        mine = [m for m in timings if m.db == kind]
        counts = sorted({m.pods for m in mine})
        lines += ["", kind, f"  {'task':<12}" + "".join(f"{n:>12} pods" for n in counts) + "   x10"]
        for task in dict.fromkeys(m.task for m in mine):
            cells = {m.pods: m for m in mine if m.task == task}
            growth = " / ".join(str(cells[n].extra["growth_per_x10"]) for n in counts[1:])
            times = "".join(f"{cells[n].best_s:>15.4f} s" for n in counts)
            lines.append(f"  {task:<12}{times}   {growth}")
        hours = {m.pods: m.extra for m in mine if m.task == "accrue_hour"}
        closes = "".join(
            f"{hours[n]['passes_to_close']:>4} / {hours[n]['close_total_s']:>7.4f} s"
            for n in counts
        )
        lines.append(f"  {'hour closed':<12}{closes}   (passes / seconds in all)")
        beats = {m.pods: m for m in mine if m.task == "heartbeat"}
        per_beat = "".join(f"{beats[n].extra['per_call_s'] * 1000:>14.3f} ms" for n in counts)
        lines.append(f"  {'per beat':<12}{per_beat}")
        ledger = {g.pods: g.record() for g in ledgers if g.db == kind}
        rows = "".join(f"{ledger[n]['rows']:>17}" for n in counts)
        per_pod = " / ".join(str(ledger[n]["rows_per_pod_per_pass"]) for n in counts)
        lines.append(f"  {'ledger rows':<12}{rows}   per pod per accrue pass: {per_pod}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--pods", default=FULL_SIZES, help=f"fleet sizes, comma-separated (default {FULL_SIZES})"
    )
    parser.add_argument(
        "--quick", action="store_true", help=f"small fleets for CI ({QUICK_SIZES} pods)"
    )
    parser.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument(
        "--postgres-url",
        default=DEFAULT_ADMIN_URL,
        help="an admin connection that may CREATE and DROP a scratch database "
        f"(default {DEFAULT_ADMIN_URL})",
    )
    parser.add_argument("--repeats", type=int, default=3, help="repetitions per task (best of)")
    args = parser.parse_args(argv)
    counts = sizes(QUICK_SIZES if args.quick else args.pods)
    quiet_event_log()
    exit_cleanly_on_sigterm()

    timings: list[Measurement] = []
    ledgers: list[LedgerGrowth] = []
    for kind in database_kinds(args.db):
        previous: list[Measurement] = []
        for pod_count in counts:
            with scratch_database(kind, args.postgres_url) as url:
                results, ledger = measure_size(kind, url, pod_count, args.repeats)
            with_growth(results, previous)
            for record in [*(m.record() for m in results), ledger.record()]:
                emit(record)
            timings += results
            ledgers.append(ledger)
            previous = results
    print(summary(timings, ledgers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
