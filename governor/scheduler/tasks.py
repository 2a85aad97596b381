"""The periodic tasks. Each is a plain run_once function: callable from tests and the CLI."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from governor.services import event_retention
from governor.services.context import ServiceContext
from governor.services.fleet import kueue_checks, resumes, sweep
from governor.services.money import billing, metering
from governor.services.monitoring import metric_history, telemetry
from governor.services.plans import launches
from governor.services.stopping import enforcement, provider_states, stops


def accrue(ctx: ServiceContext) -> None:
    """Write every hour that has ended to the ledger, for each pod that may still cost money."""
    metering.accrue_due(ctx)


def enforce(ctx: ServiceContext) -> None:
    """Let the policy look at every budget with a pod that bills, and record what it decides."""
    enforcement.enforce_all(ctx)


def advance_stops(ctx: ServiceContext) -> None:
    """Carry every due stop order one step further, settle resumes that were cut short, and
    ask again about pods last seen in a state their provider does not document."""
    stops.advance(ctx)
    resumes.settle(ctx)
    provider_states.recheck(ctx)


def sample_local_gpus(ctx: ServiceContext) -> None:
    """Read this machine's GPUs for the pods registered as local (none: no reading at all)."""
    telemetry.sample_local(ctx)


def fold_telemetry(ctx: ServiceContext) -> None:
    """Fold old GPU samples and run metrics into minutes and drop the oldest, so storage
    stays bounded."""
    config, now = ctx.config, ctx.clock.now()
    with ctx.unit_of_work() as session:
        telemetry.fold(session, now, config.telemetry_raw_keep_s, config.telemetry_minute_keep_s)
        metric_history.fold(
            session, now, config.telemetry_raw_keep_s, config.telemetry_minute_keep_s
        )


def fold_events(ctx: ServiceContext) -> None:
    """Fold the old routine events of closed budgets into one line per day and subject, a
    batch per transaction, until none is left to look at."""
    config = ctx.config
    looked_at = event_retention.BATCH
    while looked_at == event_retention.BATCH:
        with ctx.unit_of_work() as session:
            looked_at = event_retention.fold(
                session, ctx.clock.now(), config.event_keep_s, config.report_timeline_events
            )


def reconcile_billing(ctx: ServiceContext) -> None:
    """Compare the meter with what each provider that says so has billed."""
    billing.reconcile_all(ctx)


def sweep_accounts(ctx: ServiceContext) -> None:
    """List every provider account: register the pods labelled for a budget, and report (and,
    by an operator's rule, adopt or stop) every billing pod no budget governs."""
    sweep.sweep_all(ctx)


def expire_launches(ctx: ServiceContext) -> None:
    """Release the reservations of accepted launches whose pod did not register in time."""
    with ctx.unit_of_work() as session:
        launches.expire(session, ctx.clock.now())


def answer_kueue(ctx: ServiceContext) -> None:
    """Keep the governor's Kueue admission checks Active, answer the Workloads waiting on
    them, and register the ones Kueue admitted."""
    kueue_checks.answer_all(ctx)


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
    "event_fold": Periodic(fold_events, "event_fold_interval_s"),
    "billing": Periodic(reconcile_billing, "billing_interval_s"),
    "sweep": Periodic(sweep_accounts, "billing_interval_s"),
    "launches": Periodic(expire_launches),
    "kueue": Periodic(answer_kueue, "kueue_interval_s"),
}


def run_all(ctx: ServiceContext) -> None:
    """One pass of every task, in order."""
    for task in TASKS.values():
        task.run(ctx)
