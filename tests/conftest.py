"""Shared fixtures: databases (SQLite file and the real PostgreSQL), a frozen clock."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import create_engine, make_url, text

from tests.clock import FrozenClock

SERVER_URL = os.environ.get(
    "GOVERNOR_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
# This suite's own database on that server, made at the first use and dropped when the suite
# ends: two suites on one machine never share a schema.
SUITE_DATABASE = f"governor_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
POSTGRES_URL = make_url(SERVER_URL).set(database=SUITE_DATABASE).render_as_string(False)
ADMIN_URL = make_url(SERVER_URL).set(database="postgres").render_as_string(False)
_created: list[str] = []


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
def near_now() -> FrozenClock:
    """A clock that moves only when told to, from the wall clock's time: for a fake cloud
    whose records mix its own clock with real time."""
    return FrozenClock(datetime.now(UTC))


def _admin(statement: str) -> None:
    engine = create_engine(ADMIN_URL, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            connection.execute(text(statement))
    finally:
        engine.dispose()


def reset_postgres() -> str:
    """This suite's PostgreSQL database, empty; fail loudly if PostgreSQL is not there."""
    try:
        if not _created:
            _admin(f'CREATE DATABASE "{SUITE_DATABASE}"')
            _created.append(SUITE_DATABASE)
        engine = create_engine(POSTGRES_URL)
        try:
            with engine.begin() as connection:
                connection.execute(text("DROP SCHEMA public CASCADE"))
                connection.execute(text("CREATE SCHEMA public"))
        finally:
            engine.dispose()
    except Exception as exc:
        pytest.fail(
            f"PostgreSQL is not usable at {ADMIN_URL} ({type(exc).__name__}: {exc}). Start it, "
            "point GOVERNOR_TEST_POSTGRES_URL at one, or deselect these tests with "
            "-m 'not postgres'."
        )
    return POSTGRES_URL


def pytest_sessionfinish() -> None:
    """Drop the suite's database, whatever its processes left connected."""
    if _created:
        _admin(f'DROP DATABASE IF EXISTS "{SUITE_DATABASE}" WITH (FORCE)')


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ]
)
def database_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """An empty database, once on a SQLite file and once on the real PostgreSQL."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('db') / 'governor.db'}"
    else:
        yield reset_postgres()


@pytest.fixture
def exact_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """The memory rules judged on the modeled peak alone: no family's measured error, so a
    test of a threshold or a term is not moved by the validation set's interval."""
    from governor.domain.preflight import calibration

    monkeypatch.setattr(calibration, "FAMILY_ERROR", {})
    monkeypatch.setattr(calibration, "POOLED_ERROR", 0.0)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The preflight model's error on its validation set, printed after every run."""
    from tests.preflight_cases.validation import CASES, judge, summary_lines

    terminalreporter.section("preflight memory model against published measurements")
    for line in summary_lines([judge(c) for c in CASES]):
        terminalreporter.line(line)
