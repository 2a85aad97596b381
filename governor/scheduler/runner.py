"""The driver: APScheduler 3 runs each task on an interval while this replica leads; a task
never overlaps itself, and an exception is logged and counted, never allowed to stop the loop.

A lane of its own probes the lease (renew, or take it when free), so a long pass never delays
a renewal. Each pass runs on sessions fenced by the lease: see services.leadership.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler

from governor.domain.errors import NotLeader
from governor.domain.model import Category, Severity
from governor.scheduler.tasks import TASKS, Periodic
from governor.services import events
from governor.services.context import DatabaseRefused, ServiceContext
from governor.services.replica.failure_log import FailureLog
from governor.services.replica.leadership import Lease

log = logging.getLogger(__name__)
ALARM = "alarm"  # the writer a critical event of the driver's is told as
_told = FailureLog(log)  # a pass's or an alarm's failure: told once a minute for each kind


def guarded(ctx: ServiceContext, lease: Lease, name: str, task: Periodic) -> Callable[[], None]:
    interval = task.interval_s(ctx)
    ctx.ticks.expect(name, interval)

    def run() -> None:
        if not lease.leading:
            return
        started = time.monotonic()
        try:
            with ctx.writes.watching(name, ctx.clock):
                task.run(ctx)
        except NotLeader as exc:
            log.info("periodic task %r stopped: %s", name, exc)
            return
        except DatabaseRefused:  # the write watch said so, once a minute, not a trace
            ctx.ticks.failed(name, refused=True)
            return
        except Exception as exc:
            ctx.ticks.failed(name)
            _told.tell(
                f"periodic task {name!r} failed; it runs again next interval", exc, trace=True
            )
            return
        ctx.ticks.succeeded(name, ctx.clock.now())
        took = time.monotonic() - started
        if task.reacts:
            ctx.config.pace.took(took)
        if took > interval:
            log.warning("task %r took %.2fs, longer than its %.2fs interval", name, took, interval)

    return run


class Driver:
    """Runs each task on its own interval, in its own lane, while this replica leads."""

    def __init__(self, ctx: ServiceContext, tasks: Mapping[str, Periodic] = TASKS) -> None:
        self._lease = lease = ctx.lease
        self._ctx = acting = replace(ctx, sessions=lease.fenced(ctx.sessions))
        self._alerted: set[str] = set()
        self._scheduler = BackgroundScheduler(
            timezone=UTC,
            executors={
                "default": ThreadPoolExecutor(max_workers=len(tasks)),
                "lease": ThreadPoolExecutor(max_workers=1),
            },
            job_defaults={"coalesce": True, "max_instances": 1},
        )
        first_run = datetime.now(UTC)  # the driver keeps wall-clock time; the tasks use ctx.clock
        for name, task in tasks.items():
            interval = task.interval_s(ctx)
            self._scheduler.add_job(
                guarded(acting, lease, name, task),
                "interval",
                seconds=interval,
                id=name,
                name=name,
                next_run_time=first_run,
                misfire_grace_time=max(1, round(interval)),
            )
        self._scheduler.add_job(
            self.probe,
            "interval",
            seconds=ctx.config.leader_probe_s,
            id="lease",
            executor="lease",
            misfire_grace_time=None,
        )

    def probe(self) -> None:
        """Renew or take the lease; as the leader, raise the alarm over a pass that is stuck,
        and over a time when no replica led (a database outage, every replica down)."""
        leading = self._lease.probe(self._ctx.ticks.ticks())
        self._report_outages()
        if leading:
            self._report_gap()
            self._watch_passes()

    def _report_outages(self) -> None:
        """Once writes commit again: when this replica's writes stopped, and when they resumed
        (an outage whose event could not be written is tried again at the next probe)."""
        for outage in self._ctx.writes.ended():
            assert outage.ended is not None
            seconds = outage.seconds(outage.ended)
            recorded = self._alarm(
                f"the database refused this replica's writes for {seconds:.0f} s: metering and "
                f"enforcement stopped at {outage.began.isoformat()} and resumed at "
                f"{outage.ended.isoformat()} ({outage.failures} failed writes: "
                f"{', '.join(outage.writers)}). The time is charged now, nothing is lost.",
                {
                    "from": outage.began.isoformat(),
                    "to": outage.ended.isoformat(),
                    "seconds": seconds,
                    "writers": list(outage.writers),
                    "failures": outage.failures,
                },
            )
            if recorded:
                self._ctx.writes.recorded(outage)

    def _report_gap(self) -> None:
        gap, self._lease.gap = self._lease.gap, None
        if gap is None:
            return
        began, ended = gap
        seconds = (ended - began).total_seconds()
        recorded = self._alarm(
            f"no replica led the periodic work for {seconds:.0f} s (from {began.isoformat()}): "
            "metering, enforcement and stop orders were paused. The time is charged now, "
            "nothing is lost; look for a database outage or every replica down.",
            {"from": began.isoformat(), "to": ended.isoformat(), "seconds": seconds},
        )
        if not recorded and self._lease.gap is None:
            self._lease.gap = gap  # raised at the next probe

    def _watch_passes(self) -> None:
        """A pass is stuck when it has not finished in three of its intervals since this
        replica began to lead; not one whose latest run the database refused (it waits on the
        database: the outage is raised on its own)."""
        now, since = self._ctx.clock.now(), self._lease.since
        stale = {t for t, tick in self._ctx.ticks.ticks().items() if tick.stale(now, since or now)}
        for task in sorted(stale - self._alerted):
            self._alarm(
                f"the {task} pass of the leading replica has not finished in three of its "
                "intervals: look at this replica's log; it keeps the lease while it renews, "
                "so restart it to hand the work to another replica",
                {"task": task},
            )
        self._alerted = stale

    def _alarm(self, message: str, evidence: dict[str, object]) -> bool:
        """A critical event from this replica (the event log writes it to the log too);
        False where it could not be written (the log says why, once a minute)."""
        try:
            with (
                self._ctx.writes.watching(ALARM, self._ctx.clock),
                self._ctx.unit_of_work() as session,
            ):
                events.record(
                    session,
                    self._ctx.clock.now(),
                    Severity.CRITICAL,
                    Category.GOVERNOR,
                    f"replica {self._lease.replica}",
                    message,
                    budget_id=None,
                    evidence={**evidence, "replica": self._lease.replica},
                )
        except DatabaseRefused:  # the write watch said so; the outage is raised once it ends
            return False
        except Exception as exc:  # the alarm still reaches the log
            _told.tell(f"could not record a critical event: {message}", exc, trace=True)
            return False
        return True

    def start(self) -> None:
        self.probe()  # a lone replica leads from its first pass
        self._scheduler.start()

    def stop(self) -> None:
        self._scheduler.shutdown(wait=True)
        self._lease.release()
