"""The driver: tasks run on their interval, never overlap themselves, and survive exceptions."""

import threading
import time
from collections.abc import Callable

from governor.scheduler.runner import Driver
from governor.scheduler.tasks import Periodic
from governor.services.context import GovernorConfig, ServiceContext
from governor.services.health import TickLog
from tests.clock import FrozenClock


def context(interval_s: float) -> ServiceContext:
    return ServiceContext(
        engine=None,  # type: ignore[arg-type]  # the tasks here never touch storage
        sessions=None,  # type: ignore[arg-type]
        clock=FrozenClock(),
        providers={},
        config=GovernorConfig(enforce_interval_s=interval_s),
        ticks=TickLog(interval_s=interval_s),
    )


def wait_for(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_failing_task_never_stops_the_loop_and_is_counted() -> None:
    ctx = context(0.05)
    calls = {"failing": 0, "fine": 0}

    def failing(_: ServiceContext) -> None:
        calls["failing"] += 1
        raise RuntimeError("provider exploded")

    def fine(_: ServiceContext) -> None:
        calls["fine"] += 1

    driver = Driver(ctx, {"failing": Periodic(failing), "fine": Periodic(fine)})
    driver.start()
    try:
        wait_for(lambda: calls["failing"] >= 3 and calls["fine"] >= 3)
    finally:
        driver.stop()
    last, failures = ctx.ticks.snapshot()
    assert failures["failing"] >= 3
    assert "failing" not in last
    assert last["fine"] == ctx.clock.now()


def test_a_slow_task_never_overlaps_itself() -> None:
    ctx = context(0.02)
    running, most, runs = 0, 0, 0
    lock = threading.Lock()

    def slow(_: ServiceContext) -> None:
        nonlocal running, most, runs
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.1)  # five intervals
        with lock:
            running -= 1
            runs += 1

    driver = Driver(ctx, {"slow": Periodic(slow)})
    driver.start()
    try:
        wait_for(lambda: runs >= 3)
    finally:
        driver.stop()
    assert most == 1
