"""The periodic tasks. Each is a plain run_once function: callable from tests and the CLI."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from governor.db import repository as repo
from governor.db.engine import read_only, unit_of_work
from governor.domain.ledger import slice_start
from governor.services.context import ServiceContext
from governor.services.fleet import resumes
from governor.services.money import billing, metering
from governor.services.monitoring import metric_history, telemetry
from governor.services.stopping import enforcement, stops

# The hour's ledger is written over as many accrue passes as it takes at this many pods a pass
# (whole budgets), so that no pass grows with the fleet: 10,000 pods close their hour within
# five passes. Spend is exact meanwhile: it is always the ledger plus what each pod has cost
# since its last entry.
ACCRUE_PODS_PER_PASS = 2_000


def batches(budgets: Sequence[tuple[str, int]], pods: int) -> list[list[str]]:
    """Budget ids, in their order, in batches of at most `pods` pods between them (a budget
    with more pods than that is a batch of its own)."""
    cut: list[list[str]] = []
    count = 0
    for budget_id, its_pods in budgets:
        if not cut or count + its_pods > pods:
            cut.append([])
            count = 0
        cut[-1].append(budget_id)
        count += its_pods
    return cut


def first_pods(budgets: Sequence[tuple[str, int]], pods: int) -> list[tuple[str, int]]:
    """The first budgets, in their order, with at most `pods` pods between them (always the
    first budget, however many pods it has)."""
    first = batches(budgets, pods)[:1]
    return list(budgets[: len(first[0])]) if first else []


def accrue(ctx: ServiceContext) -> None:
    """Write every hour that has ended to the ledger, for each pod that may still cost money:
    up to ACCRUE_PODS_PER_PASS pods a pass, the rest at the passes after."""
    until = slice_start(ctx.clock.now())
    with read_only(ctx.sessions) as session:
        due = metering.due_budgets(session, until)
    for batch in batches(first_pods(due, ACCRUE_PODS_PER_PASS), ctx.pods_per_transaction):
        with unit_of_work(ctx.sessions) as session:
            metering.accrue_budgets(session, batch, until)


def enforce(ctx: ServiceContext) -> None:
    """Let the policy look at every budget with a pod that bills, and record what it decides."""
    with read_only(ctx.sessions) as session:
        billing = repo.billing_budgets(session)
    for batch in batches(billing, ctx.pods_per_transaction):
        with unit_of_work(ctx.sessions) as session:
            repo.lock_budgets(session, batch)  # the clock is read once we hold them
            enforcement.enforce_budgets(
                session, ctx.config, batch, ctx.clock.now(), heard_since=ctx.lease.resumed_at
            )


def advance_stops(ctx: ServiceContext) -> None:
    """Carry every due stop order one step further, and settle resumes that were cut short."""
    stops.advance(ctx)
    resumes.settle(ctx)


def sample_local_gpus(ctx: ServiceContext) -> None:
    """Read this machine's GPUs for the pods registered as local (none: no reading at all)."""
    if ctx.telemetry is None:
        return
    with unit_of_work(ctx.sessions) as session:
        pod_ids = [p.id for p in repo.local_pods(session)]
    if not pod_ids:
        return
    reading = ctx.telemetry.read()
    with unit_of_work(ctx.sessions) as session:
        for pod_id in pod_ids:
            telemetry.ingest(session, repo.get_pod(session, pod_id), [reading], ctx.clock.now())


def fold_telemetry(ctx: ServiceContext) -> None:
    """Fold old GPU samples and run metrics into minutes and drop the oldest, so storage
    stays bounded."""
    config, now = ctx.config, ctx.clock.now()
    with unit_of_work(ctx.sessions) as session:
        telemetry.fold(session, now, config.telemetry_raw_keep_s, config.telemetry_minute_keep_s)
        metric_history.fold(
            session, now, config.telemetry_raw_keep_s, config.telemetry_minute_keep_s
        )


def reconcile_billing(ctx: ServiceContext) -> None:
    """Compare the meter with what each provider that says so has billed."""
    billing.reconcile_all(ctx)


@dataclass(frozen=True)
class Periodic:
    """A task and the name of the setting that says how often it runs."""

    run: Callable[[ServiceContext], None]
    every: str = "enforce_interval_s"
    reacts: bool = False  # on the way from a decision to a confirmed stop: its pace counts

    def interval_s(self, ctx: ServiceContext) -> float:
        return float(getattr(ctx.config, self.every))


TASKS: dict[str, Periodic] = {
    "enforce": Periodic(enforce, reacts=True),
    "stops": Periodic(advance_stops, reacts=True),
    "accrue": Periodic(accrue),
    "sample": Periodic(sample_local_gpus, "telemetry_interval_s"),
    "fold": Periodic(fold_telemetry, "fold_interval_s"),
    "billing": Periodic(reconcile_billing, "billing_interval_s"),
}


def run_all(ctx: ServiceContext) -> None:
    """One pass of every task, in order."""
    for task in TASKS.values():
        task.run(ctx)
