"""Engine and session factory builders, and the unit of work (one commit per request or tick)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

SQLITE_BUSY_TIMEOUT_MS = 30_000


def build_engine(url: str, **kwargs: Any) -> Engine:
    """An engine for `url`; SQLite gets WAL, foreign keys, a busy timeout and eager locking."""
    if url.startswith("sqlite"):
        engine = create_engine(
            url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}, **kwargs
        )
        _tune_sqlite(engine)
        return engine
    return create_engine(url, pool_pre_ping=True, **kwargs)


def _tune_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # The driver must not open transactions on its own: we begin them below.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        # Take the write lock up front: two transactions never read, then race to write.
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(bind=engine, expire_on_commit=False)


AFTER_COMMIT = "after_commit"


@contextmanager
def unit_of_work(factory: sessionmaker[Session]) -> Iterator[Session]:
    """One transaction: committed once if the block succeeds, rolled back if it raises.

    Callables queued with `after_commit` run once the commit has succeeded, never otherwise.
    """
    session = factory()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        callbacks = session.info.pop(AFTER_COMMIT, [])
        session.close()
    for callback in callbacks:
        callback()


def after_commit(session: Session, callback: Callable[[], None]) -> None:
    """Run `callback` when (and only if) the session's unit of work commits."""
    session.info.setdefault(AFTER_COMMIT, []).append(callback)
