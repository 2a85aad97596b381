"""The event log's retention on the real schema: a closed budget's old routine events fold into
one line per day and subject, counting every event folded; an open budget's, warnings,
critical events and decisions are kept whatever their age; a second pass changes nothing;
the budget's report is the same before and after; only the leader folds (SQLite and
PostgreSQL)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import or_, select

from governor.db.tables import EventRow
from governor.domain.errors import NotLeader
from governor.domain.model import Category, RunStatus, Severity
from governor.domain.ports import SystemClock
from governor.scheduler import tasks
from governor.scheduler.runner import guarded
from governor.services import event_retention, events
from governor.services.fleet import budgets, pods
from governor.services.jobs import checkins
from governor.services.replica.leadership import Lease
from governor.services.runs import job_events
from tests.clock import FrozenClock
from tests.integration.conftest import BY, Governor, make_governor, ok

DAY_S, HOUR_S = 86400.0, 3600.0
TIMELINE = 6  # the events a report's timeline lists: the latest six


@pytest.fixture
def gov(migrated_url: str, clock: FrozenClock) -> Iterator[Governor]:
    """A governor whose reports list the latest few events: older ones may fold."""
    governor = make_governor(migrated_url, clock)
    config = replace(governor.ctx.config, report_timeline_events=TIMELINE)
    governor.ctx = replace(governor.ctx, config=config)
    yield governor
    governor.ctx.engine.dispose()


def note(gov: Governor, run: str, message: str, severity: Severity = Severity.INFO) -> None:
    """What the job reports on its run: a note (routine) or a warning."""
    with gov.session() as s:
        job_events.report(
            s,
            run,
            gov.clock.now(),
            severity=severity,
            category=Category.HARNESS,
            kind=None,
            message=message,
            evidence=None,
        )


def three_days(gov: Governor) -> tuple[str, str, datetime]:
    """Two budgets with a run each: three days of the job's notes and checkpoints every four
    hours and a warning a day on both, and two governor notes with no budget; then the first
    budget's pod is stopped and the budget closed. Returns the closed budget, the open one,
    and when the days began (midnight)."""
    began = gov.clock.advance(12 * HOUR_S)
    closed, still_open = gov.budget(ceiling="1000"), gov.budget(ceiling="1000")
    runs = {}
    for budget, ref in ((closed, "pod-1"), (still_open, "pod-2")):
        pod = gov.pod(budget, ref=ref)
        runs[budget] = (pod, gov.run(budget, pod, timeout_s=10**8, grace_s=60))
    for day in range(3):
        for hour in range(0, 24, 4):
            for _, run in runs.values():
                note(gov, run, f"epoch {day}.{hour} done")
            gov.clock.advance(HOUR_S)
            for _, run in runs.values():
                step = day * 100 + hour + 1
                gov.beat(run, step=step, checkpoint=checkins.Checkpoint(step, "/ck"))
            gov.clock.advance(3 * HOUR_S)
        for _, run in runs.values():
            note(gov, run, f"day {day}: slow input pipeline", Severity.WARNING)
    with gov.session() as s:
        for n in range(2):
            events.record(
                s,
                began + timedelta(hours=n + 1),
                Severity.INFO,
                Category.GOVERNOR,
                "replica a",
                f"note {n}",
                budget_id=None,
                routine=True,
            )
    pod, run = runs[closed]
    with gov.session() as s:
        pods.stop_manually(s, gov.ctx, pod, "done", gov.clock.now(), by=BY)
    saved = checkins.Checkpoint(999, "/ck")
    gov.beat(run, step=999, status=RunStatus.STOPPING, checkpoint=saved)
    gov.tick(1)  # the stop is sent
    gov.tick(30)  # and confirmed
    with gov.session() as s:
        budgets.close(s, closed, "pilot over", False, gov.clock.now(), by=BY)
    return closed, still_open, began


def rows(gov: Governor) -> dict[int, tuple[Any, ...]]:
    """Every event as stored, by id."""
    with gov.session() as s:
        return {
            r.id: (
                r.at,
                r.severity,
                r.category,
                r.subject,
                r.budget_id,
                r.message,
                r.evidence,
                r.count,
                r.last_at,
                r.routine,
            )
            for r in s.scalars(select(EventRow))
        }


def report(client: TestClient, budget: str) -> tuple[Any, str, str]:
    """The budget's report as JSON, Markdown and HTML."""
    url = f"/v1/budgets/{budget}/report"
    return (
        ok(client.get(url)),
        client.get(url, params={"format": "md"}).text,
        client.get(url, params={"format": "html"}).text,
    )


def test_a_closed_budgets_old_routine_events_fold_into_daily_counts_and_nothing_else_changes(
    gov: Governor, client: TestClient
) -> None:
    closed, still_open, began = three_days(gov)
    small = gov.budget()  # closed with few events: its report's timeline lists every one
    with gov.session() as s:
        for n in range(2):
            events.record(
                s,
                began,
                Severity.INFO,
                Category.MODEL,
                "job",
                f"{n}",
                budget_id=small,
                routine=True,
            )
        budgets.close(s, small, "never used", False, gov.clock.now(), by=BY)
    gov.clock.advance(30 * DAY_S - 12 * HOUR_S)  # two days and a half older than the retention
    cutoff = gov.clock.now() - timedelta(seconds=gov.ctx.config.event_keep_s)
    before, reported, small_reported = rows(gov), report(client, closed), report(client, small)
    listed = {e["id"] for e in reported[0]["timeline"] + small_reported[0]["timeline"]}
    assert len(listed) == TIMELINE + 4

    tasks.fold_events(gov.ctx)
    after = rows(gov)

    def kept_as_they_were(row: tuple[Any, ...]) -> bool:
        at, severity, budget, routine = row[0], row[1], row[4], row[9]
        return not routine or severity is not Severity.INFO or budget == still_open or at >= cutoff

    kept = {i: r for i, r in before.items() if kept_as_they_were(r) or i in listed}
    assert {i: after[i] for i in kept} == kept, "warnings, decisions, the open budget's, the new"
    assert any(r[1] is Severity.WARNING for r in kept.values())
    assert any(r[4] == still_open and r[0] < cutoff and r[9] for r in kept.values())
    assert any(not r[9] and r[4] == closed and r[0] < cutoff for r in kept.values())

    folded = {i: r for i, r in before.items() if i not in kept}
    lines = {i: r for i, r in after.items() if i not in kept}
    assert folded and len(lines) < len(folded)
    occurrences = Counter(
        (r[4], r[2], r[3], r[0].date()) for r in folded.values() for _ in range(r[7])
    )
    assert Counter({(r[4], r[2], r[3], r[0].date()): r[7] for r in lines.values()}) == occurrences
    assert sum(r[7] for r in lines.values()) == sum(r[7] for r in folded.values())
    assert {r[0].date() for r in lines.values() if r[4] == closed} == {
        (began + timedelta(days=n)).date() for n in range(3)
    }, "the third day is folded up to the retention"
    for line in lines.values():
        day = line[0].date()
        stands_for = [r for r in folded.values() if r[2:5] == line[2:5] and r[0].date() == day]
        assert line[6]["folded"]["day"] == day.isoformat()
        assert line[6]["folded"]["rows"] == len(stands_for) >= 1
        assert line[0] == min(r[0] for r in stands_for)
        assert line[8] == max(r[8] for r in stands_for)

    assert report(client, closed) == reported, "the report is the same after the fold"
    assert report(client, small) == small_reported
    assert ok(client.get(f"/v1/budgets/{still_open}"))["state"] == "open"

    tasks.fold_events(gov.ctx)
    assert rows(gov) == after, "a second pass changes nothing"

    page = ok(client.get("/v1/events", params={"budget_id": closed, "limit": 500}))
    shown = [e for e in page["items"] if "folded" in e["evidence"]]
    assert {e["id"] for e in shown} == {i for i, r in lines.items() if r[4] == closed}
    assert sum(e["count"] for e in shown) == sum(r[7] for r in folded.values() if r[4] == closed)
    assert all(
        e["severity"] == "info" and e["message"].startswith(f"{e['count']} routine harness events")
        for e in shown
    )


def test_small_batches_and_later_passes_fold_each_day_into_one_line(
    gov: Governor, client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass in batches of a few events cuts days in two: the rest of a day folds into the
    line kept for it, in that pass or a later one, and the report stays the same."""
    monkeypatch.setattr(event_retention, "BATCH", 5)
    closed, still_open, began = three_days(gov)
    gov.clock.advance(30 * DAY_S - 12 * HOUR_S)
    tasks.fold_events(gov.ctx)
    with gov.session() as s:
        left = s.scalars(
            select(EventRow.id).where(
                EventRow.routine,
                EventRow.folded_rows.is_(None),
                or_(EventRow.budget_id == closed, EventRow.budget_id.is_(None)),
                EventRow.at < gov.clock.now() - timedelta(seconds=gov.ctx.config.event_keep_s),
            )
        ).all()
    assert left == [], "one run of the pass goes on until none is left"
    third = (began + timedelta(days=2)).date()

    def lines() -> Counter[tuple[Any, ...]]:
        """The routine lines of the closed budget and of none, by budget, subject and day."""
        return Counter(
            (r[4], r[2], r[3], r[0].date())
            for r in rows(gov).values()
            if r[9] and r[4] != still_open
        )

    def third_day() -> list[tuple[Any, ...]]:
        return [r for r in rows(gov).values() if r[4] == closed and r[0].date() == third and r[9]]

    assert {n for (*_, day), n in lines().items() if day < third} == {1}
    partly = third_day()
    gov.clock.advance(DAY_S)
    reported = report(client, closed)
    tasks.fold_events(gov.ctx)
    whole = third_day()
    assert report(client, closed) == reported
    assert len(whole) < len(partly)
    assert sum(r[7] for r in whole) == sum(r[7] for r in partly)
    assert all("folded" in r[6] for r in whole), "the day's rows are all in one line"
    assert {n for (*_, day), n in lines().items() if day <= third} == {1}


def test_only_the_leader_folds_events(gov: Governor) -> None:
    three_days(gov)
    gov.clock.advance(30 * DAY_S)
    before = rows(gov)
    follower = Lease(gov.ctx.sessions, SystemClock(), "follower", lease_s=3600.0)
    assert not follower.probe({}), "the governor's own replica leads"
    ctx = replace(gov.ctx, sessions=follower.fenced(gov.ctx.sessions), lease=follower)

    run_pass = guarded(ctx, follower, "event_fold", tasks.TASKS["event_fold"])
    assert ctx.ticks.ticks()["event_fold"].every_s == ctx.config.event_fold_interval_s
    run_pass()  # a replica that does not lead runs nothing
    assert ctx.ticks.ticks()["event_fold"].at is None
    with pytest.raises(NotLeader):  # and a pass whose term is over writes nothing
        tasks.fold_events(ctx)
    assert rows(gov) == before

    tasks.fold_events(gov.ctx)  # the leader's pass folds
    assert len(rows(gov)) < len(before)
