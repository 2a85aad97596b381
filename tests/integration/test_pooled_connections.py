"""PostgreSQL connections as the hot path takes them from the pool: pinged only after they
were idle, and a heartbeat's read outside any transaction."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy import Engine, Integer, create_engine, exc, text

from governor.db import engine as engine_module
from governor.db.engine import build_engine, reading, writing
from governor.db.lean import Lean
from tests.conftest import ADMIN_URL, reset_postgres

pytestmark = pytest.mark.postgres


@pytest.fixture
def engine() -> Iterator[Engine]:
    engine = build_engine(reset_postgres(), pool_size=1, max_overflow=0)
    try:
        yield engine
    finally:
        engine.dispose()


def backend_pid(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(connection.scalar(text("SELECT pg_backend_pid()")))


def terminate(pid: int) -> None:
    """End a server process from outside, as a restart or an idle timeout would."""
    admin = create_engine(ADMIN_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text("SELECT pg_terminate_backend(:pid, 5000)"), {"pid": pid})
    finally:
        admin.dispose()


@pytest.fixture
def lost(engine: Engine) -> int:
    """The server process of the pool's one connection, ended while the connection idles."""
    pid = backend_pid(engine)
    terminate(pid)
    return pid


def test_a_connection_lost_while_idle_is_replaced_before_a_statement_uses_it(
    engine: Engine, lost: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine_module, "PING_AFTER_IDLE_S", 0.0)  # every connection idle long

    assert backend_pid(engine) != lost  # no error: the ping found it gone and it was replaced


def test_a_connection_lent_again_at_once_is_not_pinged_and_a_loss_costs_one_statement(
    engine: Engine, lost: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine_module, "PING_AFTER_IDLE_S", 3600.0)  # nothing idle long enough

    with pytest.raises(exc.OperationalError) as raised:  # no ping: the statement met the loss
        backend_pid(engine)
    assert raised.value.connection_invalidated
    assert backend_pid(engine) != lost  # and the next one gets a fresh connection


def test_a_heartbeat_read_runs_outside_a_transaction(engine: Engine) -> None:
    with reading(engine) as connection:
        assert connection.scalar(text("SELECT 1")) == 1
        status = connection.connection.driver_connection.info.transaction_status
    assert status is psycopg.pq.TransactionStatus.IDLE  # no BEGIN sent, no ROLLBACK owed
    with engine.connect() as connection:  # the connection goes back to transactions after
        connection.execute(text("SELECT 1"))
        status = connection.connection.driver_connection.info.transaction_status
        assert status is psycopg.pq.TransactionStatus.INTRANS


def test_a_pipelined_write_that_meets_a_lost_connection_fails_as_a_refusal(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a group of beats meets when the database goes away as it is written: the error
    the group commit takes for the database's refusal (fails the group whole, at once), and
    the write after it goes through on a fresh connection."""
    monkeypatch.setattr(engine_module, "PING_AFTER_IDLE_S", 3600.0)
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE IF NOT EXISTS beats (n int)"))

    def write(n: int) -> None:
        with writing(engine) as connection:
            connection.execute(text("INSERT INTO beats VALUES (:n)"), {"n": n})

    terminate(backend_pid(engine))
    with pytest.raises(exc.OperationalError):
        write(1)
    write(2)
    with engine.connect() as connection:
        assert connection.scalars(text("SELECT n FROM beats")).all() == [2]


def test_a_lean_statement_that_meets_a_lost_connection_lets_it_go(
    engine: Engine, lost: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The heartbeat's statements run on the driver's cursor meet a loss as SQLAlchemy's do:
    the error says so and the next statement gets a fresh connection."""
    monkeypatch.setattr(engine_module, "PING_AFTER_IDLE_S", 3600.0)
    pid = Lean(text("SELECT pg_backend_pid() AS pid").columns(pid=Integer))

    with pytest.raises(exc.OperationalError) as raised, reading(engine) as connection:
        pid.execute(connection, {})
    assert raised.value.connection_invalidated
    with reading(engine) as connection:
        [row] = pid.execute(connection, {})
    assert row.pid != lost
