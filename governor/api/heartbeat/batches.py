"""Requests worked on in groups: one hand-off to a worker thread for all that have queued.

A request handed to a worker thread of its own costs the event loop a hand-off each way,
and under load forty worker threads take turns at the one interpreter. The busiest route's
requests are instead queued on the event loop and taken, all that have queued, by one worker
thread at a time; while it works on a group, the next one gathers. Alone, a request waits for
no one; under load, hundreds share one hand-off, and whatever else the group's work shares.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from anyio import to_thread

T = TypeVar("T")
R = TypeVar("R")

GROUP_LIMIT = 500  # requests a group takes at most; the rest wait for the next


class Batches(Generic[T, R]):
    """`work(items)` answers each of a group's items, in order, with its result or an
    exception for that item alone; an exception `work` raises is every item's."""

    def __init__(self, work: Callable[[list[T]], Sequence[R | Exception]]) -> None:
        self.loop = asyncio.get_running_loop()  # built on the event loop it serves
        self._work = work
        self._queue: list[tuple[T, asyncio.Future[R]]] = []
        self._working: asyncio.Task[None] | None = None

    @property
    def waiting(self) -> int:
        """How many items wait for the next group."""
        return len(self._queue)

    async def submit(self, item: T) -> R:
        """The item's result, worked on with whatever else is queued."""
        answer: asyncio.Future[R] = self.loop.create_future()
        self._queue.append((item, answer))
        if self._working is None:
            self._working = asyncio.ensure_future(self._work_through())
        return await answer

    async def _work_through(self) -> None:
        try:
            while self._queue:
                group = self._queue[:GROUP_LIMIT]
                del self._queue[:GROUP_LIMIT]
                await self._answer(group)
        finally:
            self._working = None
            for _, answer in self._queue:  # only where the loop is shutting down
                answer.cancel()

    async def _answer(self, group: list[tuple[T, asyncio.Future[R]]]) -> None:
        try:
            results: Sequence[R | Exception] = await to_thread.run_sync(
                self._work, [item for item, _ in group]
            )
        except Exception as error:
            results = [error] * len(group)
        except BaseException:
            for _, answer in group:
                answer.cancel()
            raise
        for (_, answer), result in zip(group, results, strict=True):
            if answer.done():  # its request was cancelled meanwhile
                continue
            if isinstance(result, Exception):
                answer.set_exception(result)
            else:
                answer.set_result(result)
