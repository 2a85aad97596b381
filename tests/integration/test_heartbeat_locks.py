"""A beat of a job told to stop takes its pod's stop order before it writes its run's row, as
the stop task does (the order, then the run it ends): the other way round the two deadlock.
Row locks are PostgreSQL's; SQLite has one writer and nothing to order."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import create_engine, select, text
from sqlalchemy.orm import Session

from governor.db import repository as repo
from governor.db.tables import RunRow
from governor.domain.model import Action
from governor.services.fleet import pods
from governor.services.jobs import checkins
from tests.integration.conftest import BY, Governor


def wait_for_a_lock_wait(session: Session, beat: list[object], deadline_s: float = 30.0) -> None:
    """Until another connection waits on a row lock (the beat, while it has not answered)."""
    ends = time.monotonic() + deadline_s
    while time.monotonic() < ends and not beat:
        waiting = session.execute(
            text(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND datname = current_database() AND pid <> pg_backend_pid()"
            )
        ).scalar_one()
        if waiting:
            return
        time.sleep(0.05)
    raise AssertionError(f"the beat never waited on a row lock: {beat}")


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_a_beat_waiting_on_the_stop_order_has_not_locked_its_run(gov: Governor) -> None:
    budget = gov.budget("1000")
    pod = gov.pod(budget)
    run = gov.run(budget, pod)
    with gov.session() as s:
        pods.stop_manually(s, gov.ctx, pod, "test", gov.clock.now(), by=BY)
    with gov.session() as s:
        assert repo.get_run(s, run).directive is Action.STOP

    beat = checkins.Heartbeat(step=7)
    outcome: list[object] = []

    def job() -> None:
        try:
            outcome.append(
                checkins.check_in(gov.ctx.sessions, gov.ctx.config, run, beat, gov.clock.now())
            )
        except Exception as error:  # shown by the assertion below
            outcome.append(error)

    others = create_engine(gov.ctx.engine.url)  # the server's pool is the beat's alone
    with Session(others) as stop_task, Session(others) as onlooker:
        repo.latest_stop_order(stop_task, pod, lock=True)  # the stop task holds the order
        beating = threading.Thread(target=job)
        beating.start()
        try:
            wait_for_a_lock_wait(onlooker, outcome)
            assert not outcome, outcome  # it waits for the stop task
            # the stop task could now end the run: its row is free
            onlooker.execute(select(RunRow).where(RunRow.id == run).with_for_update(nowait=True))
            onlooker.rollback()
        finally:
            stop_task.rollback()
            beating.join(timeout=60)
    others.dispose()
    [directive] = outcome
    assert isinstance(directive, checkins.Directive) and directive.action is Action.STOP
    with gov.session() as s:
        assert repo.get_run(s, run).step == 7
