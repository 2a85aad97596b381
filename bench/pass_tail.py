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
interpreter, as a server's do, with no HTTP and no load generator beside them.

    .venv/bin/python bench/pass_tail.py                       # 2,000 pods, 30 s, both
    .venv/bin/python bench/pass_tail.py --db sqlite --pods 1000 --duration-s 10
    .venv/bin/python bench/pass_tail.py --db sqlite --beaters 4     # beats from 4 threads
    .venv/bin/python bench/pass_tail.py --quick               # seconds: what CI runs

One JSON line per database on stdout, then a summary; progress on stderr.
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
    check_in,
    database_kinds,
    emit,
    exit_cleanly_on_sigterm,
    progress,
    quiet_event_log,
    scratch_database,
)
from server_process import DEFAULT_ADMIN_URL

from governor.scheduler.tasks import TASKS
from governor.services import checkins

BENCH = "pass_tail"
BEATERS = 40  # the threads a server answers its requests on (anyio's default limit)
BEATS_PER_S = 200  # between all the beating threads
PAUSE_BETWEEN_PASSES_S = 0.5


def percentile_ms(ascending: list[float], fraction: float) -> float:
    return round(ascending[min(len(ascending) - 1, int(len(ascending) * fraction))] * 1000, 3)


def measure(kind: str, url: str, pods: int, duration_s: float, beaters: int) -> dict[str, Any]:
    with built_fleet(kind, url, pods) as (clock, ctx, run_ids):
        clock.advance(ctx.config.enforce_interval_s)
        heartbeat_all(ctx, run_ids, step=1)
        TASKS["enforce"].run(ctx)  # every budget has figures kept: beats take the plain path
        progress(f"  beats from {beaters} threads, passes back to back, for {duration_s:g} s")
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
                beat = checkins.Heartbeat(step=2 + n)
                check_in(ctx, run_ids[n % len(run_ids)], beat, clock.now())
                beats.append(time.perf_counter() - due)
                due += every_s

        threads = [threading.Thread(target=passing)]
        threads += [threading.Thread(target=beating, args=(k,)) for k in range(beaters)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    beats.sort()
    return {
        "bench": BENCH,
        "db": kind,
        "pods": pods,
        "duration_s": duration_s,
        "beaters": beaters,
        "beats": len(beats),
        "p50_ms": percentile_ms(beats, 0.5),
        "p99_ms": percentile_ms(beats, 0.99),
        "p999_ms": percentile_ms(beats, 0.999),
        "max_ms": round(beats[-1] * 1000, 3),
        "passes": len(passes),
        "pass_mean_s": round(statistics.fmean(passes), 6) if passes else None,
    }


def summary(records: list[dict[str, Any]]) -> str:
    lines = ["", "pass_tail: heartbeats while enforcement passes run back to back", ""]
    lines.append(f"  {'db':<9}{'pods':>7}{'beats':>8}{'p50':>10}{'p99':>10}{'p99.9':>10}")
    for r in records:
        lines.append(
            f"  {r['db']:<9}{r['pods']:>7}{r['beats']:>8}{r['p50_ms']:>8.1f}ms"
            f"{r['p99_ms']:>8.1f}ms{r['p999_ms']:>8.1f}ms   worst {r['max_ms']:.1f} ms, "
            f"{r['passes']} passes of {r['pass_mean_s']} s on average, "
            f"beats from {r['beaters']} threads"
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
            record = measure(kind, url, pods, duration_s, args.beaters)
        emit(record)
        records.append(record)
    print(summary(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
