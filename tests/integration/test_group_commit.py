"""Plain beats' writes from many threads share a commit: whatever arrives while a group is
being written goes in the next one, every caller returns once its own write is committed,
and a write that cannot be taken fails alone."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from sqlalchemy import Connection
from sqlalchemy.exc import IntegrityError, OperationalError

from governor.db import repository as repo
from governor.db.group_commit import GroupCommit
from governor.db.heartbeats import insert_points, update_runs
from governor.domain.errors import NotFound, RunEnded
from governor.domain.model import Action, RunStatus
from governor.services.jobs import checkins
from governor.services.monitoring import metric_history
from tests.integration.conftest import Governor, counted

Step = tuple[str, int]  # a run, and the step to write on it
UNREACHABLE = 999
AT = datetime(2026, 1, 1, tzinfo=UTC)
REFUSED = 777  # written with a metric of a run that does not exist: the database refuses it


def wait_until(condition: Callable[[], bool], deadline_s: float = 30.0) -> None:
    ends = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() > ends:
            raise AssertionError("the condition never held")
        time.sleep(0.01)


class HeldFirstGroup:
    """Writes steps; the first group it writes waits until released, so that the commits
    asked meanwhile queue behind it. A negative step cannot be written; a step of
    `UNREACHABLE` finds the database gone; a step of `REFUSED` breaks a foreign key."""

    def __init__(self) -> None:
        self.groups: list[list[Step]] = []
        self.first_written = threading.Event()
        self.release = threading.Event()

    def __call__(self, connection: Connection, items: Sequence[Step]) -> None:
        self.groups.append(list(items))
        if any(step == UNREACHABLE for _, step in items):
            raise OperationalError("UPDATE", None, Exception("the server closed the connection"))
        if any(step < 0 for _, step in items):
            raise ValueError("a step cannot be negative")
        update_runs(connection, [(run, {"step": step}) for run, step in items])
        for _, step in items:
            if step == REFUSED:
                insert_points(
                    connection, metric_history.points("run_gone", step, {"loss": 1.0}, AT)
                )
        if len(self.groups) == 1:
            self.first_written.set()
            assert self.release.wait(30)


def commit_all(
    writer: HeldFirstGroup, group: GroupCommit[Step], items: Sequence[Step]
) -> dict[Step, BaseException]:
    """Commit the first item, then the others while its group is held; what each raised."""
    failures: dict[Step, BaseException] = {}

    def commit(item: Step) -> None:
        try:
            group.commit(item)
        except Exception as error:
            failures[item] = error

    first = threading.Thread(target=commit, args=(items[0],))
    first.start()
    others = [threading.Thread(target=commit, args=(item,)) for item in items[1:]]
    assert writer.first_written.wait(30)
    for thread in others:
        thread.start()
    wait_until(lambda: group.waiting == len(others))
    writer.release.set()
    for thread in [first, *others]:
        thread.join(timeout=60)
        assert not thread.is_alive()
    return failures


def pilot_runs(gov: Governor, count: int) -> list[str]:
    budget = gov.budget("1000")
    pod = gov.pod(budget)
    return [gov.run(budget, pod) for _ in range(count)]


def held(gov: Governor) -> tuple[HeldFirstGroup, GroupCommit[Step]]:
    writer = HeldFirstGroup()
    return writer, GroupCommit(gov.ctx.engine, writer)


def steps(gov: Governor, runs: Sequence[str]) -> list[int]:
    with gov.session() as s:
        return [repo.get_run(s, run).step for run in runs]


def test_writes_asked_while_a_group_is_written_share_the_next_commit(gov: Governor) -> None:
    runs = pilot_runs(gov, 6)
    writer, group = held(gov)

    failures = commit_all(writer, group, [(run, index + 10) for index, run in enumerate(runs)])

    assert failures == {}
    assert [len(g) for g in writer.groups] == [1, 5]  # the five waited for one commit
    assert steps(gov, runs) == [10, 11, 12, 13, 14, 15]
    assert group.waiting == 0


def test_a_write_that_cannot_be_taken_fails_alone(gov: Governor) -> None:
    runs = pilot_runs(gov, 4)
    writer, group = held(gov)

    failures = commit_all(writer, group, [(runs[0], 5), (runs[1], 6), (runs[2], -1), (runs[3], 8)])

    assert list(failures) == [(runs[2], -1)]
    assert isinstance(failures[(runs[2], -1)], ValueError)
    # the group of three failed as one, then each was written alone
    assert [len(g) for g in writer.groups] == [1, 3, 1, 1, 1]
    assert steps(gov, runs) == [5, 6, 0, 8]


def test_a_statement_the_database_refuses_fails_its_write_alone(gov: Governor) -> None:
    """On PostgreSQL the group's statements are pipelined: the refusal comes back with the
    commit, not from the statement, and still fails the group, then that write alone."""
    runs = pilot_runs(gov, 4)
    writer, group = held(gov)

    failures = commit_all(
        writer, group, [(runs[0], 5), (runs[1], 6), (runs[2], REFUSED), (runs[3], 8)]
    )

    assert list(failures) == [(runs[2], REFUSED)]
    assert isinstance(failures[(runs[2], REFUSED)], IntegrityError)
    assert [len(g) for g in writer.groups] == [1, 3, 1, 1, 1]
    assert steps(gov, runs) == [5, 6, 0, 8]  # nothing of the refused write was committed


def test_a_group_the_database_refuses_fails_whole_at_once(gov: Governor) -> None:
    runs = pilot_runs(gov, 3)
    writer, group = held(gov)

    failures = commit_all(writer, group, [(runs[0], 5), (runs[1], 6), (runs[2], UNREACHABLE)])

    assert sorted(failures) == sorted([(runs[1], 6), (runs[2], UNREACHABLE)])
    assert all(isinstance(f, OperationalError) for f in failures.values())
    # not written again one at a time: each would wait for the same refusal
    assert [len(g) for g in writer.groups] == [1, 2]
    assert steps(gov, runs) == [5, 0, 0]


def test_a_lone_write_is_committed_at_once_before_commit_returns(gov: Governor) -> None:
    [run] = pilot_runs(gov, 1)
    writer, group = held(gov)
    writer.release.set()  # nothing to hold: a lone write waits for no one

    group.commit((run, 3))

    assert writer.groups == [[(run, 3)]]
    assert steps(gov, [run]) == [3]


def test_concurrent_plain_beats_of_many_runs_are_each_recorded(gov: Governor) -> None:
    jobs = 12
    runs = pilot_runs(gov, jobs)
    answers: list[object] = []

    def job(run: str) -> None:
        for step in range(1, 6):
            beat = checkins.Heartbeat(step=step, metrics={"loss": 1.0 / step})
            answers.append(
                checkins.check_in(gov.ctx.sessions, gov.ctx.config, run, beat, gov.clock.now())
            )

    threads = [threading.Thread(target=job, args=(run,)) for run in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
        assert not thread.is_alive()
    assert len(answers) == 5 * jobs
    assert all(isinstance(a, checkins.Directive) for a in answers)
    assert steps(gov, runs) == [5] * jobs
    with gov.session() as s:
        for run in runs:  # every beat's metric, at every step
            points = metric_history.series(s, run, "loss", None).items
            assert [p.step for p in points] == [1, 2, 3, 4, 5]


def fleet_of(gov: Governor, count: int) -> list[str]:
    """Runs on a budget an enforcement pass has looked at, each beaten once: plain from here."""
    runs = pilot_runs(gov, count)
    gov.tick()
    for run in runs:
        gov.beat(run)
    return runs


def test_a_group_of_plain_beats_is_read_together_and_committed_together(gov: Governor) -> None:
    runs = fleet_of(gov, 4)
    beats = [
        (run, checkins.Heartbeat(step=n + 2, metrics={"loss": 0.5})) for n, run in enumerate(runs)
    ]

    with counted(gov) as statements:
        answers = checkins.check_in_group(gov.ctx.sessions, beats, gov.clock.now())

    assert [a.action for a in answers if isinstance(a, checkins.Directive)] == [Action.CONTINUE] * 4
    reads = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    commits = [s for s in statements if s.lstrip().upper().startswith("UPDATE RUNS")]
    assert len(reads) == 1 and len(commits) == 1, statements  # one read, one write for four
    assert steps(gov, runs) == [2, 3, 4, 5]


def test_in_a_group_each_beat_is_answered_or_refused_on_its_own(gov: Governor) -> None:
    live, ended, checkpointing, twice = fleet_of(gov, 4)
    gov.beat(ended, step=5, status=RunStatus.FINISHED)
    beats = [
        (live, checkins.Heartbeat(step=7)),
        ("run_gone", checkins.Heartbeat(step=7)),
        (ended, checkins.Heartbeat(step=7)),
        (checkpointing, checkins.Heartbeat(step=7, checkpoint=checkins.Checkpoint(7, "/ws/c7"))),
        (twice, checkins.Heartbeat(step=7)),
        (twice, checkins.Heartbeat(step=8)),
    ]

    answers = checkins.check_in_group(gov.ctx.sessions, beats, gov.clock.now())

    assert isinstance(answers[0], checkins.Directive) and isinstance(answers[4], checkins.Directive)
    assert isinstance(answers[1], NotFound) and isinstance(answers[2], RunEnded)
    assert answers[3] is None  # a checkpoint takes the full path
    assert answers[5] is None  # the run's second beat follows its first, the full way
    assert steps(gov, [live, checkpointing, twice]) == [7, 1, 7]
