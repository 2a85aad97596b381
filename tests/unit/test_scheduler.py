"""The driver: tasks run on their interval while the replica leads, never overlap themselves,
and survive exceptions."""

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.exc import OperationalError

from governor.db import schema
from governor.db.engine import build_engine, session_factory, unit_of_work
from governor.db.tables import EventRow
from governor.domain.model import Category, Severity
from governor.domain.ports import SystemClock
from governor.scheduler.runner import Driver
from governor.scheduler.tasks import Periodic
from governor.services import events
from governor.services.context import GovernorConfig, ServiceContext, batches, first_pods
from governor.services.replica.health import TickLog
from governor.services.replica.leadership import Lease
from tests.clock import FrozenClock


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('scheduler') / 'governor.db'}"
    schema.upgrade(url)
    return url


@pytest.fixture
def make_context(database: str) -> Iterator[Callable[..., ServiceContext]]:
    engines = []

    def make(interval_s: float, replica: str = "only") -> ServiceContext:
        engine = build_engine(database)
        engines.append(engine)
        sessions = session_factory(engine)
        return ServiceContext(
            engine=engine,
            sessions=sessions,
            clock=FrozenClock(),
            providers={},
            config=GovernorConfig(enforce_interval_s=interval_s, leader_probe_s=0.05),
            ticks=TickLog(),
            lease=Lease(sessions, SystemClock(), replica, lease_s=60.0),
        )

    yield make
    for engine in engines:
        engine.dispose()


def wait_for(condition: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_failing_task_never_stops_the_loop_and_is_counted(
    make_context: Callable[..., ServiceContext],
) -> None:
    ctx = make_context(0.05)
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
    ticks = ctx.ticks.ticks()
    assert ctx.ticks.failures()["failing"] >= 3
    assert ticks["failing"].at is None
    assert ticks["fine"].at == ctx.clock.now()
    assert ticks["fine"].every_s == 0.05


def test_a_slow_task_never_overlaps_itself(
    make_context: Callable[..., ServiceContext],
) -> None:
    ctx = make_context(0.02)
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


def test_the_passes_on_the_way_to_a_stop_set_the_pace(
    make_context: Callable[..., ServiceContext],
) -> None:
    """A deciding or stopping pass slower than its interval lengthens the reaction time the
    committed spend reserves; other passes do not."""
    ctx = make_context(0.02)
    runs = {"deciding": 0, "other": 0}

    def deciding(_: ServiceContext) -> None:
        time.sleep(0.1)
        runs["deciding"] += 1

    def other(_: ServiceContext) -> None:
        time.sleep(0.5)
        runs["other"] += 1

    driver = Driver(ctx, {"deciding": Periodic(deciding, reacts=True), "other": Periodic(other)})
    driver.start()
    try:
        wait_for(lambda: runs["deciding"] >= 2 and runs["other"] >= 1)
    finally:
        driver.stop()
    assert 0.1 <= ctx.config.pace.slowest_s() < 0.5
    assert ctx.config.reaction_s == 4 * ctx.config.pace.slowest_s()


def test_a_replica_that_does_not_lead_runs_nothing(
    make_context: Callable[..., ServiceContext],
) -> None:
    leader, follower = make_context(0.02, "first"), make_context(0.02, "second")
    calls = {"leader": 0, "follower": 0}

    def count(who: str) -> Periodic:
        return Periodic(lambda _: calls.__setitem__(who, calls[who] + 1))

    first = Driver(leader, {"work": count("leader")})
    first.start()
    second = Driver(follower, {"work": count("follower")})
    second.start()
    try:
        wait_for(lambda: calls["leader"] >= 5)
        assert calls["follower"] == 0
        first.stop()  # steps down: the other replica takes over at its next probe
        wait_for(lambda: calls["follower"] >= 3)
    finally:
        second.stop()
    assert not leader.leading()


def test_a_pass_that_stops_finishing_raises_one_critical_event(tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path / 'governor.db'}"  # its own: its lease keeps frozen time
    schema.upgrade(database)
    engine = build_engine(database)
    try:
        sessions, clock = session_factory(engine), FrozenClock()
        ctx = ServiceContext(
            engine=engine,
            sessions=sessions,
            clock=clock,
            providers={},
            config=GovernorConfig(enforce_interval_s=0.05, leader_probe_s=0.05),
            ticks=TickLog(),
            lease=Lease(sessions, clock, "stuck", lease_s=86400.0),
        )

        def broken(_: ServiceContext) -> None:
            raise RuntimeError("the provider hangs")

        def alarms() -> list[str]:
            with unit_of_work(sessions) as session:
                return list(
                    session.scalars(
                        select(EventRow.message).where(
                            EventRow.severity == Severity.CRITICAL,
                            EventRow.subject == "replica stuck",
                        )
                    )
                )

        driver = Driver(ctx, {"enforce": Periodic(broken)})
        driver.start()
        try:
            wait_for(lambda: ctx.ticks.failures().get("enforce", 0) >= 3)
            assert alarms() == [], "a pass is stale only after three intervals and 30 s"
            clock.advance(31)
            wait_for(lambda: len(alarms()) == 1)
            probes = ctx.ticks.failures()["enforce"]
            wait_for(lambda: ctx.ticks.failures()["enforce"] >= probes + 5)
        finally:
            driver.stop()
        assert len(alarms()) == 1, "raised once, not at every probe"
        assert "enforce pass" in alarms()[0]
    finally:
        engine.dispose()


def test_a_pass_the_database_refuses_waits_on_it_and_is_never_said_stuck(tmp_path: Path) -> None:
    """Its runs fail only because the database refuses: no "restart the pass" event however
    long that lasts; once its write commits, the outage is raised once, with its length."""
    database = f"sqlite:///{tmp_path / 'governor.db'}"
    schema.upgrade(database)
    engine = build_engine(database)
    try:
        sessions, clock = session_factory(engine), FrozenClock()
        ctx = ServiceContext(
            engine=engine,
            sessions=sessions,
            clock=clock,
            providers={},
            config=GovernorConfig(enforce_interval_s=0.05, leader_probe_s=0.05),
            ticks=TickLog(),
            lease=Lease(sessions, clock, "full", lease_s=86400.0),
        )
        refusing = threading.Event()
        refusing.set()

        def accrue(acting: ServiceContext) -> None:
            if refusing.is_set():
                raise OperationalError("INSERT INTO ledger", {}, Exception("disk is full"))
            with acting.unit_of_work() as session:
                events.record(
                    session,
                    clock.now(),
                    Severity.INFO,
                    Category.GOVERNOR,
                    "s",
                    "an hour",
                    budget_id=None,
                )

        def alarms() -> list[str]:
            with unit_of_work(sessions) as session:
                return list(
                    session.scalars(
                        select(EventRow.message).where(
                            EventRow.severity == Severity.CRITICAL,
                            EventRow.subject == "replica full",
                        )
                    )
                )

        driver = Driver(ctx, {"accrue": Periodic(accrue)})
        driver.start()
        try:
            wait_for(lambda: ctx.ticks.failures().get("accrue", 0) >= 3)
            clock.advance(31)  # past the 30 s of slack, within the quiet minute
            probes = ctx.ticks.failures()["accrue"]
            wait_for(lambda: ctx.ticks.failures()["accrue"] >= probes + 5)
            assert ctx.ticks.ticks()["accrue"].waiting
            assert alarms() == [], "waiting on the database is not stuck"
            refusing.clear()
            wait_for(lambda: len(alarms()) == 1)
        finally:
            driver.stop()
        [alarm] = alarms()
        assert "refused this replica's writes for 31 s" in alarm, alarm
        assert not ctx.ticks.ticks()["accrue"].waiting
    finally:
        engine.dispose()


def test_a_pass_works_in_batches_of_about_so_many_pods_never_splitting_a_budget() -> None:
    budgets = [("a", 60), ("b", 30), ("c", 20), ("d", 150), ("e", 1), ("f", 99)]
    assert batches(budgets, 100) == [["a", "b"], ["c"], ["d"], ["e", "f"]]
    assert batches(budgets, 1_000) == [["a", "b", "c", "d", "e", "f"]]
    assert batches([], 100) == []


def test_an_accrue_pass_takes_the_first_budgets_up_to_so_many_pods() -> None:
    budgets = [("a", 60), ("b", 30), ("c", 20), ("d", 150)]
    assert first_pods(budgets, 100) == [("a", 60), ("b", 30)]
    assert first_pods(budgets, 110) == [("a", 60), ("b", 30), ("c", 20)]
    assert first_pods([("d", 150), ("a", 60)], 100) == [("d", 150)]  # one budget at least
    assert first_pods(budgets, 10_000) == budgets
    assert first_pods([], 100) == []
