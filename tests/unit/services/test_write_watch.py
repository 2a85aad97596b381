"""The write watch: a failing writer sets the flag at once, a webhook notice goes out once per
outage from memory, the log says each kind of failure once a minute, and the outage is handed
over, from its first failure to the first write after, once writes commit again."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.exc import OperationalError

from governor.domain.model import Severity
from governor.domain.notice import Notice
from governor.services.replica.write_watch import WriteWatch

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
    watch.succeeded(T0)
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
    watch.succeeded(resumed)
    assert watch.failing() is None
    [outage] = watch.ended()
    assert (outage.began, outage.ended, outage.failures) == (T0, resumed, 30)
    assert watch.ended() == []  # handed over once
    assert watch.failures() == {"lease": 15, "enforce": 15}

    watch.failed("api", refused(), resumed + timedelta(seconds=5))  # a second outage
    assert len(notices) == 2
