"""The heartbeat hot path: what a job's check-in costs the governor, against GET /healthz
(the bare cost of an HTTP round trip to the same server) measured in the same run.

Each measurement starts its own `python -m governor serve` (default settings, scheduler
running) on a fresh database and sets it up through the API as an operator: budgets with a
ceiling nothing reaches, fake pods, one run per pod. The load comes from this process, one
keep-alive connection per simulated job, each heartbeat what a training job sends (step,
phase, loss, lr, grad_norm):

- sequential: one job sends N heartbeats in a row while its budget holds 1, 10 and 100 pods
  (the other pods' runs stay silent); then N /healthz in a row. Ratios: heartbeat/healthz,
  and 10 and 100 pods against 1.
- closed loop: 200 jobs in budgets of 10 pods, each beating back-to-back for D seconds; then
  /healthz at the same concurrency. Ratios of throughput and of p99 latency.
- open loop: N jobs each beating every 15 s, their first beats spread evenly over the
  interval, for D seconds. Latency counts from each beat's scheduled time, so a server that
  falls behind shows it; no beat is skipped. After D seconds nothing new is sent, answers
  still owed get --drain-s more, and every beat not answered 200 in the end is an error.

One JSON line per measurement on stdout, then a summary table; progress on stderr. SQLite
and PostgreSQL by default (--postgres-url is the admin connection: a database is created
for each server and dropped afterwards). --quick shrinks everything to a few seconds.

    .venv/bin/python bench/heartbeats.py
    .venv/bin/python bench/heartbeats.py --db sqlite --measures closed --closed-duration-s 30
    .venv/bin/python bench/heartbeats.py --quick
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import statistics
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, field, fields, replace
from functools import partial
from typing import Any
from urllib.parse import urlsplit

import httpx
from server_process import (
    DEFAULT_ADMIN_URL,
    OPERATOR_TOKEN,
    BenchError,
    Server,
    emit,
    governor,
    progress,
    raise_open_files_limit,
)

CEILING_USD = "1000000"  # nothing stops during a benchmark
HEARTBEAT_TIMEOUT_S = 3600  # no run is declared lost while the load generator is busy
PASS_WAIT_S = 60.0  # the server passes every 5 s by default
REUSE_IDLE_S = 4.0  # the server drops a keep-alive connection idle for 5 s (uvicorn default)

_setups = itertools.count(1)


# --- one job's connection ----------------------------------------------------------------


class Connection:
    """One keep-alive HTTP/1.1 connection, as a job's own client holds one.

    Deliberately minimal (plain HTTP, Content-Length bodies only): the load generator shares
    the machine with the server, so it should spend as little CPU as it can. A connection
    idle long enough for the server to have dropped it is reopened before use, as a job's
    client would; the reconnect counts in that request's latency.
    """

    def __init__(self, url: str, token: str | None = None) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        auth = f"Authorization: Bearer {token}\r\n" if token else ""
        self._headers = f"Host: {self.host}:{self.port}\r\n{auth}"
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._last_used = 0.0

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        """Send one request, read the whole answer: (status, body)."""
        if self._streams is not None and time.monotonic() - self._last_used > REUSE_IDLE_S:
            self.close()
        while True:
            reused = self._streams is not None
            try:
                return await self._exchange(method, path, body)
            except BaseException as exc:
                self.close()  # dropped by the server, or mid-answer after a timeout or cancel
                dropped = isinstance(exc, ConnectionError | asyncio.IncompleteReadError)
                if not (reused and dropped):
                    raise  # a kept-alive connection the server closed meanwhile: once afresh

    async def _exchange(self, method: str, path: str, body: bytes) -> tuple[int, bytes]:
        if self._streams is None:
            self._streams = await asyncio.open_connection(self.host, self.port)
        reader, writer = self._streams
        head = (
            f"{method} {path} HTTP/1.1\r\n{self._headers}"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        writer.write(head.encode() + body)
        answer = (await reader.readuntil(b"\r\n\r\n")).lower()
        status = int(answer[9:12])
        length = answer.partition(b"\r\ncontent-length:")[2].partition(b"\r\n")[0]
        if not length:
            raise ConnectionError("an answer without Content-Length")
        content = await reader.readexactly(int(length))
        if b"\r\nconnection: close" in answer:
            self.close()
        self._last_used = time.monotonic()
        return status, content

    def close(self) -> None:
        if self._streams is not None:
            self._streams[1].close()
            self._streams = None


# --- jobs, and what a beat's outcome was --------------------------------------------------


def heartbeat_body(step: int) -> bytes:
    """What a training job reports: its step, its phase and a few scalars."""
    loss = 2.2 * math.exp(-step / 4000) + 0.3
    metrics = {"loss": round(loss, 5), "lr": 3e-4, "grad_norm": round(0.5 + 1 / (step + 1), 5)}
    return json.dumps({"step": step, "phase": "training", "metrics": metrics}).encode()


@dataclass
class Job:
    """A training job: its run, its own connection, its step."""

    run_id: str
    token: str
    connection: Connection
    step: int = 0

    async def beat(self) -> str | None:
        """One heartbeat; None if the answer was 200 and `continue`, else what went wrong."""
        self.step += 1
        path = f"/v1/runs/{self.run_id}/heartbeat"
        status, body = await self.connection.request("POST", path, heartbeat_body(self.step))
        if status != 200:
            return f"http_{status}"
        action = json.loads(body)["action"]
        return None if action == "continue" else f"action_{action}"


async def get_healthz(connection: Connection) -> str | None:
    status, _ = await connection.request("GET", "/healthz")
    return None if status == 200 else f"http_{status}"


@dataclass
class Tally:
    """Latencies (seconds) of the requests that succeeded, and why the others did not."""

    latencies: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    finished_at: float = 0.0  # when the last answer came (perf_counter)

    async def time(self, call: Callable[[], Awaitable[str | None]], timeout_s: float) -> None:
        """Run one request, timed from now."""
        await self.time_from(time.perf_counter(), call, timeout_s)

    async def time_from(
        self, start: float, call: Callable[[], Awaitable[str | None]], timeout_s: float
    ) -> None:
        """Run one request; its latency counts from `start` (a perf_counter instant)."""
        try:
            async with asyncio.timeout(timeout_s):
                error = await call()
        except TimeoutError:
            error = "timeout"
        except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
            error = type(exc).__name__
        now = time.perf_counter()
        self.finished_at = max(self.finished_at, now)
        if error is None:
            self.latencies.append(now - start)
        else:
            self.errors[error] += 1

    def stats(self, prefix: str = "") -> dict[str, Any]:
        """Count, p50, p99, mean and max in milliseconds (None without any), and the errors."""
        ms = sorted(x * 1000 for x in self.latencies)
        summary = {
            "count": len(ms),
            "p50_ms": percentile(ms, 50),
            "p99_ms": percentile(ms, 99),
            "mean_ms": statistics.fmean(ms) if ms else None,
            "max_ms": ms[-1] if ms else None,
        }
        rounded = {k: v if v is None else round(v, 3) for k, v in summary.items()}
        rounded |= {"errors": sum(self.errors.values()), "error_kinds": dict(self.errors)}
        return {prefix + key: value for key, value in rounded.items()}


def percentile(ascending: Sequence[float], pct: float) -> float | None:
    """Nearest-rank percentile (None when there is nothing to rank)."""
    if not ascending:
        return None
    return ascending[max(1, math.ceil(pct / 100 * len(ascending))) - 1]


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else round(a / b, 3)


# --- setup through the API ----------------------------------------------------------------


async def create_jobs(
    server: Server, pods_per_budget: Sequence[int], label: str, concurrency: int = 6
) -> list[list[Job]]:
    """Budgets of the given sizes, each pod with its run; the jobs, grouped by budget."""
    limits = httpx.Limits(max_connections=concurrency)
    headers = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
    async with httpx.AsyncClient(
        base_url=server.url, headers=headers, limits=limits, timeout=120
    ) as client:

        async def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
            try:
                response = await client.post(path, json=body)
            except httpx.TransportError as exc:
                server.check_alive()
                raise BenchError(f"setup: POST {path}: {exc!r}\n{server.tail()}") from exc
            if response.status_code != 201:
                server.check_alive()
                raise BenchError(
                    f"setup: POST {path} answered {response.status_code}: "
                    f"{response.text[:500]}\n{server.tail()}"
                )
            result: dict[str, Any] = response.json()
            return result

        label = f"{label}{next(_setups)}"  # unique refs, even with one server for all
        budgets = await asyncio.gather(
            *(
                post("/v1/budgets", {"name": f"{label}-{b}", "ceiling_usd": CEILING_USD})
                for b in range(len(pods_per_budget))
            )
        )
        total, done = sum(pods_per_budget), 0
        gate = asyncio.Semaphore(concurrency)
        shown = time.monotonic()

        async def pod_and_run(budget: dict[str, Any], number: int) -> Job:
            nonlocal done, shown
            async with gate:
                ref = f"{budget['name']}-pod-{number}"
                pod = await post(
                    f"/v1/budgets/{budget['id']}/pods", {"provider": "fake", "provider_ref": ref}
                )
                run = await post(
                    f"/v1/budgets/{budget['id']}/runs",
                    {
                        "name": f"job-{number}",
                        "pod_id": pod["id"],
                        "heartbeat_timeout_s": HEARTBEAT_TIMEOUT_S,
                    },
                )
            done += 1
            if time.monotonic() - shown > 5 or done == total:
                shown = time.monotonic()
                progress(f"  setup: {done}/{total} pods with their runs")
            return Job(run["id"], run["token"], Connection(server.url, run["token"]))

        groups = await asyncio.gather(
            *(
                asyncio.gather(*(pod_and_run(budget, n) for n in range(size)))
                for budget, size in zip(budgets, pods_per_budget, strict=True)
            )
        )
        await _pass_after(client, server, time.monotonic())
        return [list(group) for group in groups]


async def _pass_after(client: httpx.AsyncClient, server: Server, since: float) -> None:
    """Wait for an enforcement pass to finish after `since` (a monotonic instant), as one
    does within an interval of a real job's start: until then a budget has no figures kept
    for its heartbeats, which take the full path."""
    deadline = since + PASS_WAIT_S
    while time.monotonic() < deadline:
        text = (await client.get(f"{server.passes_url}/metrics")).text
        line = text.partition('governor_pass_age_seconds{task="enforce"} ')[2]
        age = float(line.partition("\n")[0] or "inf")
        if time.monotonic() - age > since:
            return
        await asyncio.sleep(0.2)
    raise BenchError(f"setup: no enforcement pass finished within {PASS_WAIT_S:g} s")


def close_all(jobs: Sequence[Job]) -> None:
    for job in jobs:
        job.connection.close()


def budget_sizes(jobs: int, pods_per_budget: int) -> list[int]:
    """`jobs` pods in budgets of `pods_per_budget` (the last one may be smaller)."""
    full, rest = divmod(jobs, pods_per_budget)
    return [pods_per_budget] * full + ([rest] if rest else [])


# --- the measurements ---------------------------------------------------------------------


@dataclass(frozen=True)
class Sizes:
    seq_beats: int = 500
    seq_warmup: int = 50
    seq_pods: tuple[int, ...] = (1, 10, 100)
    seq_jobs: int = 1
    closed_jobs: int = 200
    closed_duration_s: float = 15.0
    open_jobs: tuple[int, ...] = (500, 2000)
    open_interval_s: float = 15.0
    open_duration_s: float = 60.0
    drain_s: float = 30.0
    pods_per_budget: int = 10
    beat_timeout_s: float = 60.0


QUICK = Sizes(
    seq_beats=10,
    seq_warmup=3,
    seq_pods=(1, 10),
    closed_jobs=10,
    closed_duration_s=1.0,
    open_jobs=(20,),
    open_interval_s=0.5,
    open_duration_s=1.0,
    drain_s=10.0,
    pods_per_budget=5,
)


async def sequential(server: Server, sizes: Sizes) -> list[dict[str, Any]]:
    """One beat at a time, by one job (or `seq_jobs` in turn, so that a long series keeps
    within each token's write limit) of a budget holding each of `seq_pods` pods; /healthz
    alike."""
    groups = await create_jobs(server, sizes.seq_pods, "seq")
    health = Connection(server.url)
    records = []
    for pods, jobs in zip(sizes.seq_pods, groups, strict=True):
        in_turn = itertools.cycle(jobs[: sizes.seq_jobs])
        progress(f"  sequential: {sizes.seq_beats} heartbeats, budget of {pods} pods")
        beats, healthz = Tally(), Tally()
        for _ in range(sizes.seq_warmup):
            await Tally().time(next(in_turn).beat, sizes.beat_timeout_s)
            await Tally().time(partial(get_healthz, health), sizes.beat_timeout_s)
        cpu_start = server.cpu_s()
        for _ in range(sizes.seq_beats):
            await beats.time(next(in_turn).beat, sizes.beat_timeout_s)
        cpu_beats = server.cpu_s()
        for _ in range(sizes.seq_beats):
            await healthz.time(partial(get_healthz, health), sizes.beat_timeout_s)
        cpu_healthz = server.cpu_s() - cpu_beats
        record = {
            "measure": "sequential",
            "pods_in_budget": pods,
            "jobs_in_turn": min(sizes.seq_jobs, pods),
            **beats.stats(),
            **healthz.stats("healthz_"),
            # the server's CPU per request: what a busy machine's scheduling cannot blur
            "cpu_ms": round((cpu_beats - cpu_start) * 1000 / sizes.seq_beats, 3),
            "healthz_cpu_ms": round(cpu_healthz * 1000 / sizes.seq_beats, 3),
        }
        record["ratio_p50"] = ratio(record["p50_ms"], record["healthz_p50_ms"])
        record["ratio_mean"] = ratio(record["mean_ms"], record["healthz_mean_ms"])
        record["ratio_cpu"] = ratio(record["cpu_ms"], record["healthz_cpu_ms"])
        records.append(record)
    close_all([job for jobs in groups for job in jobs])
    health.close()
    base = records[0]
    for record in records:
        record["vs_first_p50"] = ratio(record["p50_ms"], base["p50_ms"])
        record["vs_first_mean"] = ratio(record["mean_ms"], base["mean_ms"])
    return records


async def _closed(
    calls: Sequence[Callable[[], Awaitable[str | None]]], duration_s: float, timeout_s: float
) -> tuple[Tally, float]:
    """Each call repeated back-to-back until `duration_s` is up: the tally, and its answers
    per second until the last one came."""
    tally = Tally()
    start = time.perf_counter()
    end = start + duration_s

    async def loop(call: Callable[[], Awaitable[str | None]]) -> None:
        while time.perf_counter() < end:
            await tally.time(call, timeout_s)

    await asyncio.gather(*(loop(call) for call in calls))
    return tally, len(tally.latencies) / (tally.finished_at - start)


async def closed_loop(server: Server, sizes: Sizes) -> dict[str, Any]:
    """`closed_jobs` jobs beating back-to-back; then /healthz at the same concurrency."""
    groups = await create_jobs(
        server, budget_sizes(sizes.closed_jobs, sizes.pods_per_budget), "closed"
    )
    jobs = [job for group in groups for job in group]
    await asyncio.gather(*(Tally().time(job.beat, sizes.beat_timeout_s) for job in jobs))
    progress(f"  closed loop: {len(jobs)} jobs for {sizes.closed_duration_s:g} s")
    beats, rate = await _closed(
        [job.beat for job in jobs], sizes.closed_duration_s, sizes.beat_timeout_s
    )
    progress(f"  closed loop: /healthz on {len(jobs)} connections")
    health = [Connection(server.url) for _ in jobs]
    healthz, healthz_rate = await _closed(
        [partial(get_healthz, connection) for connection in health],
        sizes.closed_duration_s,
        sizes.beat_timeout_s,
    )
    close_all(jobs)
    for connection in health:
        connection.close()
    record = {
        "measure": "closed_loop",
        "jobs": len(jobs),
        "budgets": len(groups),
        "duration_s": sizes.closed_duration_s,
        "heartbeats_per_s": round(rate, 1),
        **beats.stats(),
        "healthz_per_s": round(healthz_rate, 1),
        **healthz.stats("healthz_"),
    }
    record["ratio"] = ratio(rate, healthz_rate)
    record["p99_ratio"] = ratio(record["p99_ms"], record["healthz_p99_ms"])
    return record


def schedule(job: int, jobs: int, interval_s: float, duration_s: float) -> list[float]:
    """When job number `job` of `jobs` beats, in seconds from the start: first at its share
    of the interval, then once per interval, for as long as the run lasts."""
    offset = job * interval_s / jobs
    return [offset + k * interval_s for k in range(math.ceil((duration_s - offset) / interval_s))]


async def open_loop(server: Server, sizes: Sizes, jobs_count: int) -> dict[str, Any]:
    """`jobs_count` jobs on a fixed schedule; latency from each beat's scheduled time."""
    groups = await create_jobs(
        server, budget_sizes(jobs_count, sizes.pods_per_budget), f"open{jobs_count}"
    )
    jobs = [job for group in groups for job in group]
    interval, duration = sizes.open_interval_s, sizes.open_duration_s
    progress(f"  open loop: {len(jobs)} jobs, a beat each every {interval:g} s, for {duration:g} s")
    plans = [schedule(n, len(jobs), interval, duration) for n in range(len(jobs))]
    tally = Tally()
    start = time.perf_counter() + 0.5

    async def run(job: Job, plan: list[float]) -> None:
        for offset in plan:  # one connection per job: a late answer delays its next beat
            due = start + offset
            await asyncio.sleep(due - time.perf_counter())
            await tally.time_from(due, job.beat, sizes.beat_timeout_s)

    tasks = [asyncio.create_task(run(job, plan)) for job, plan in zip(jobs, plans, strict=True)]
    _, late = await asyncio.wait(
        tasks, timeout=start + duration + sizes.drain_s - time.perf_counter()
    )
    if late:
        progress(f"  open loop: {len(late)} jobs still waiting after the drain; cut off")
    for task in late:
        task.cancel()
    await asyncio.gather(*late, return_exceptions=True)
    close_all(jobs)
    scheduled = sum(len(plan) for plan in plans)
    unanswered = scheduled - len(tally.latencies) - sum(tally.errors.values())
    if unanswered:
        tally.errors["unanswered"] += unanswered
    elapsed = tally.finished_at - start
    return {
        "measure": "open_loop",
        "jobs": len(jobs),
        "interval_s": interval,
        "duration_s": duration,
        "scheduled": scheduled,
        "offered_per_s": round(scheduled / duration, 1),
        "achieved_per_s": round(len(tally.latencies) / elapsed, 1) if elapsed > 0 else 0.0,
        **tally.stats(),
    }


# --- running it ---------------------------------------------------------------------------

Measure = Callable[[Server, Sizes], Awaitable[dict[str, Any] | list[dict[str, Any]]]]


def measures(names: Sequence[str], sizes: Sizes) -> list[tuple[str, Measure]]:
    """The chosen measurements, in order; each gets a fresh server and database."""
    chosen: list[tuple[str, Measure]] = []
    if "sequential" in names:
        chosen.append(("sequential", sequential))
    if "closed" in names:
        chosen.append(("closed loop", closed_loop))
    if "open" in names:
        for jobs in sizes.open_jobs:
            chosen.append((f"open loop, {jobs} jobs", partial(open_loop, jobs_count=jobs)))
    return chosen


def bench_database(
    kind: str,
    admin_url: str,
    names: Sequence[str],
    sizes: Sizes,
    *,
    shared: bool = False,
    passes_apart: bool = False,
) -> list[dict[str, Any]]:
    """Each chosen measurement on its own fresh server, or all on one when `shared`."""
    records = []
    start = partial(governor, kind, admin_url, passes_apart=passes_apart)
    with ExitStack() as stack:
        one = stack.enter_context(start()) if shared else None
        for title, measure in measures(names, sizes):
            with nullcontext(one) if one else start() as server:
                progress(f"[{kind}] {title}")
                results = asyncio.run(measure(server, sizes))
                server.check_alive()
            for result in results if isinstance(results, list) else [results]:
                record = {"bench": "heartbeats", "db": kind, "passes_apart": passes_apart, **result}
                emit(record)
                records.append(record)
    return records


def _fmt(value: Any, width: int) -> str:
    if value is None:
        return "-".rjust(width)
    if isinstance(value, float):
        return f"{value:{width}.2f}"
    return str(value).rjust(width)


def _table(title: str, columns: Sequence[tuple[str, str]], rows: Sequence[dict]) -> None:
    if not rows:
        return
    widths = [max(9, len(header)) for header, _ in columns]
    print(f"\n{title}")
    print("  ".join(h.rjust(w) for (h, _), w in zip(columns, widths, strict=True)))
    for row in rows:
        print("  ".join(_fmt(row.get(k), w) for (_, k), w in zip(columns, widths, strict=True)))


def summary(records: Sequence[dict[str, Any]]) -> None:
    """The measurements as tables, one per kind (milliseconds, per second)."""

    def of(measure: str) -> list[dict[str, Any]]:
        return [r for r in records if r["measure"] == measure]

    _table(
        "sequential: one job; heartbeat vs /healthz, and against the 1-pod budget",
        [
            ("db", "db"),
            ("pods", "pods_in_budget"),
            ("hb p50", "p50_ms"),
            ("hb mean", "mean_ms"),
            ("hz p50", "healthz_p50_ms"),
            ("hb/hz p50", "ratio_p50"),
            ("hb/hz mean", "ratio_mean"),
            ("hb cpu", "cpu_ms"),
            ("hz cpu", "healthz_cpu_ms"),
            ("hb/hz cpu", "ratio_cpu"),
            ("vs 1 p50", "vs_first_p50"),
            ("vs 1 mean", "vs_first_mean"),
            ("errors", "errors"),
        ],
        of("sequential"),
    )
    _table(
        "closed loop: back-to-back, then /healthz at the same concurrency",
        [
            ("db", "db"),
            ("jobs", "jobs"),
            ("hb/s", "heartbeats_per_s"),
            ("hb p50", "p50_ms"),
            ("hb p99", "p99_ms"),
            ("errors", "errors"),
            ("hz/s", "healthz_per_s"),
            ("hz p99", "healthz_p99_ms"),
            ("hb/hz rate", "ratio"),
            ("p99 ratio", "p99_ratio"),
        ],
        of("closed_loop"),
    )
    _table(
        "open loop: fixed schedule, latency from the scheduled time",
        [
            ("db", "db"),
            ("jobs", "jobs"),
            ("offered/s", "offered_per_s"),
            ("achieved/s", "achieved_per_s"),
            ("p50", "p50_ms"),
            ("p99", "p99_ms"),
            ("max", "max_ms"),
            ("errors", "errors"),
        ],
        of("open_loop"),
    )


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(",") if part)


def parse_args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, Sizes]:
    full = Sizes()
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument(
        "--postgres-url", default=DEFAULT_ADMIN_URL, help="admin connection (default %(default)s)"
    )
    parser.add_argument(
        "--measures",
        default="sequential,closed,open",
        help="which, comma-separated: sequential, closed, open (default all)",
    )
    parser.add_argument(
        "--shared-server",
        action="store_true",
        help="one server per database for every measurement (faster to start; later ones "
        "then run beside the earlier ones' pods)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes and a shared server: a smoke test"
    )
    parser.add_argument(
        "--passes-apart",
        action="store_true",
        help="PostgreSQL: the beats go to a replica that serves the API only "
        "(GOVERNOR_SCHEDULER_ENABLED=false), beside a second replica that leads the passes",
    )
    sized = parser.add_argument_group("sizes (defaults: full size; --quick shrinks them)")
    help_of = {
        "seq_beats": "timed heartbeats per budget size",
        "seq_warmup": "untimed heartbeats and /healthz calls first",
        "seq_pods": "budget sizes, comma-separated",
        "seq_jobs": "jobs of the budget beating in turn (each token may write 600 a minute)",
        "closed_jobs": "jobs in the closed loop",
        "closed_duration_s": "seconds of each closed loop",
        "open_jobs": "open-loop sizes, comma-separated",
        "open_interval_s": "seconds between one job's beats",
        "open_duration_s": "seconds during which beats are sent",
        "drain_s": "seconds more for answers still owed after an open loop",
        "pods_per_budget": "pods (and jobs) per budget in the loops",
        "beat_timeout_s": "one request's time limit",
    }
    for spec in fields(Sizes):
        default = getattr(full, spec.name)
        kind = _ints if isinstance(default, tuple) else type(default)
        shown = ",".join(map(str, default)) if isinstance(default, tuple) else default
        sized.add_argument(
            "--" + spec.name.replace("_", "-"),
            type=kind,
            default=None,
            help=f"{help_of[spec.name]} (full: {shown})",
        )
    args = parser.parse_args(argv)
    chosen = {f.name: getattr(args, f.name) for f in fields(Sizes)}
    given = {name: value for name, value in chosen.items() if value is not None}
    sizes = replace(QUICK if args.quick else full, **given)
    return args, sizes


def main(argv: Sequence[str] | None = None) -> int:
    args, sizes = parse_args(argv)
    names = [name.strip() for name in args.measures.split(",") if name.strip()]
    unknown = set(names) - {"sequential", "closed", "open"}
    if unknown:
        print(f"heartbeats: unknown measure(s): {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    raise_open_files_limit()
    databases = ["sqlite", "postgres"] if args.db == "both" else [args.db]
    records: list[dict[str, Any]] = []
    try:
        for kind in databases:
            shared = args.shared_server or args.quick
            records += bench_database(
                kind,
                args.postgres_url,
                names,
                sizes,
                shared=shared,
                passes_apart=args.passes_apart,
            )
    except BenchError as exc:
        print(f"heartbeats: {exc}", file=sys.stderr)
        return 1
    summary(records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
