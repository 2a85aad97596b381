"""The governor server's memory: resident set (VmRSS) and its peak (VmHWM) when idle after
start-up, once 200 jobs are set up, and after an hour's worth of their heartbeats.

An hour of 200 jobs each beating every 15 s is 200 x 240 = 48,000 heartbeats. They are sent
as fast as the server answers, by --concurrency lanes at a time; each lane takes its share
of the jobs round by round (every job's first beat, then every job's second, ...), each job
over its own keep-alive connection. The server runs with its default settings (scheduler
on) on a fresh database, set up through the API as bench/heartbeats.py does (budgets of 10
pods, one run per pod). The ledger the scheduler writes grows with the wall-clock time the
run takes, not with the heartbeats: it holds that long, not an hour. A reading is taken once
memory has stopped moving (within 1% over --settle-s) or after --settle-timeout-s, whichever
comes first; `settled` says which.

--worst-input measures the worst a client may send instead: --jobs jobs under one budget each
post --events-per-job run events (within the per-token write limit) whose message and evidence
are as large as allowed, the evidence as many small keys as its size limit takes (what costs
the server the most memory per byte); then the biggest readers read them back: the budget's
report as JSON, Markdown and HTML, then every page of /v1/events at the largest page size.
The server's peak (VmHWM) is started again before each reader and read after it: each
reader's own peak (on top of what the server holds by then; it gives little back).

One JSON line per reading on stdout, then a summary table; progress on stderr. SQLite and
PostgreSQL by default (--postgres-url is the admin connection: a database is created for
the server and dropped afterwards). --quick shrinks it to a few seconds.

    .venv/bin/python bench/footprint.py
    .venv/bin/python bench/footprint.py --db sqlite --jobs 200 --beats-per-job 240
    .venv/bin/python bench/footprint.py --worst-input --jobs 50 --events-per-job 50
    .venv/bin/python bench/footprint.py --quick
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from functools import partial
from typing import Any

import httpx
from heartbeats import Job, Tally, budget_sizes, close_all, create_jobs
from server_process import (
    DEFAULT_ADMIN_URL,
    OPERATOR_TOKEN,
    BenchError,
    Memory,
    Server,
    emit,
    governor,
    progress,
    raise_open_files_limit,
)

from governor.api.schemas import JSON_BYTES
from governor.domain.paging import MAX_LIMIT

MESSAGE_CHARS = 2000  # the longest event message the API accepts


@dataclass(frozen=True)
class Sizes:
    jobs: int = 200
    beats_per_job: int = 240
    pods_per_budget: int = 10
    concurrency: int = 16
    settle_s: float = 5.0
    settle_timeout_s: float = 30.0
    beat_timeout_s: float = 60.0
    events_per_job: int = 50  # --worst-input: at most the per-token limit a minute (60)


QUICK = Sizes(
    jobs=10,
    beats_per_job=10,
    pods_per_budget=5,
    settle_s=0.5,
    settle_timeout_s=3.0,
    events_per_job=5,
)

HELP = {
    "jobs": "simulated jobs, one pod and run each",
    "beats_per_job": "heartbeats each job sends (240: an hour at one per 15 s)",
    "pods_per_budget": "pods per budget",
    "concurrency": "heartbeats in flight at once",
    "settle_s": "memory is settled when it moved under 1%% over this many seconds",
    "settle_timeout_s": "read anyway after this many seconds",
    "beat_timeout_s": "one heartbeat's time limit",
    "events_per_job": "--worst-input: the largest events each job posts",
}


def mib(kib: int) -> float:
    return round(kib / 1024, 1)


def settled_memory(server: Server, window_s: float, timeout_s: float) -> tuple[Memory, bool]:
    """The server's memory once its RSS has moved under 1% over `window_s` (True), or as it
    is after `timeout_s` (False)."""
    started = time.monotonic()
    recent: deque[tuple[float, int]] = deque()
    while True:
        server.check_alive()
        now, memory = time.monotonic(), server.memory()
        recent.append((now, memory.rss_kib))
        while recent[0][0] < now - window_s:
            recent.popleft()
        rss = [kib for _, kib in recent]
        if now - started >= window_s and max(rss) - min(rss) <= 0.01 * max(rss):
            return memory, True
        if now - started >= timeout_s:
            return memory, False
        time.sleep(0.25)


def reading(server: Server, sizes: Sizes, measure: str) -> dict[str, Any]:
    progress(f"  waiting for memory to settle ({measure})")
    memory, settled = settled_memory(server, sizes.settle_s, sizes.settle_timeout_s)
    return {
        "measure": measure,
        "rss_mib": mib(memory.rss_kib),
        "peak_mib": mib(memory.peak_kib),
        "settled": settled,
    }


async def send_heartbeats(jobs: Sequence[Job], sizes: Sizes) -> tuple[Tally, float]:
    """Every job's `beats_per_job` heartbeats, `concurrency` at a time: the tally, seconds."""
    tally = Tally()
    total = len(jobs) * sizes.beats_per_job
    started = time.perf_counter()

    async def lane(mine: Sequence[Job]) -> None:
        for _ in range(sizes.beats_per_job):
            for job in mine:
                await tally.time(job.beat, sizes.beat_timeout_s)

    async def report() -> None:
        while True:
            await asyncio.sleep(10)
            sent = len(tally.latencies) + sum(tally.errors.values())
            rate = sent / (time.perf_counter() - started)
            progress(f"  heartbeats: {sent}/{total} ({rate:.0f}/s)")

    reporter = asyncio.create_task(report())
    lanes = [jobs[n :: sizes.concurrency] for n in range(sizes.concurrency)]
    await asyncio.gather(*(lane(mine) for mine in lanes if mine))
    reporter.cancel()
    close_all(jobs)
    return tally, time.perf_counter() - started


async def set_up(server: Server, sizes: Sizes) -> list[Job]:
    groups = await create_jobs(server, budget_sizes(sizes.jobs, sizes.pods_per_budget), "fp")
    return [job for group in groups for job in group]


def heartbeat_record(
    jobs: Sequence[Job], sizes: Sizes, tally: Tally, seconds: float
) -> dict[str, Any]:
    stats = tally.stats()
    return {
        "measure": "heartbeats",
        "jobs": len(jobs),
        "beats_per_job": sizes.beats_per_job,
        "heartbeats": stats["count"],
        "errors": stats["errors"],
        "error_kinds": stats["error_kinds"],
        "duration_s": round(seconds, 1),
        "heartbeats_per_s": round(stats["count"] / seconds, 1),
        "p50_ms": stats["p50_ms"],
        "p99_ms": stats["p99_ms"],
    }


def bench_database(kind: str, admin_url: str, sizes: Sizes) -> list[dict[str, Any]]:
    """Idle, after setup, the heartbeats, after them: one record each, emitted as they come."""
    records: list[dict[str, Any]] = []

    def record(result: dict[str, Any]) -> dict[str, Any]:
        records.append({"bench": "footprint", "db": kind, **result})
        emit(records[-1])
        return records[-1]

    with governor(kind, admin_url) as server:
        idle = record(reading(server, sizes, "idle"))
        progress(f"[{kind}] setting up {sizes.jobs} jobs")
        jobs = asyncio.run(set_up(server, sizes))
        record({**reading(server, sizes, "after_setup"), "jobs": len(jobs)})
        total = len(jobs) * sizes.beats_per_job
        progress(f"[{kind}] sending {total} heartbeats, {sizes.concurrency} at a time")
        tally, seconds = asyncio.run(send_heartbeats(jobs, sizes))
        server.check_alive()
        record(heartbeat_record(jobs, sizes, tally, seconds))
        after = reading(server, sizes, "after_heartbeats")
        record({**after, "growth_mib": round(after["rss_mib"] - idle["rss_mib"], 1)})
    return records


# --- the worst allowed input ------------------------------------------------------------


def worst_evidence() -> dict[str, int]:
    """As many small keys as the evidence's size limit takes, room left for the two keys the
    server adds ("kind", "reported_by"): the most objects per byte a job may send."""
    room = JSON_BYTES - 64
    evidence: dict[str, int] = {}
    size = 2  # {}
    while True:
        key, value = f"k{len(evidence):05d}", len(evidence)
        entry = len(f'"{key}":{value}') + (1 if evidence else 0)
        if size + entry > room:
            return evidence
        evidence[key] = value
        size += entry


def event_body(job: int, n: int, evidence: dict[str, int]) -> bytes:
    head = f"job {job} event {n}: "
    message = head + "m" * (MESSAGE_CHARS - len(head))  # unique: none folds into another
    body = {"category": "harness", "severity": "warning", "message": message}
    return json.dumps({**body, "evidence": evidence}).encode()


async def post_events(jobs: Sequence[Job], sizes: Sizes) -> tuple[Tally, float]:
    """Every job's `events_per_job` largest events, `concurrency` at a time."""
    tally = Tally()
    evidence = worst_evidence()
    started = time.perf_counter()

    async def post(number: int, job: Job, n: int) -> str | None:
        path = f"/v1/runs/{job.run_id}/events"
        status, _ = await job.connection.request("POST", path, event_body(number, n, evidence))
        return None if status == 201 else f"http_{status}"

    async def lane(mine: Sequence[tuple[int, Job]]) -> None:
        for n in range(sizes.events_per_job):
            for number, job in mine:
                await tally.time(partial(post, number, job, n), sizes.beat_timeout_s)

    numbered = list(enumerate(jobs))
    lanes = [numbered[n :: sizes.concurrency] for n in range(sizes.concurrency)]
    await asyncio.gather(*(lane(mine) for mine in lanes if mine))
    close_all(jobs)
    return tally, time.perf_counter() - started


def read_back(server: Server, budget_id: str) -> list[dict[str, Any]]:
    """The biggest readers, one after the other: each one's size, time and the server's memory
    after it (the peak while it was read)."""
    readers: list[tuple[str, str, dict[str, Any]]] = [
        ("report_json", f"/v1/budgets/{budget_id}/report", {}),
        ("report_md", f"/v1/budgets/{budget_id}/report", {"format": "md"}),
        ("report_html", f"/v1/budgets/{budget_id}/report", {"format": "html"}),
    ]
    results = []
    headers = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=600) as client:

        def get(path: str, params: dict[str, Any]) -> httpx.Response:
            response = client.get(path, params=params)
            if response.status_code != 200:
                server.check_alive()
                raise BenchError(
                    f"GET {path} answered {response.status_code}: {response.text[:300]}"
                )
            return response

        for measure, path, params in readers:
            server.reset_peak()
            started = time.perf_counter()
            response = get(path, params)
            results.append(_read(measure, server, len(response.content), started))
        server.reset_peak()
        started, size, pages = time.perf_counter(), 0, 0
        query: dict[str, Any] = {"budget_id": budget_id, "limit": MAX_LIMIT}
        while True:  # every page of the event log at the largest page size
            response = get("/v1/events", query)
            size, pages = size + len(response.content), pages + 1
            cursor = response.json()["next_cursor"]
            if cursor is None:
                break
            query["cursor"] = cursor
        results.append(_read("events_pages", server, size, started, pages=pages))
    return results


def _read(measure: str, server: Server, size: int, started: float, **more: Any) -> dict[str, Any]:
    memory = server.memory()
    return {
        "measure": measure,
        "response_mib": round(size / 2**20, 1),
        "seconds": round(time.perf_counter() - started, 2),
        "rss_mib": mib(memory.rss_kib),
        "peak_mib": mib(memory.peak_kib),
        **more,
    }


def bench_worst_input(kind: str, admin_url: str, sizes: Sizes) -> list[dict[str, Any]]:
    """Idle, after the largest events went in, then after each of the biggest readers."""
    records: list[dict[str, Any]] = []

    def record(result: dict[str, Any]) -> None:
        records.append({"bench": "footprint_worst_input", "db": kind, **result})
        emit(records[-1])

    with governor(kind, admin_url) as server:
        record(reading(server, sizes, "idle"))
        progress(f"[{kind}] setting up {sizes.jobs} jobs under one budget")
        [jobs] = asyncio.run(create_jobs(server, [sizes.jobs], "worst"))
        total = len(jobs) * sizes.events_per_job
        progress(f"[{kind}] posting {total} events of the largest size allowed")
        tally, seconds = asyncio.run(post_events(jobs, sizes))
        stats = tally.stats()
        if stats["errors"]:
            raise BenchError(f"events refused: {stats['error_kinds']}\n{server.tail()}")
        filled = reading(server, sizes, "filled")
        record({**filled, "events": stats["count"], "duration_s": round(seconds, 1)})
        with httpx.Client(base_url=server.url, timeout=60) as client:
            run = client.get(
                f"/v1/runs/{jobs[0].run_id}", headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"}
            ).json()
        progress(f"[{kind}] reading them back")
        for result in read_back(server, run["budget_id"]):
            record(result)
    return records


def worst_summary(records: Sequence[dict[str, Any]]) -> None:
    print(
        "\nfootprint --worst-input: server memory in MiB after each step (peak: VmHWM so far; "
        "a reader's: while it was read)"
    )
    header = ("db", "measure", "rss", "peak", "response", "seconds")
    print("  ".join(f"{h:>13}" for h in header))
    for r in records:
        row = (r["db"], r["measure"], r["rss_mib"], r["peak_mib"])
        row += (r.get("response_mib", "-"), r.get("seconds", r.get("duration_s", "-")))
        print("  ".join(f"{v:>13}" for v in row))


def summary(records: Sequence[dict[str, Any]]) -> None:
    """One row per database: memory at each reading (MiB), and the heartbeats' rate."""
    print("\nfootprint: server memory in MiB (RSS; peak is VmHWM after the heartbeats)")
    header = ("db", "idle", "set up", "after", "peak", "growth", "beats", "beats/s", "errors")
    print("  ".join(f"{h:>9}" for h in header))
    for kind in dict.fromkeys(r["db"] for r in records):
        by = {r["measure"]: r for r in records if r["db"] == kind}
        idle, setup, beats, after = (
            by.get(m, {}) for m in ("idle", "after_setup", "heartbeats", "after_heartbeats")
        )
        row = (
            kind,
            idle.get("rss_mib"),
            setup.get("rss_mib"),
            after.get("rss_mib"),
            after.get("peak_mib"),
            after.get("growth_mib"),
            beats.get("heartbeats"),
            beats.get("heartbeats_per_s"),
            beats.get("errors"),
        )
        print("  ".join(f"{'-' if v is None else v:>9}" for v in row))


def parse_args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, Sizes]:
    full = Sizes()
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument(
        "--postgres-url", default=DEFAULT_ADMIN_URL, help="admin connection (default %(default)s)"
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test")
    parser.add_argument(
        "--worst-input",
        action="store_true",
        help="fill the server with the largest events allowed and read them back (above)",
    )
    sized = parser.add_argument_group("sizes (defaults: full size; --quick shrinks them)")
    for spec in fields(Sizes):
        default = getattr(full, spec.name)
        sized.add_argument(
            "--" + spec.name.replace("_", "-"),
            type=type(default),
            default=None,
            help=f"{HELP[spec.name]} (full: {default})",
        )
    args = parser.parse_args(argv)
    given = {f.name: getattr(args, f.name) for f in fields(Sizes)}
    overrides = {name: value for name, value in given.items() if value is not None}
    return args, replace(QUICK if args.quick else full, **overrides)


def main(argv: Sequence[str] | None = None) -> int:
    args, sizes = parse_args(argv)
    raise_open_files_limit()
    databases = ["sqlite", "postgres"] if args.db == "both" else [args.db]
    records: list[dict[str, Any]] = []
    bench = bench_worst_input if args.worst_input else bench_database
    try:
        for kind in databases:
            records += bench(kind, args.postgres_url, sizes)
    except BenchError as exc:
        print(f"footprint: {exc}", file=sys.stderr)
        return 1
    (worst_summary if args.worst_input else summary)(records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
