"""Engine and session factory builders, and the unit of work (one commit per request or tick).

SQLite allows one writer per database file. Left to itself, a second writer sleeps and
retries in SQLite's busy handler, so under load writers queue in their sleeps rather than in
line. Here the writers of one process take their turn through a lock instead, handed over
the moment the previous transaction ends; readers (`read_only`) never take it and, with WAL,
never wait for a writer. PostgreSQL needs neither: its row locks do the ordering.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, Final
from weakref import WeakKeyDictionary

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.exc import DisconnectionError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from governor.db.lean import Lean, raise_as_sqlalchemy

SQLITE_BUSY_TIMEOUT_MS = 30_000
READ_ONLY: Final = "governor_read_only"
ONE_STATEMENT = "governor_one_statement"  # SQLite: a read outside any transaction
PING_AFTER_IDLE_S = 1.0  # a pooled connection idle longer is pinged before it is lent
_RETURNED_AT = "governor_returned_at"
_CHANGES = ("INSERT", "UPDATE", "DELETE")


class _Written(threading.local):
    """This thread's statements that changed rows, and its transactions that committed them."""

    def __init__(self) -> None:
        self.statements = 0
        self.commits = 0


_written = _Written()


def committed_writes() -> int:
    """How many transactions this thread has committed that changed rows: compare two readings
    to learn whether a block of work wrote anything that committed (a transaction that only
    read, changed nothing or was empty commits even on a full disk, and counts for nothing)."""
    return _written.commits


@contextmanager
def _counted() -> Iterator[None]:
    """Around one transaction: a commit is counted if a statement of it changed rows."""
    before = _written.statements
    yield
    if _written.statements > before:
        _written.commits += 1


def _note_changes(
    _conn: Any, cursor: Any, statement: str, _params: Any, _context: Any, _many: bool
) -> None:
    # An unknown count (-1: a pipelined statement's, say) is taken to have changed rows.
    if cursor.rowcount != 0 and statement.lstrip()[:6].upper() in _CHANGES:
        _written.statements += 1


class _Turn:
    """Whose turn it is to write: one thread at a time, handed over in order of asking.

    A plain lock is not fair: a thread that releases it and asks again at once (a pass going
    on to its next batch) takes it back before a waiting thread wakes, and can keep it for a
    whole pass. Here a thread that finds the turn taken queues, and the turn is handed to the
    first in the queue when it ends."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: deque[threading.Lock] = deque()  # the waiting, each on a lock held for it
        self._taken = False
        self._owner: int | None = None

    @contextmanager
    def take(self) -> Iterator[None]:
        if self._owner == threading.get_ident():
            raise RuntimeError("this thread already has a unit of work open: finish it first")
        self._wait()
        self._owner = threading.get_ident()
        try:
            yield
        finally:
            self._owner = None
            self._hand_on()

    def _wait(self) -> None:
        with self._lock:
            if not self._taken:
                self._taken = True
                return
            handed = threading.Lock()
            handed.acquire()
            self._queue.append(handed)
        try:
            if handed.acquire(timeout=SQLITE_BUSY_TIMEOUT_MS / 1000):
                return
        except BaseException:  # interrupted: out of the queue, or the turn it got handed on
            if not self._leave(handed):
                self._hand_on()
            raise
        if not self._leave(handed):
            return  # handed over as the wait ran out: the turn is ours after all
        raise OperationalError(
            "BEGIN IMMEDIATE", None, TimeoutError("the database is busy: no turn to write")
        )

    def _leave(self, handed: threading.Lock) -> bool:
        """Leave the queue; False where the turn was handed over meanwhile."""
        with self._lock:
            if handed not in self._queue:
                return False
            self._queue.remove(handed)
            return True

    def _hand_on(self) -> None:
        """End a turn: the first in the queue has it, or no one."""
        with self._lock:
            if self._queue:
                self._queue.popleft().release()
            else:
                self._taken = False


_turns: WeakKeyDictionary[Engine, _Turn] = WeakKeyDictionary()


def build_engine(url: str, **kwargs: Any) -> Engine:
    """An engine for `url` (`kwargs` as for create_engine: `pool_size`, `max_overflow`, ...).

    SQLite gets WAL, foreign keys, a busy timeout and one writer at a time. Every statement
    that changes rows is counted (`committed_writes`)."""
    if url.startswith("sqlite"):
        engine = create_engine(
            url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}, **kwargs
        )
        _tune_sqlite(engine)
        _turns[engine] = _Turn()
    else:
        engine = create_engine(url, **kwargs)
        _ping_after_idle(engine)
    event.listen(engine, "after_cursor_execute", _note_changes)
    return engine


def one_writer(engine: Engine) -> bool:
    """The database takes one writer at a time (SQLite): a transaction that writes holds up
    every other writer of the process until it ends."""
    return engine in _turns


def _ping_after_idle(engine: Engine) -> None:
    """Ping a pooled connection before lending it only when it has been idle for more than
    PING_AFTER_IDLE_S: one that went stale while idle (a restart, an idle timeout) is replaced
    before a request uses it, and a connection lent on again at once, as under load, costs no
    round trip. A connection lost within the window fails its statement, and the engine then
    replaces every connection older than the loss, as it does for any disconnect."""

    @event.listens_for(engine, "connect")
    @event.listens_for(engine, "checkin")
    def _returned(_dbapi_connection: Any, record: Any) -> None:
        record.info[_RETURNED_AT] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _ping_if_idle(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        if time.monotonic() - record.info.get(_RETURNED_AT, 0.0) <= PING_AFTER_IDLE_S:
            return
        try:
            engine.dialect.do_ping(dbapi_connection)
        except engine.dialect.loaded_dbapi.Error as error:
            raise DisconnectionError(f"a pooled connection was lost while idle: {error}") from error


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
        # A writer takes the write lock up front: two transactions never read, then race to
        # write. A reader reads one snapshot and never blocks anyone.
        options = connection.get_execution_options()
        if options.get(ONE_STATEMENT, False):
            return  # the statement is a transaction of its own
        # Straight to the driver, as SQLAlchemy sends a BEGIN of its own: not a statement
        # of the transaction, and a third of the hot path's write on SQLite otherwise.
        begin = "BEGIN" if options.get(READ_ONLY, False) else "BEGIN IMMEDIATE"
        try:
            connection.connection.driver_connection.execute(begin)
        except connection.dialect.loaded_dbapi.Error as error:
            raise_as_sqlalchemy(connection, begin, (), error)


def session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(bind=engine, expire_on_commit=False)


AFTER_COMMIT = "after_commit"


@contextmanager
def _writer_turn(engine: Engine) -> Iterator[None]:
    """This process's turn to write, where the database has a single writer."""
    turn = _turns.get(engine)
    if turn is None:
        yield
        return
    with turn.take():
        yield


@contextmanager
def unit_of_work(factory: sessionmaker[Session]) -> Iterator[Session]:
    """One transaction: committed once if the block succeeds, rolled back if it raises.

    Callables queued with `after_commit` run once the commit has succeeded, never otherwise.
    """
    with _writer_turn(factory.kw["bind"]), _counted():
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


@contextmanager
def read_only(factory: sessionmaker[Session]) -> Iterator[Session]:
    """One transaction that only reads: one consistent snapshot, never a writer's turn.

    Whatever the block might write is rolled back, never committed.
    """
    session = factory()
    try:
        session.connection(execution_options={READ_ONLY: True})
        yield session
    finally:
        session.rollback()
        session.close()


@contextmanager
def writing(engine: Engine) -> Iterator[Connection]:
    """`unit_of_work` for plain statements (the hot path): a connection in one transaction,
    committed if the block succeeds, with no ORM session around it.

    On PostgreSQL the transaction is pipelined: BEGIN, the block's statements and COMMIT go
    to the server together and their results come back together, one round trip in all
    instead of one a statement. The block must therefore not read what its statements
    return, and a statement's error is raised when the block ends rather than where it ran;
    nothing of the transaction is committed either way."""
    with (
        _writer_turn(engine),
        _counted(),
        engine.connect() as connection,
        _pipelined(connection),
        connection.begin(),
    ):
        yield connection


# PostgreSQL: this transaction's commit does not wait for the disk (it is still atomic, and
# seen by every transaction after it); only a crash of the database server can undo it.
_NO_FLUSH_WAIT = Lean(text("SET LOCAL synchronous_commit TO OFF"))


def without_flush_wait(connection: Connection) -> None:
    """Let this `writing` transaction commit without waiting for the disk, for records a crash
    of the database server may lose without harm (a heartbeat's: the job's next beat writes
    them again). SQLite's commits in WAL mode with `synchronous=NORMAL` are all of this kind
    already; on PostgreSQL a commit then skips its flush of the write-ahead log, which its WAL
    writer does within a fraction of a second (three `wal_writer_delay`s at most)."""
    if connection.dialect.name == "postgresql":
        _NO_FLUSH_WAIT.execute(connection, {})


def _pipelined(connection: Connection) -> AbstractContextManager[object]:
    if connection.dialect.name != "postgresql":
        return nullcontext()
    # SQLAlchemy types driver_connection as optional (a pool record's, once let go); an open
    # Connection's is always there. The driver's connection is Any, so is its pipeline.
    driver = connection.connection.driver_connection
    return driver.pipeline()  # type: ignore[union-attr,no-any-return]


@contextmanager
def reading(engine: Engine) -> Iterator[Connection]:
    """A connection for one statement that reads (the hot path): no writer's turn, no ORM
    session. The statement runs outside a transaction, a snapshot of its own, which spares
    BEGIN and ROLLBACK (on PostgreSQL, their round trips); a block that needs two statements
    to agree uses `read_only`."""
    with engine.connect() as connection:
        if one_writer(engine):
            connection.execution_options(**{ONE_STATEMENT: True})
        else:
            connection.execution_options(isolation_level="AUTOCOMMIT")
        try:
            yield connection
        finally:
            connection.rollback()


def after_commit(session: Session, callback: Callable[[], None]) -> None:
    """Run `callback` when (and only if) the session's unit of work commits."""
    session.info.setdefault(AFTER_COMMIT, []).append(callback)
