"""The periodic tasks. Each is a plain run_once function: callable from tests and the CLI."""

from __future__ import annotations

from collections.abc import Callable

from governor.db import repository as repo
from governor.db.engine import unit_of_work
from governor.services import enforcement, metering, stops
from governor.services.context import ServiceContext


def accrue(ctx: ServiceContext) -> None:
    """Append what every pod has cost since it was last charged."""
    now = ctx.clock.now()
    with unit_of_work(ctx.sessions) as session:
        budget_ids = repo.budget_ids(session)
    for budget_id in budget_ids:
        with unit_of_work(ctx.sessions) as session:
            metering.accrue_budget(session, budget_id, now)


def enforce(ctx: ServiceContext) -> None:
    """Let the policy look at every budget and record what it decides."""
    now = ctx.clock.now()
    with unit_of_work(ctx.sessions) as session:
        budget_ids = repo.budget_ids(session)
    for budget_id in budget_ids:
        with unit_of_work(ctx.sessions) as session:
            enforcement.enforce(session, ctx.config, budget_id, now)


def advance_stops(ctx: ServiceContext) -> None:
    """Carry every due stop order one step further."""
    stops.advance(ctx)


TASKS: dict[str, Callable[[ServiceContext], None]] = {
    "enforce": enforce,
    "stops": advance_stops,
    "accrue": accrue,
}


def run_all(ctx: ServiceContext) -> None:
    """One pass of every task, in order."""
    for task in TASKS.values():
        task(ctx)
