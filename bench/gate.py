"""A launch gate's decision at fleet scale: 1,000 budgets of 10 pods (10,000 pods, each with a
live run), SkyPilot's admin-policy request for an 8-GPU launch labelled with one of the
budgets, judged and reserved over real HTTP; against GET /healthz (the bare cost of an HTTP
round trip to the same server) measured in the same run.

The fleet is built in-process through the services (as bench/enforce_scale.py builds it),
then `python -m governor serve` is started on that database with a rate card and the
scheduler running, and one keep-alive client sends N gate requests in a row, each to a budget
drawn at random, then N /healthz. Goal: the gate's p99 under 50 ms.

    .venv/bin/python bench/gate.py                     # SQLite and PostgreSQL, 10,000 pods
    .venv/bin/python bench/gate.py --db sqlite --pods 1000 --requests 100
    .venv/bin/python bench/gate.py --quick

One JSON line per measurement on stdout, then a summary; progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from enforce_scale import PODS_PER_BUDGET, build_fleet
from fleet import SimClock, build_context, database_kinds, emit, progress, scratch_database
from server_process import DEFAULT_ADMIN_URL, Server

from governor.db.engine import unit_of_work
from governor.domain.model import Role
from governor.fakes.cloud import BillingFakeProvider
from governor.services.security import tokens

BENCH = "gate"
RATE_CARD = {"aws:H100": "4.00", "aws:H100:spot": "2.00"}
GOAL_P99_MS = 50.0


def skypilot_body(budget: str) -> bytes:
    """What SkyPilot's RestfulAdminPolicy POSTs for `sky launch` of an 8 x H100 task."""
    task = (
        "resources:\n  infra: aws/us-east-1\n  accelerators:\n    H100: 8\n  use_spot: true\n"
        f"  labels:\n    governor-budget: {budget}\nnum_nodes: 1\nrun: python train.py\n"
        "envs:\n  GOVERNOR_MAX_HOURS: '1'\n"
    )
    inner = {
        "task": task,
        "skypilot_config": "{}\n",
        "request_name": "launch",
        "request_options": None,
        "at_client_side": False,
        "user": "id: u-1\nname: alice\n",
    }
    return json.dumps(json.dumps(inner)).encode()


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def timed(client: httpx.Client, method: str, path: str, body: bytes | None) -> float:
    start = time.perf_counter()
    response = client.request(method, path, content=body)
    took = (time.perf_counter() - start) * 1000
    if response.status_code != 200:
        raise SystemExit(f"{method} {path}: {response.status_code} {response.text[:300]}")
    return took


def built(url: str, pods: int) -> str:
    """The fleet built on `url`, in a process of its own (which leaves the database, and on
    SQLite its lock, to the server once it ends); the gate token it made."""
    clock = SimClock(datetime.now(UTC))  # the server's clock: nothing to meter on start
    ctx = build_context(url, clock, {"fake": BillingFakeProvider(clock)})
    build_fleet(ctx, pods)
    with unit_of_work(ctx.sessions) as session:
        token = tokens.issue(session, Role.GATE, clock.now(), label="bench")
    ctx.engine.dispose()
    return token


def measure(kind: str, pods: int, requests: int, postgres_url: str) -> dict[str, Any]:
    with scratch_database(kind, postgres_url) as url:
        progress(f"{kind}: building {pods} pods in {pods // PODS_PER_BUDGET} budgets")
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            gate = pool.apply(built, (url, pods))
        with tempfile.TemporaryDirectory(prefix="gov_gate_") as folder:
            server = Server(url, Path(folder), GOVERNOR_RATE_CARD=json.dumps(RATE_CARD))
            try:
                server.start().wait_ready()
                budgets = [f"fleet-{b}" for b in range(pods // PODS_PER_BUDGET)]
                picks = random.Random(7)
                with httpx.Client(base_url=server.url, timeout=30) as client:
                    for _ in range(10):  # warm: connections, caches
                        timed(client, "GET", "/healthz", None)
                        path = f"/v1/gates/{gate}/skypilot"
                        timed(client, "POST", path, skypilot_body(picks.choice(budgets)))
                    progress(f"{kind}: {requests} gate decisions, then {requests} /healthz")
                    gate_ms = [
                        timed(client, "POST", path, skypilot_body(picks.choice(budgets)))
                        for _ in range(requests)
                    ]
                    health_ms = [timed(client, "GET", "/healthz", None) for _ in range(requests)]
            finally:
                server.stop()
    record = {
        "bench": BENCH,
        "db": kind,
        "pods": pods,
        "budgets": pods // PODS_PER_BUDGET,
        "requests": requests,
        "gate_p50_ms": round(statistics.median(gate_ms), 2),
        "gate_p99_ms": round(percentile(gate_ms, 0.99), 2),
        "healthz_p50_ms": round(statistics.median(health_ms), 2),
        "healthz_p99_ms": round(percentile(health_ms, 0.99), 2),
    }
    record["p50_ratio"] = round(record["gate_p50_ms"] / record["healthz_p50_ms"], 1)
    record["p99_ratio"] = round(record["gate_p99_ms"] / record["healthz_p99_ms"], 1)
    record["goal_met"] = record["gate_p99_ms"] < GOAL_P99_MS
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", default="both", choices=["sqlite", "postgres", "both"])
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--postgres-url", default=DEFAULT_ADMIN_URL)
    parser.add_argument("--quick", action="store_true", help="100 pods, 30 requests")
    args = parser.parse_args(argv)
    pods, requests = (100, 30) if args.quick else (args.pods, args.requests)
    records = [measure(k, pods, requests, args.postgres_url) for k in database_kinds(args.db)]
    for record in records:
        emit(record)
    for r in records:
        print(
            f"{r['db']:8} {r['pods']:>6} pods: gate p50 {r['gate_p50_ms']} ms, p99 "
            f"{r['gate_p99_ms']} ms (goal < {GOAL_P99_MS:g}); /healthz p50 "
            f"{r['healthz_p50_ms']} ms, p99 {r['healthz_p99_ms']} ms; ratio p50 "
            f"{r['p50_ratio']}x, p99 {r['p99_ratio']}x",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
