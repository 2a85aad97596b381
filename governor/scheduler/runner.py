"""The driver: APScheduler 3 runs each task on an interval; a task never overlaps itself and
an exception is logged and counted, never allowed to stop the loop."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler

from governor.scheduler.tasks import TASKS
from governor.services.context import ServiceContext

log = logging.getLogger(__name__)


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
    def __init__(self, ctx: ServiceContext) -> None:
        self._ctx = ctx
        interval = ctx.config.enforce_interval_s
        self._scheduler = BackgroundScheduler(
            timezone=UTC,
            executors={"default": ThreadPoolExecutor(max_workers=len(TASKS))},
            job_defaults={
                "coalesce": True,
                "max_instances": 1,
                "misfire_grace_time": max(1, round(interval)),
            },
        )
        for name, task in TASKS.items():
            self._scheduler.add_job(
                guarded(ctx, name, task), "interval", seconds=interval, id=name, name=name
            )

    def start(self) -> None:
        self._scheduler.start()
        for job in self._scheduler.get_jobs():
            job.modify(next_run_time=self._ctx.clock.now())

    def stop(self) -> None:
        self._scheduler.shutdown(wait=True)
