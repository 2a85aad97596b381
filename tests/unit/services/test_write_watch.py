"""The write watch: a failing writer sets the flag at once, a webhook notice goes out once per
outage from memory, the log says each kind of failure once a minute, and the outage is handed
over, from its first failure to the first write after, once writes commit again: only a write
that changed rows, by a writer the database refused, ends an outage."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from governor.db.engine import build_engine, committed_writes, session_factory, unit_of_work
from governor.domain.model import Severity
from governor.domain.notice import Notice
from governor.services.replica.write_watch import QUIET_S, WriteWatch
from tests.clock import FrozenClock

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def refused() -> OperationalError:
    return OperationalError("UPDATE leases", {}, ConnectionRefusedError("connection refused"))


def test_an_outage_is_flagged_told_once_and_handed_over_when_writes_resume(
    caplog: pytest.LogCaptureFixture,
) -> None:
    notices: list[Notice] = []
    seconds = [0.0]
    watch = WriteWatch("r1", notify=notices.append, monotonic=lambda: seconds[0])
    assert watch.failing() is None
    watch.committed("lease", T0)
    assert watch.ended() == []

    with caplog.at_level(logging.ERROR, logger="governor.writes"):
        for i in range(30):  # a request or a pass every two seconds for a minute
            seconds[0] = i * 2.0
            watch.failed("enforce" if i % 2 else "lease", refused(), T0 + timedelta(seconds=i * 2))
    lines = [r for r in caplog.records if r.name == "governor.writes"]
    assert len(lines) == 2  # one per writer and kind in the minute
    assert all(r.exc_info is None for r in lines)  # no traceback

    failing = watch.failing()
    assert failing is not None and failing.began == T0 and failing.ended is None
    assert failing.writers == ("enforce", "lease") and failing.failures == 30
    assert [n.severity for n in notices] == [Severity.CRITICAL]
    assert "refuses writes" in notices[0].message and notices[0].subject == "replica r1"

    resumed = T0 + timedelta(seconds=75)
    watch.committed("lease", resumed)
    assert watch.failing() is None
    [outage] = watch.ended()
    assert (outage.began, outage.ended, outage.failures) == (T0, resumed, 30)
    assert watch.ended() == [outage]  # handed over until it is recorded
    watch.recorded(outage)
    assert watch.ended() == []
    assert watch.failures() == {"lease": 15, "enforce": 15}

    watch.failed("api", refused(), resumed + timedelta(seconds=5))  # a second outage
    assert len(notices) == 2


def test_only_a_refused_writer_s_commit_ends_an_outage() -> None:
    """A full SQLite disk: the lease's renewal rewrites its row in place and commits while
    every heartbeat is refused; readiness must not flap with each renewal."""
    watch = WriteWatch("r1")
    watch.failed("api", refused(), T0)
    for second in range(1, 10):
        watch.committed("lease", T0 + timedelta(seconds=second))
        watch.committed("enforce", T0 + timedelta(seconds=second))
        failing = watch.failing()
        assert failing is not None and failing.began == T0
    watch.failed("enforce", refused(), T0 + timedelta(seconds=10))
    watch.committed("enforce", T0 + timedelta(seconds=12))  # one of the refused writers
    [outage] = watch.ended()
    assert outage.seconds(T0) == 12 and outage.writers == ("api", "enforce")
    assert watch.failing() is None


def test_once_no_write_is_refused_for_a_while_any_write_that_commits_ends_the_outage() -> None:
    """The refused writer may never write again (readiness took the API out of service)."""
    watch = WriteWatch("r1")
    watch.failed("api", refused(), T0)
    watch.failed("api", refused(), T0 + timedelta(seconds=30))
    watch.committed("lease", T0 + timedelta(seconds=30 + QUIET_S - 1))
    assert watch.failing() is not None
    watch.committed("lease", T0 + timedelta(seconds=30 + QUIET_S))
    assert watch.failing() is None
    [outage] = watch.ended()
    assert outage.seconds(T0) == 30 + QUIET_S


def test_work_that_commits_no_change_ends_no_outage(tmp_path: Path) -> None:
    """An empty transaction, a read, an update of no row: each commits even on a full disk,
    and none of them tells that the refused writes would pass now."""
    engine = build_engine(f"sqlite:///{tmp_path / 'db.sqlite'}")
    sessions = session_factory(engine)
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE t (x INTEGER)"))
    clock = FrozenClock(T0)
    watch = WriteWatch("r1")
    watch.failed("api", refused(), T0)

    def work(*statements: str) -> None:
        with watch.watching("api", clock), unit_of_work(sessions) as session:
            for statement in statements:
                session.execute(text(statement))

    before = committed_writes()
    work()
    work("SELECT count(*) FROM t")
    work("UPDATE t SET x = 1 WHERE x = 2")
    assert committed_writes() == before and watch.failing() is not None

    with pytest.raises(OperationalError):  # a refused write is told, and raised on
        work("INSERT INTO missing VALUES (1)")
    assert watch.failing() is not None and watch.failures() == {"api": 2}

    clock.advance(5)
    work("INSERT INTO t VALUES (1)")
    assert committed_writes() == before + 1 and watch.failing() is None
    [outage] = watch.ended()
    assert outage.seconds(T0) == 5
