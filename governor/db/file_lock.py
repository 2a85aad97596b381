"""An exclusive lock on a file, held until released or until the process ends (even by a crash).

SQLite is the embedded, single-process mode: the one process holding the lock beside the
database file runs the periodic work; another process on the same file serves but waits.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from sqlalchemy import make_url


class FileLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def try_acquire(self) -> bool:
        """Take the lock if no other process holds it; True while this process holds it."""
        if self._fd is not None:
            return True
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def sqlite_scheduler_lock(url: str) -> FileLock | None:
    """The lock beside a SQLite database file (none for a server database or one in memory)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return FileLock(Path(f"{parsed.database}-scheduler.lock"))
