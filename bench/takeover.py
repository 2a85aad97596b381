"""How long the periodic work goes without a leader when the leader goes away.

Two governor replicas on one fresh PostgreSQL database, each in its own process. For each
way a leader can go (SIGTERM: a rolling update; SIGKILL: a crash or an OOM kill; SIGSTOP: a
process paused by the kernel, a debugger or a full node), the leader is found through
/readyz, sent the signal, and the other replica's /readyz is polled until it reports itself
the leader with a newer term. The takeover time is printed beside its bound, the lease plus
the probe interval (SIGTERM hands the lease back, so it should take about one probe). The
replica that went is then brought back (restarted, or continued) before the next round.

One JSON line per takeover on stdout, then a summary; progress on stderr.

    .venv/bin/python bench/takeover.py
    .venv/bin/python bench/takeover.py --rounds 5 --enforce-interval-s 5
    .venv/bin/python bench/takeover.py --quick
"""

from __future__ import annotations

import argparse
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
from server_process import (
    DEFAULT_ADMIN_URL,
    BenchError,
    Server,
    database,
    emit,
    progress,
)

WAYS = {"sigterm": signal.SIGTERM, "sigkill": signal.SIGKILL, "sigstop": signal.SIGSTOP}
POLL_S = 0.05
TIMEOUT_S = 120.0


def leader(server: Server) -> dict[str, Any] | None:
    try:
        answer = httpx.get(f"{server.url}/readyz", timeout=5.0).json()
    except (httpx.HTTPError, ValueError):
        return None
    found: dict[str, Any] | None = answer.get("leader")
    return found


def wait_leader(server: Server, after_term: int) -> dict[str, Any]:
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        found = leader(server)
        if found is not None and found["term"] > after_term:
            return found
        time.sleep(POLL_S)
    raise BenchError(f"no new leader after {TIMEOUT_S:g} s\n{server.tail()}")


def round_once(replicas: dict[str, Server], way: str, bound_s: float) -> dict[str, Any]:
    any_replica = next(iter(replicas.values()))
    current = wait_leader(any_replica, 0)
    going = replicas[current["replica"]]
    staying = next(s for name, s in replicas.items() if name != current["replica"])
    assert going.process is not None
    started = time.monotonic()
    going.process.send_signal(WAYS[way])
    taken = wait_leader(staying, current["term"])
    took = time.monotonic() - started
    if way == "sigstop":
        going.process.send_signal(signal.SIGCONT)
    else:
        going.process.wait(timeout=60)
        going.start().wait_ready()
    return {
        "bench": "takeover",
        "way": way,
        "from": current["replica"],
        "to": taken["replica"],
        "term": taken["term"],
        "takeover_s": round(took, 3),
        "bound_s": bound_s,
        "ratio": round(took / bound_s, 3),
    }


def run(rounds: int, enforce_interval_s: float, admin_url: str) -> list[dict[str, Any]]:
    lease_s = max(2.0, 2 * enforce_interval_s)
    probe_s = min(2.0, lease_s / 4)
    bound_s = lease_s + probe_s
    records = []
    with (
        tempfile.TemporaryDirectory(prefix="gov-bench-") as tmp,
        database("postgres", admin_url, Path(tmp)) as url,
    ):
        replicas = {
            name: Server(
                url,
                Path(tmp),
                GOVERNOR_REPLICA_ID=name,
                GOVERNOR_ENFORCE_INTERVAL_S=str(enforce_interval_s),
            )
            for name in ("replica-a", "replica-b")
        }
        try:
            for server in replicas.values():
                server.start().wait_ready()
            for number in range(rounds):
                for way in WAYS:
                    record = round_once(replicas, way, bound_s)
                    progress(
                        f"round {number + 1} {way}: {record['from']} -> {record['to']} "
                        f"in {record['takeover_s']:.2f} s (bound {bound_s:g} s)"
                    )
                    emit(record)
                    records.append(record)
        finally:
            for server in replicas.values():
                if server.process is not None and server.process.poll() is None:
                    server.process.send_signal(signal.SIGCONT)
                server.stop()
    return records


def summary(records: Sequence[dict[str, Any]]) -> str:
    lines = [f"{'way':<8} {'takeovers':>9} {'median s':>9} {'worst s':>8} {'bound s':>8}"]
    for way in WAYS:
        took = [r["takeover_s"] for r in records if r["way"] == way]
        if took:
            bound = records[0]["bound_s"]
            lines.append(
                f"{way:<8} {len(took):>9} {statistics.median(took):>9.2f} "
                f"{max(took):>8.2f} {bound:>8.2f}"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=["postgres"], default="postgres", help="replicas need it")
    parser.add_argument("--postgres-url", default=DEFAULT_ADMIN_URL, help="admin connection")
    parser.add_argument("--rounds", type=int, default=3, help="takeovers per way (default 3)")
    parser.add_argument(
        "--enforce-interval-s",
        type=float,
        default=5.0,
        help="the replicas' enforce interval; the lease is twice it (default 5)",
    )
    parser.add_argument("--quick", action="store_true", help="one round, 1 s interval")
    args = parser.parse_args(argv)
    rounds, interval = (1, 1.0) if args.quick else (args.rounds, args.enforce_interval_s)
    try:
        records = run(rounds, interval, args.postgres_url)
    except BenchError as exc:
        print(f"takeover: {exc}", file=sys.stderr)
        return 1
    print(summary(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
