"""Shared fixtures: databases (SQLite file and the real PostgreSQL), a frozen clock."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text

from tests.clock import FrozenClock

POSTGRES_URL = os.environ.get(
    "GOVERNOR_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


def reset_postgres(url: str = POSTGRES_URL) -> str:
    """Empty the test database's public schema; fail loudly if PostgreSQL is not there."""
    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(text("DROP SCHEMA public CASCADE"))
            connection.execute(text("CREATE SCHEMA public"))
    except Exception as exc:
        pytest.fail(
            f"PostgreSQL is not reachable at {url} ({type(exc).__name__}). Start it, point "
            "GOVERNOR_TEST_POSTGRES_URL at one, or deselect these tests with -m 'not postgres'."
        )
    finally:
        engine.dispose()
    return url


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
