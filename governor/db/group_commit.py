"""Small writes from many threads, committed together: one transaction for a group of them.

A thread that asks to write while no group is being written writes at once, in a group of
its own and any others that arrive meanwhile; a thread that asks while a group is being
written waits, and the next group carries its write with every other one that queued behind
that group. Alone, a write costs what it did; under load, a thousand writers share a few
commits instead of queueing for a thousand (on SQLite, for the single writer's turn).
A caller may hand over several writes at once (`commit_all`): they go in one group.

Every caller returns only once its own write is committed, or raises what stopped it: what
a caller reads after `commit` returns includes its write. A group that fails is written
again one write at a time, so a write that cannot be taken fails alone, and a lock conflict
between the group and another transaction costs a retry, not an error; a group the database
itself refuses (unreachable, busy, out of connections) fails whole, at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from sqlalchemy import Connection, Engine, exc

from governor.db.engine import writing

T = TypeVar("T")


class _Write(Generic[T]):
    __slots__ = ("done", "error", "item", "leads")

    def __init__(self, item: T) -> None:
        self.item = item
        self.done = threading.Event()  # written (or failed), or asked to write the next group
        self.leads = False
        self.error: BaseException | None = None


class GroupCommit(Generic[T]):
    """Commits `write(connection, items)` for the items of concurrent `commit` calls together."""

    def __init__(self, engine: Engine, write: Callable[[Connection, Sequence[T]], None]) -> None:
        self._engine = engine
        self._write = write
        self._lock = threading.Lock()
        self._queue: list[_Write[T]] = []
        self._writing = False

    @property
    def waiting(self) -> int:
        """How many writes wait for the next group."""
        with self._lock:
            return len(self._queue)

    def commit(self, item: T) -> None:
        """Write `item` with whatever else is queued; return once it is committed."""
        [error] = self.commit_all([item])
        if error is not None:
            raise error

    def commit_all(self, items: Sequence[T]) -> list[BaseException | None]:
        """Write `items` in one group, with whatever else is queued; return once they are
        committed, with what stopped each (None: written)."""
        mine = [_Write(item) for item in items]
        if not mine:
            return []
        with self._lock:
            self._queue.extend(mine)
            leads, self._writing = not self._writing, True
        if not leads:  # queued together, they are written in one group: wait on its first
            mine[0].done.wait()
            leads = mine[0].leads  # the previous group's writer handed the next group to us
        if leads:
            self._write_group()
        return [write.error for write in mine]

    def _write_group(self) -> None:
        with self._lock:
            group, self._queue = self._queue, []
        try:
            self._write_all(group)
        except BaseException as error:  # interrupted: none of them is known to be written
            for write in group:
                write.error = write.error or error
            raise
        finally:
            with self._lock:
                following = self._queue[0] if self._queue else None
                self._writing = following is not None
            for write in group:
                write.done.set()
            if following is not None:
                following.leads = True
                following.done.set()

    def _write_all(self, group: list[_Write[T]]) -> None:
        try:
            with writing(self._engine) as connection:
                self._write(connection, [write.item for write in group])
            return
        except Exception as error:
            if len(group) == 1 or _refused_by_the_database(error):
                for write in group:
                    write.error = error
                return
        for write in group:  # each alone: only what cannot be written fails
            try:
                with writing(self._engine) as connection:
                    self._write(connection, [write.item])
            except Exception as error:
                write.error = error


# A deadlock or a serialization failure is the group's conflict with another transaction:
# written alone, each write goes through.
_CONFLICTS = frozenset({"40P01", "40001"})


def _refused_by_the_database(error: Exception) -> bool:
    """The database refused the group, not one of its writes: unreachable, busy, out of
    connections. Written alone, each write would wait for the same refusal, one after the
    other."""
    if isinstance(error, exc.TimeoutError):  # no connection to be had from the pool
        return True
    if not isinstance(error, exc.OperationalError):
        return False
    return getattr(error.orig, "sqlstate", None) not in _CONFLICTS
