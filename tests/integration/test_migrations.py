import os
import subprocess
import sys

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect

from governor.db import schema
from governor.db.engine import build_engine
from governor.db.tables import Base
from tests.conftest import reset_postgres

TABLES = {
    "budgets",
    "pods",
    "runs",
    "run_phases",
    "ledger_entries",
    "extensions",
    "stop_orders",
    "events",
    "tokens",
    "gpu_samples",
    "gpu_peaks",
    "plan_checks",
    "leases",
    "secrets",
}


def test_migrations_go_up_down_and_up_again(database_url: str) -> None:
    engine = build_engine(database_url)
    try:
        assert schema.schema_status(engine).empty
        schema.upgrade(database_url)
        assert schema.schema_status(engine).at_head
        assert set(inspect(engine).get_table_names()) >= TABLES

        schema.downgrade(database_url, "base")
        assert schema.schema_status(engine).empty
        assert not TABLES & set(inspect(engine).get_table_names())

        schema.upgrade(database_url)
        assert schema.schema_status(engine).at_head
    finally:
        engine.dispose()


def test_the_migrations_match_the_tables(database_url: str) -> None:
    schema.upgrade(database_url)
    engine = build_engine(database_url)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            assert compare_metadata(context, Base.metadata) == []
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_two_migrations_at_once_take_turns() -> None:
    """Replicas' init containers may migrate together on PostgreSQL: the second waits for
    the first, then finds the schema at head (SQLite is migrated by its one process)."""
    database_url = reset_postgres()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("GOVERNOR_")},
        "GOVERNOR_DATABASE_URL": database_url,
    }
    command = [sys.executable, "-m", "governor", "migrate"]
    both = [
        subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=180)[0].decode() for p in both]
    assert [p.returncode for p in both] == [0, 0], "\n".join(outputs)
    engine = build_engine(database_url)
    try:
        assert schema.schema_status(engine).at_head
    finally:
        engine.dispose()
