"""The driver: APScheduler 3 runs each task on an interval; a task never overlaps itself and
an exception is logged and counted, never allowed to stop the loop."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler

from governor.scheduler.tasks import TASKS, Periodic
from governor.services.context import ServiceContext

log = logging.getLogger(__name__)


def guarded(ctx: ServiceContext, name: str, task: Periodic) -> Callable[[], None]:
    interval = task.interval_s(ctx)

    def run() -> None:
        started = time.monotonic()
        try:
            task.run(ctx)
        except Exception:
            ctx.ticks.failed(name)
            log.exception("periodic task %r failed; it runs again next interval", name)
            return
        ctx.ticks.succeeded(name, ctx.clock.now())
        took = time.monotonic() - started
        if took > interval:
            log.warning("task %r took %.2fs, longer than its %.2fs interval", name, took, interval)

    return run


class Driver:
    """Runs each task on its own interval, in its own lane."""

    def __init__(self, ctx: ServiceContext, tasks: Mapping[str, Periodic] = TASKS) -> None:
        self._scheduler = BackgroundScheduler(
            timezone=UTC,
            executors={"default": ThreadPoolExecutor(max_workers=len(tasks))},
            job_defaults={"coalesce": True, "max_instances": 1},
        )
        first_run = datetime.now(UTC)  # the driver keeps wall-clock time; the tasks use ctx.clock
        for name, task in tasks.items():
            interval = task.interval_s(ctx)
            self._scheduler.add_job(
                guarded(ctx, name, task),
                "interval",
                seconds=interval,
                id=name,
                name=name,
                next_run_time=first_run,
                misfire_grace_time=max(1, round(interval)),
            )

    def start(self) -> None:
        self._scheduler.start()

    def stop(self) -> None:
        self._scheduler.shutdown(wait=True)
