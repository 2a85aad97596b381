"""Leadership over one database: one replica leads at a time, terms only grow, and a replica
whose term is over is fenced out of every write (SQLite and PostgreSQL)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session, sessionmaker

from governor.db import schema
from governor.db.engine import build_engine, session_factory, unit_of_work
from governor.db.file_lock import sqlite_scheduler_lock
from governor.db.tables import EventRow
from governor.domain.errors import NotLeader
from governor.domain.model import Category, Severity
from governor.services import events
from governor.services.context import GovernorConfig
from governor.services.replica import leadership
from governor.services.replica.health import Tick
from governor.services.replica.leadership import Lease
from governor.services.security.shared_secrets import shared_secret
from governor.services.view import metrics
from tests.clock import FrozenClock

LEASE_S = 10.0


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    schema.upgrade(database_url)
    engine = build_engine(database_url)
    yield engine
    engine.dispose()


@pytest.fixture
def sessions(engine: Engine) -> sessionmaker[Session]:
    return session_factory(engine)


def lease(sessions: sessionmaker[Session], clock: FrozenClock, replica: str) -> Lease:
    return Lease(sessions, clock, replica, LEASE_S)


def note(sessions: sessionmaker[Session], clock: FrozenClock, what: str) -> None:
    with unit_of_work(sessions) as session:
        events.record(
            session, clock.now(), Severity.INFO, Category.GOVERNOR, "test", what, budget_id=None
        )


def notes(sessions: sessionmaker[Session]) -> list[str]:
    with unit_of_work(sessions) as session:
        return list(session.scalars(select(EventRow.message).order_by(EventRow.id)))


def test_one_replica_leads_until_its_lease_runs_out_then_the_next_term_begins(
    sessions: sessionmaker[Session], clock: FrozenClock
) -> None:
    a, b = lease(sessions, clock, "a"), lease(sessions, clock, "b")
    assert a.probe({}) and a.term == 1
    assert not b.probe({}) and b.term is None
    clock.advance(LEASE_S - 1)
    renewed_at = clock.now()
    assert a.probe({"enforce": Tick(renewed_at, 5.0)})  # renewed: good for another lease
    clock.advance(LEASE_S - 1)
    assert not b.probe({}) and a.leading
    with unit_of_work(sessions) as session:
        held = leadership.current(session)
    assert (held.holder, held.term) == ("a", 1)
    assert held.ticks == {"enforce": Tick(renewed_at, 5.0)}

    clock.advance(LEASE_S)  # a stopped renewing (paused, partitioned, dead)
    assert not a.leading
    assert b.probe({}) and b.term == 2
    assert not a.probe({}), "a renewal after the lease ran out never revives the old term"
    assert not a.leading and b.leading


def test_a_replica_whose_term_is_over_writes_nothing(
    sessions: sessionmaker[Session], clock: FrozenClock
) -> None:
    a, b = lease(sessions, clock, "a"), lease(sessions, clock, "b")
    a_writes, b_writes = a.fenced(sessions), b.fenced(sessions)
    assert a.probe({})
    note(a_writes, clock, "a as leader")
    with pytest.raises(NotLeader):
        note(b_writes, clock, "b before it leads")

    clock.advance(LEASE_S + 1)
    with pytest.raises(NotLeader, match="run out"):
        note(a_writes, clock, "a after its lease ran out")
    assert b.probe({})
    with pytest.raises(NotLeader, match="b does"):
        note(a_writes, clock, "a after b took over")
    note(b_writes, clock, "b as leader")
    assert notes(sessions) == ["a as leader", "b as leader"]


def test_a_new_term_waits_for_the_old_leaders_open_pass(
    sessions: sessionmaker[Session], clock: FrozenClock, database_url: str
) -> None:
    a, b = lease(sessions, clock, "a"), lease(sessions, clock, "b")
    assert a.probe({})
    inside, finish = threading.Event(), threading.Event()

    def a_pass() -> None:
        with unit_of_work(a.fenced(sessions)) as session:
            events.record(
                session, clock.now(), Severity.INFO, Category.GOVERNOR, "t", "a", budget_id=None
            )
            session.flush()  # the transaction has begun, fenced, while a still led
            inside.set()
            assert finish.wait(60)

    worker = threading.Thread(target=a_pass)
    worker.start()
    try:
        assert inside.wait(60)
        clock.advance(LEASE_S + 1)
        if database_url.startswith("postgres"):
            # The old leader's pass holds the lease row: taking it waits, then gives up for now.
            assert not b.probe({})
    finally:
        finish.set()
        worker.join(60)
    assert b.probe({}) and b.term == 2
    assert notes(sessions) == ["a"]


def test_a_replica_restarting_under_its_own_name_takes_its_lease_back(
    sessions: sessionmaker[Session], clock: FrozenClock
) -> None:
    before, after = lease(sessions, clock, "gov-0"), lease(sessions, clock, "gov-0")
    assert before.probe({})
    assert after.probe({}) and after.term == 2
    assert not before.probe({})


def test_stepping_down_hands_over_at_the_next_probe(
    sessions: sessionmaker[Session], clock: FrozenClock
) -> None:
    a, b = lease(sessions, clock, "a"), lease(sessions, clock, "b")
    assert a.probe({})
    a.release()
    assert not a.leading
    assert b.probe({}) and b.term == 2


def test_only_the_leader_exports_what_the_database_holds(
    sessions: sessionmaker[Session], clock: FrozenClock
) -> None:
    a, b = lease(sessions, clock, "a"), lease(sessions, clock, "b")
    assert a.probe({"enforce": Tick(clock.now(), 5.0)})
    assert a.probe({"enforce": Tick(clock.now(), 5.0)})  # the ticks travel with a renewal
    clock.advance(3)

    def scrape(replica: str, leading: bool) -> dict[str, dict[tuple[str, ...], float]]:
        with unit_of_work(sessions) as session:
            families = metrics.collect(session, GovernorConfig(), clock.now(), replica, leading)
        return {f.name: dict(f.samples) for f in families}

    leader, follower = scrape("a", a.leading), scrape("b", b.leading)
    assert leader["governor_leader"] == {("a",): 1.0}
    assert follower["governor_leader"] == {("b",): 0.0}
    assert leader["governor_leader_term"] == follower["governor_leader_term"] == {(): 1.0}
    began = clock.now().timestamp() - 3  # a took the lease three seconds ago
    assert leader["governor_leader_since_timestamp_seconds"] == {(): began}
    assert leader["governor_pass_age_seconds"] == {("enforce",): 3.0}
    assert follower["governor_pass_age_seconds"] == {}
    assert "governor_events_total" in leader
    assert "governor_events_total" not in follower, "a sum over replicas would double it"
    clock.advance(LEASE_S)  # no replica leads: every replica exports, none goes dark
    assert "governor_events_total" in scrape("b", b.leading)


def test_every_replica_shares_one_session_secret(sessions: sessionmaker[Session]) -> None:
    first = shared_secret(sessions, "session")
    assert len(first) == 32
    assert shared_secret(sessions, "session") == first


def test_one_process_per_sqlite_file_runs_the_periodic_work(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'governor.db'}"
    first, second = sqlite_scheduler_lock(url), sqlite_scheduler_lock(url)
    assert first is not None and second is not None
    assert first.path == tmp_path / "governor.db-scheduler.lock"
    assert first.try_acquire()
    assert not second.try_acquire()
    first.release()
    assert second.try_acquire()
    second.release()
    assert sqlite_scheduler_lock("sqlite://") is None
    assert sqlite_scheduler_lock("postgresql+psycopg://h/db") is None


def test_the_file_lock_decides_on_sqlite_whatever_the_lease_says(
    tmp_path: Path, clock: FrozenClock
) -> None:
    url = f"sqlite:///{tmp_path / 'governor.db'}"
    schema.upgrade(url)
    engine = build_engine(url)
    try:
        sessions = session_factory(engine)
        a = Lease(sessions, clock, "a", LEASE_S, gate=sqlite_scheduler_lock(url))
        b = Lease(sessions, clock, "b", LEASE_S, gate=sqlite_scheduler_lock(url))
        assert a.probe({})
        clock.advance(LEASE_S * 10)  # the lease ran out, but a's process still holds the file
        assert a.leading, "on SQLite the file lock decides: a late renewal loses nothing"
        note(a.fenced(sessions), clock, "a, long after its lease")
        assert not b.probe({})
        a.release()
        assert b.probe({}) and b.term == 2
    finally:
        engine.dispose()


def test_a_long_time_without_a_leader_is_reported_by_the_next_one(
    sessions: sessionmaker[Session], clock: FrozenClock
) -> None:
    a, b = lease(sessions, clock, "a"), lease(sessions, clock, "b")
    assert a.probe({})
    clock.advance(LEASE_S + 1)  # an ordinary failover: nothing to report
    assert b.probe({}) and b.gap is None
    b_renewed = clock.now()
    clock.advance(3 * LEASE_S)  # b went silent, and nobody led for three leases
    assert a.probe({})
    assert a.gap == (b_renewed, clock.now())
    resumed = a.resumed_at
    assert resumed == clock.now(), "jobs' silence counts from here, not from before the gap"
    clock.advance(LEASE_S + 1)  # an ordinary failover carries it on
    assert b.probe({}) and b.gap is None and b.resumed_at == resumed
