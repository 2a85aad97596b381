"""What an enforcement pass does to the heartbeats that arrive while it runs.

A fleet is built as bench/enforce_scale.py builds it (budgets of 10 pods, a live run on each)
and looked at by one pass. Then, for the duration, one thread runs enforcement passes back to
back (half a second apart) while others heartbeat through the service call the API's
heartbeat route makes, round the fleet's runs, each on a fixed schedule (200 beats a second
between them, well within what the process answers outside a pass), each beat's latency
counted from when it was due: a beat held up holds up those due after it on its thread, as a
real job's would be answered late, rather than going unsent. The beats come from as many
threads as a server answers requests on (40), so that, as in a server, a beat held up holds
up few others; from only a few threads, the threads themselves become the queue. On SQLite
every writer waits for the one writing, so what a beat waits for is the pass's transaction
in progress; on PostgreSQL a plain beat waits for no pass. The beats' p50, p99, p99.9 and
worst, and the passes' mean, are the figures; the process's own threads share its
interpreter, as a server's do, with no HTTP and no load generator beside them. Each series
runs twice on the same fleet: at the switch interval `governor serve` sets, then at CPython's
own (5 ms) as the baseline, with the first's p99 as a multiple of the baseline's.

    .venv/bin/python bench/pass_tail.py                       # 2,000 pods, 30 s, both
    .venv/bin/python bench/pass_tail.py --db sqlite --pods 1000 --duration-s 10
    .venv/bin/python bench/pass_tail.py --db sqlite --beaters 4     # beats from 4 threads
    .venv/bin/python bench/pass_tail.py --quick               # seconds: what CI runs

One JSON line per database and switch interval on stdout, then a summary; progress on
stderr.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from typing import Any

from enforce_scale import built_fleet, heartbeat_all
from fleet import (
    SimClock,
    check_in,
    database_kinds,
    emit,
    exit_cleanly_on_sigterm,
    progress,
    quiet_event_log,
    scratch_database,
)
from server_process import DEFAULT_ADMIN_URL

from governor.cli.serve import SWITCH_INTERVAL_S
from governor.scheduler.tasks import TASKS
from governor.services.context import ServiceContext
from governor.services.jobs import checkins

BENCH = "pass_tail"
BEATERS = 40  # the threads a server answers its requests on (anyio's default limit)
BEATS_PER_S = 200  # between all the beating threads
PAUSE_BETWEEN_PASSES_S = 0.5
CPYTHON_SWITCH_INTERVAL_S = 0.005  # the interpreter's own, the baseline


def percentile_ms(ascending: list[float], fraction: float) -> float:
    return round(ascending[min(len(ascending) - 1, int(len(ascending) * fraction))] * 1000, 3)


def measure(
    kind: str, url: str, pods: int, duration_s: float, beaters: int
) -> list[dict[str, Any]]:
    """The fleet's beats beside back-to-back passes, once at each switch interval (the
    server's first, then CPython's own as the baseline), on the same fleet."""
    records: list[dict[str, Any]] = []
    with built_fleet(kind, url, pods) as (clock, ctx, run_ids):
        clock.advance(ctx.config.enforce_interval_s)
        heartbeat_all(ctx, run_ids, step=1)
        TASKS["enforce"].run(ctx)  # every budget has figures kept: beats take the plain path
        first_step = 2
        for interval_s in (SWITCH_INTERVAL_S, CPYTHON_SWITCH_INTERVAL_S):
            progress(
                f"  beats from {beaters} threads, passes back to back, for {duration_s:g} s, "
                f"switch interval {interval_s * 1000:g} ms"
            )
            previous = sys.getswitchinterval()
            sys.setswitchinterval(interval_s)
            try:
                beats, passes, first_step = beside_passes(
                    ctx, clock, run_ids, duration_s, beaters, first_step
                )
            finally:
                sys.setswitchinterval(previous)
            records.append(
                {
                    "bench": BENCH,
                    "db": kind,
                    "pods": pods,
                    "duration_s": duration_s,
                    "beaters": beaters,
                    "switch_interval_s": interval_s,
                    "beats": len(beats),
                    "p50_ms": percentile_ms(beats, 0.5),
                    "p99_ms": percentile_ms(beats, 0.99),
                    "p999_ms": percentile_ms(beats, 0.999),
                    "max_ms": round(beats[-1] * 1000, 3),
                    "passes": len(passes),
                    "pass_mean_s": round(statistics.fmean(passes), 6) if passes else None,
                }
            )
    server, baseline = records
    server["p99_vs_cpython"] = round(server["p99_ms"] / baseline["p99_ms"], 3)
    return records


def beside_passes(
    ctx: ServiceContext,
    clock: SimClock,
    run_ids: list[str],
    duration_s: float,
    beaters: int,
    first_step: int,
) -> tuple[list[float], list[float], int]:
    """Each beat's lateness and each pass's time (seconds, ascending for the beats), and the
    step the next series starts from (past every step this one sent: beat `n` sends step
    `first_step + n`, and a thread that sent m beats sent no `n` from `beaters * m` on)."""
    every_s = beaters / BEATS_PER_S  # each thread's schedule
    until = time.monotonic() + duration_s
    beats: list[float] = []
    passes: list[float] = []

    def passing() -> None:
        while time.monotonic() < until:
            started = time.perf_counter()
            TASKS["enforce"].run(ctx)
            passes.append(time.perf_counter() - started)
            time.sleep(PAUSE_BETWEEN_PASSES_S)

    def beating(first: int) -> None:
        due = time.perf_counter() + first / BEATS_PER_S
        for n in range(first, sys.maxsize, beaters):
            if time.monotonic() >= until:
                return
            time.sleep(max(0.0, due - time.perf_counter()))  # the schedule, not a wait
            beat = checkins.Heartbeat(step=first_step + n)
            check_in(ctx, run_ids[n % len(run_ids)], beat, clock.now())
            beats.append(time.perf_counter() - due)
            due += every_s

    threads = [threading.Thread(target=passing)]
    threads += [threading.Thread(target=beating, args=(k,)) for k in range(beaters)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sorted(beats), passes, first_step + beaters * len(beats)


def summary(records: list[dict[str, Any]]) -> str:
    lines = ["", "pass_tail: heartbeats while enforcement passes run back to back", ""]
    lines.append(
        f"  {'db':<9}{'pods':>7}{'switch':>9}{'beats':>8}{'p50':>10}{'p99':>10}{'p99.9':>10}"
    )
    for r in records:
        versus = r.get("p99_vs_cpython")
        lines.append(
            f"  {r['db']:<9}{r['pods']:>7}{r['switch_interval_s'] * 1000:>7g}ms{r['beats']:>8}"
            f"{r['p50_ms']:>8.1f}ms{r['p99_ms']:>8.1f}ms{r['p999_ms']:>8.1f}ms   "
            f"worst {r['max_ms']:.1f} ms, {r['passes']} passes of {r['pass_mean_s']} s on "
            f"average, beats from {r['beaters']} threads"
            + ("" if versus is None else f"; p99 {versus:g}x CPython's switch interval's")
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--pods", type=int, default=2000, help="fleet size (default 2000)")
    parser.add_argument("--duration-s", type=float, default=30.0, help="seconds (default 30)")
    parser.add_argument(
        "--beaters",
        type=int,
        default=BEATERS,
        help=f"threads the beats come from (default {BEATERS}, a server's worker threads)",
    )
    parser.add_argument("--quick", action="store_true", help="20 pods for 2 s: what CI runs")
    parser.add_argument(
        "--postgres-url",
        default=DEFAULT_ADMIN_URL,
        help="an admin connection that may CREATE and DROP a scratch database "
        f"(default {DEFAULT_ADMIN_URL})",
    )
    args = parser.parse_args(argv)
    pods, duration_s = (20, 2.0) if args.quick else (args.pods, args.duration_s)
    if pods <= 0 or duration_s <= 0 or args.beaters <= 0:
        parser.error("--pods, --duration-s and --beaters must be positive")
    quiet_event_log()
    exit_cleanly_on_sigterm()
    records = []
    for kind in database_kinds(args.db):
        with scratch_database(kind, args.postgres_url) as url:
            measured = measure(kind, url, pods, duration_s, args.beaters)
        for record in measured:
            emit(record)
        records += measured
    print(summary(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
