"""The driver: APScheduler 3 runs each task on an interval; a task never overlaps itself and
an exception is logged and counted, never allowed to stop the loop."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler

from governor.scheduler.tasks import TASKS
from governor.services.context import ServiceContext

log = logging.getLogger(__name__)

Task = Callable[[ServiceContext], None]


def guarded(
    ctx: ServiceContext, name: str, task: Callable[[ServiceContext], None]
) -> Callable[[], None]:
    def run() -> None:
        started = time.monotonic()
        try:
            task(ctx)
        except Exception:
            ctx.ticks.failed(name)
            log.exception("periodic task %r failed; it runs again next interval", name)
            return
        ctx.ticks.succeeded(name, ctx.clock.now())
        took = time.monotonic() - started
        if took > ctx.config.enforce_interval_s:
            log.warning(
                "task %r took %.2fs, longer than its %.2fs interval",
                name,
                took,
                ctx.config.enforce_interval_s,
            )

    return run


class Driver:
    """Runs every task every enforcement interval, each in its own lane."""

    def __init__(self, ctx: ServiceContext, tasks: Mapping[str, Task] = TASKS) -> None:
        self._ctx = ctx
        interval = ctx.config.enforce_interval_s
        self._scheduler = BackgroundScheduler(
            timezone=UTC,
            executors={"default": ThreadPoolExecutor(max_workers=len(tasks))},
            job_defaults={
                "coalesce": True,
                "max_instances": 1,
                "misfire_grace_time": max(1, round(interval)),
            },
        )
        first_run = datetime.now(UTC)  # the driver keeps wall-clock time; the tasks use ctx.clock
        for name, task in tasks.items():
            self._scheduler.add_job(
                guarded(ctx, name, task),
                "interval",
                seconds=interval,
                id=name,
                name=name,
                next_run_time=first_run,
            )

    def start(self) -> None:
        self._scheduler.start()

    def stop(self) -> None:
        self._scheduler.shutdown(wait=True)
