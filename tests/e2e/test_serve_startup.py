"""`governor serve` on a fresh database: embedded SQLite sets itself up; PostgreSQL does not."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect

from governor.cli.serve import SWITCH_INTERVAL_S
from tests.conftest import reset_postgres
from tests.e2e.conftest import BASE_ENV, GovernorServer, clean_environ, free_port, ok

pytestmark = pytest.mark.e2e

GENERATED_TOKEN = re.compile(r"gov_op_[A-Za-z0-9_-]+")


def test_serve_sets_up_an_empty_sqlite_file_and_prints_a_generated_token_only_once(
    spawn: Callable[..., GovernorServer], tmp_path: Path
) -> None:
    database = tmp_path / "governor.db"
    database.touch()  # an empty file: no schema at all
    server = spawn(f"sqlite:///{database}", GOVERNOR_OPERATOR_TOKEN=None)

    server.start().wait_ready()  # ready means the schema is at head
    first = server.output()
    printed = GENERATED_TOKEN.findall(first)
    assert len(printed) == 1, f"expected one generated operator token in:\n{first}"
    token = printed[0]
    with server.client(token) as operator:
        ok(operator.get("/v1/budgets"))
    # uvicorn re-raises SIGTERM once it has shut down, so either exit status is a clean stop.
    assert server.terminate() in (0, -signal.SIGTERM), "serve did not stop on SIGTERM"

    server.start().wait_ready()
    second = server.output()
    assert "gov_op_" not in second, "the operator token was printed again"
    assert "Operator token" not in second
    with server.client(token) as operator:
        ok(operator.get("/v1/budgets"))  # the first start's token still works


@pytest.mark.postgres
def test_serve_refuses_an_empty_postgres_database_and_names_governor_migrate(
    tmp_path: Path,
) -> None:
    url = reset_postgres()
    env = {**clean_environ(), **BASE_ENV, "GOVERNOR_DATABASE_URL": url}
    result = subprocess.run(
        [sys.executable, "-m", "governor", "serve", "--port", str(free_port())],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )

    assert result.returncode != 0
    assert "governor migrate" in result.stderr, result.stderr
    engine = create_engine(url)
    try:
        assert inspect(engine).get_table_names() == [], "serve changed a server database"
    finally:
        engine.dispose()


SERVED_WITH = """
import gc, sys, uvicorn
from governor import cli
uvicorn.run = lambda app, **options: print(
    gc.get_freeze_count(), len(gc.get_objects()), sys.getswitchinterval()
)
sys.exit(cli.main(["serve", "--port", "0"]))
"""


def test_serve_sets_startup_aside_from_the_collector_and_shortens_the_switch_interval(
    tmp_path: Path,
) -> None:
    env = {**clean_environ(), **BASE_ENV, "GOVERNOR_DATABASE_URL": f"sqlite:///{tmp_path}/g.db"}
    result = subprocess.run(
        [sys.executable, "-c", SERVED_WITH],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
        check=True,
    )
    frozen, tracked, switch = result.stdout.split()[-3:]
    # by the time the server runs, startup's objects are out of the collector's way
    assert int(frozen) > 50_000 and int(tracked) < int(frozen) / 10, (frozen, tracked)
    # and a thread that computes hands the interpreter on ten times sooner than CPython's 5 ms
    assert float(switch) == SWITCH_INTERVAL_S < 0.005
