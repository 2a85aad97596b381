"""Requests queued on the event loop are worked on in groups: what queues while one group is
worked on forms the next, each request gets its own answer or its own exception, and a
request cancelled meanwhile costs the others nothing."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence

import pytest

from governor.api.heartbeat import batches
from governor.api.heartbeat.batches import Batches

DEADLINE_S = 30.0


class HeldFirstGroup:
    """Doubles each number; the first group waits until released, so that what is submitted
    meanwhile queues behind it. A negative number is refused alone; a group holding 13
    cannot be worked on at all."""

    def __init__(self) -> None:
        self.groups: list[list[int]] = []
        self.first_taken = threading.Event()
        self.release = threading.Event()

    def __call__(self, items: list[int]) -> Sequence[int | Exception]:
        self.groups.append(items)
        if len(self.groups) == 1:
            self.first_taken.set()
            assert self.release.wait(DEADLINE_S)
        if 13 in items:
            raise RuntimeError("the group cannot be worked on")
        return [ValueError(f"{n} is negative") if n < 0 else 2 * n for n in items]


async def until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(DEADLINE_S):
        while not condition():
            await asyncio.sleep(0.005)


async def held_then(
    work: HeldFirstGroup, queue: Batches[int, int], first: int, others: list[int]
) -> list[asyncio.Task[int]]:
    """Submit `first`, then `others` while its group is held; release it once they queue."""
    tasks = [asyncio.create_task(queue.submit(first))]
    await until(work.first_taken.is_set)
    tasks += [asyncio.create_task(queue.submit(n)) for n in others]
    await until(lambda: queue.waiting == len(others))
    work.release.set()
    await asyncio.wait(tasks, timeout=DEADLINE_S)
    return tasks


def test_a_lone_request_is_worked_on_at_once() -> None:
    async def scene() -> None:
        work = HeldFirstGroup()
        work.release.set()
        assert await Batches(work).submit(4) == 8
        assert work.groups == [[4]]

    asyncio.run(scene())


def test_requests_queued_while_a_group_is_worked_on_form_the_next() -> None:
    async def scene() -> None:
        work = HeldFirstGroup()
        queue = Batches(work)
        tasks = await held_then(work, queue, 1, [2, 3, 4, 5])
        assert [t.result() for t in tasks] == [2, 4, 6, 8, 10]
        assert work.groups == [[1], [2, 3, 4, 5]]
        assert queue.waiting == 0

    asyncio.run(scene())


def test_a_refused_request_fails_alone() -> None:
    async def scene() -> None:
        work = HeldFirstGroup()
        tasks = await held_then(work, Batches(work), 1, [2, -3, 4])
        assert [t.result() for t in tasks if t is not tasks[2]] == [2, 4, 8]
        with pytest.raises(ValueError, match="-3 is negative"):
            tasks[2].result()

    asyncio.run(scene())


def test_a_group_that_cannot_be_worked_on_fails_each_of_its_requests_and_no_other() -> None:
    async def scene() -> None:
        work = HeldFirstGroup()
        queue = Batches(work)
        tasks = await held_then(work, queue, 1, [2, 13])
        assert tasks[0].result() == 2
        for task in tasks[1:]:
            with pytest.raises(RuntimeError, match="cannot be worked on"):
                task.result()
        assert await queue.submit(6) == 12  # the queue goes on

    asyncio.run(scene())


def test_a_request_cancelled_while_queued_costs_the_others_nothing() -> None:
    async def scene() -> None:
        work = HeldFirstGroup()
        queue = Batches(work)
        first = asyncio.create_task(queue.submit(1))
        await until(work.first_taken.is_set)
        gone, kept = asyncio.create_task(queue.submit(2)), asyncio.create_task(queue.submit(3))
        await until(lambda: queue.waiting == 2)
        gone.cancel()
        work.release.set()
        assert (await first, await kept) == (2, 6)
        assert gone.cancelled()

    asyncio.run(scene())


def test_a_group_takes_at_most_its_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batches, "GROUP_LIMIT", 3)

    async def scene() -> None:
        work = HeldFirstGroup()
        tasks = await held_then(work, Batches(work), 0, [1, 2, 3, 4, 5, 6, 7])
        assert [t.result() for t in tasks] == [0, 2, 4, 6, 8, 10, 12, 14]
        assert work.groups == [[0], [1, 2, 3], [4, 5, 6], [7]]

    asyncio.run(scene())
