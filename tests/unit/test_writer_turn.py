"""SQLite's single writer, taken in turns: handed over in order of asking, so a thread that
gives the turn back and asks again at once (a pass going on to its next batch) waits behind
a thread that was already waiting (a group of heartbeats)."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy.exc import OperationalError

from governor.db import engine
from governor.db.engine import _Turn


def queued(turn: _Turn, count: int) -> None:
    deadline = time.monotonic() + 30
    while len(turn._queue) < count:  # the only sign that a thread waits
        assert time.monotonic() < deadline, "the waiting thread never queued"
        time.sleep(0.001)


def test_a_turn_given_back_and_asked_again_at_once_goes_to_the_thread_waiting() -> None:
    turn, order = _Turn(), []

    def waiter() -> None:
        with turn.take():
            order.append("waiter")

    thread = threading.Thread(target=waiter)
    for batch in range(3):
        with turn.take():
            order.append(f"batch {batch}")
            if batch == 0:
                thread.start()
                queued(turn, 1)
    thread.join(30)
    assert order == ["batch 0", "waiter", "batch 1", "batch 2"]


def test_turns_go_in_order_of_asking() -> None:
    turn, order = _Turn(), []

    def writer(n: int) -> None:
        with turn.take():
            order.append(n)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(5)]
    with turn.take():
        for n, thread in enumerate(threads):
            thread.start()
            queued(turn, n + 1)
    for thread in threads:
        thread.join(30)
    assert order == [0, 1, 2, 3, 4]


def test_a_wait_that_runs_out_is_refused_and_leaves_the_turn_to_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(engine, "SQLITE_BUSY_TIMEOUT_MS", 50)
    turn, outcomes = _Turn(), []
    with turn.take():
        thread = threading.Thread(target=lambda: outcomes.append(refused_or_taken(turn)))
        thread.start()
        thread.join(30)
    assert outcomes == ["refused"]
    assert refused_or_taken(turn) == "taken", "the turn went to a thread no longer waiting"


def refused_or_taken(turn: _Turn) -> str:
    try:
        with turn.take():
            return "taken"
    except OperationalError:
        return "refused"
