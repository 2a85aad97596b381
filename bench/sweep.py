"""What the account sweep's own work costs a pass: an account listing 10,000 pods.

The sweep lists each provider account once a billing interval and, for what it lists, reads
the pods registered here and the budgets, judges every pod, keeps the ungoverned ones (a new
one told as a critical event) and drops those no longer ungoverned. The provider's listing
itself is left out: the account here is a stub that hands back a listing built up front, so
what is timed is the governor's side alone.

Three passes are timed over the same listing, in the same run and database:

- baseline: every listed pod is registered here (a governed account: nothing to keep);
- first: --ungoverned of them are not (a new rental outside the governor, each told once);
- steady: the same ones seen again (what every later pass costs while they bill).

Each is printed in seconds, with its ratio to the baseline and the seconds it adds to it; the
goal is under 1 s added at 10,000 listed pods.

    .venv/bin/python bench/sweep.py --pods 10000 --ungoverned 1000
"""

from __future__ import annotations

import argparse
import time
from decimal import Decimal

from fleet import (
    SimClock,
    build_context,
    database_kinds,
    emit,
    exit_cleanly_on_sigterm,
    progress,
    quiet_event_log,
    scratch_database,
)

from governor.domain.model import PodState
from governor.domain.ports import CallOutcome, CallResult, Listed, PodDescription
from governor.services.context import ServiceContext
from governor.services.fleet import budgets, pods, sweep

RATE = Decimal("2.40")
PODS_PER_BUDGET = 100
GOAL_S = 1.0


class Account:
    """A provider account whose listing is built up front: no I/O in the timed pass."""

    stop_latency_s = 30.0

    def __init__(self, refs: list[str]) -> None:
        self.listing = [
            Listed(ref, PodDescription(PodState.RUNNING, RATE), name=f"job-{ref}") for ref in refs
        ]

    def describe(self, ref: str) -> PodDescription:
        return PodDescription(PodState.RUNNING, RATE)

    def stop(self, ref: str) -> CallResult:
        return CallResult(CallOutcome.DONE, "stopped")

    def pods(self) -> list[Listed]:
        return self.listing


def register_all(ctx: ServiceContext, refs: list[str]) -> None:
    """Each ref registered under a budget of its own hundred."""
    now = ctx.clock.now()
    for start in range(0, len(refs), PODS_PER_BUDGET):
        with ctx.unit_of_work() as session:
            declared = budgets.Declaration(f"bench-{start}", Decimal(1_000_000))
            budget = budgets.declare(session, declared, now).id
        for ref in refs[start : start + PODS_PER_BUDGET]:
            with ctx.unit_of_work() as session:
                pods.register(session, ctx, budget, pods.Registration("account", ref), now)


def timed_pass(ctx: ServiceContext, account: Account) -> tuple[float, sweep.Swept]:
    started = time.perf_counter()
    swept = sweep.sweep_account(ctx, "account", account, account.pods())  # type: ignore[arg-type]
    return time.perf_counter() - started, swept


def measure(kind: str, count: int, ungoverned: int) -> None:
    with scratch_database(kind) as url:
        clock = SimClock()
        refs = [f"pod-{i:06d}" for i in range(count)]
        account = Account(refs)
        ctx = build_context(url, clock, {"account": account})  # type: ignore[dict-item]
        try:
            progress(f"{kind}: registering {count} pods")
            register_all(ctx, refs)
            baseline_s, _ = timed_pass(ctx, account)
            progress(f"{kind}: {ungoverned} of them rented again, outside the governor")
            strays = [f"stray-{i:06d}" for i in range(ungoverned)]
            account.listing = account.listing[: count - ungoverned] + Account(strays).listing
            clock.advance(300)
            first_s, first = timed_pass(ctx, account)
            clock.advance(300)
            steady_s, steady = timed_pass(ctx, account)
        finally:
            ctx.engine.dispose()
    assert first.ungoverned == steady.ungoverned == ungoverned, (first, steady)
    for name, seconds in (("baseline", baseline_s), ("first", first_s), ("steady", steady_s)):
        emit(
            {
                "bench": "sweep",
                "db": kind,
                "pass": name,
                "listed": count,
                "ungoverned": 0 if name == "baseline" else ungoverned,
                "seconds": round(seconds, 6),
                "ratio": round(seconds / baseline_s, 3) if baseline_s else None,
                "added_s": round(seconds - baseline_s, 6),
                "goal_added_s": GOAL_S,
            }
        )


def main() -> None:
    exit_cleanly_on_sigterm()
    quiet_event_log()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", default="sqlite", help="sqlite, postgres or both")
    parser.add_argument("--pods", type=int, default=10_000, help="pods the account lists")
    parser.add_argument("--ungoverned", type=int, default=1_000, help="of them under no budget")
    parser.add_argument("--quick", action="store_true", help="a tiny account, to check it runs")
    args = parser.parse_args()
    count, ungoverned = (30, 5) if args.quick else (args.pods, args.ungoverned)
    if not 0 <= ungoverned <= count:
        parser.error("--ungoverned must be between 0 and --pods")
    for kind in database_kinds(args.db):
        measure(kind, count, ungoverned)


if __name__ == "__main__":
    main()
