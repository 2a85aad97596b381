"""Running a benchmark script once, as CI does: its JSON lines, once it has exited 0.

Shared by the benchmark tests. A PostgreSQL run must leave no scratch database behind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from tests.conftest import ADMIN_URL

BENCH = Path(__file__).resolve().parents[2] / "bench"
TIMEOUT_S = 300  # a busy 2-core machine; these runs take seconds

DATABASES = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]


def run_script(script: str, db: str, *options: str) -> list[dict[str, Any]]:
    """Run `bench/<script> --db <db> <options>`; its JSON lines, once it has exited 0."""
    records, pid = _run(script, "--db", db, "--postgres-url", ADMIN_URL, *options)
    if db == "postgres":
        assert leftover_databases(pid) == [], "the benchmark left its database behind"
    return records


def run_plain(script: str, *options: str) -> list[dict[str, Any]]:
    """Run `bench/<script> <options>`; its JSON lines, once it has exited 0."""
    records, _pid = _run(script, *options)
    return records


def _run(script: str, *options: str) -> tuple[list[dict[str, Any]], int]:
    """Run `bench/<script> <options>`; its JSON lines and its pid, once it has exited 0."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOVERNOR_")}
    with subprocess.Popen(
        [sys.executable, str(BENCH / script), *options],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        try:
            out, err = process.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate()
            pytest.fail(f"{script} ran over {TIMEOUT_S} s:\n{err[-3000:]}")
    assert process.returncode == 0, f"{script} exited {process.returncode}:\n{err[-3000:]}"
    records = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert records, f"{script} printed no JSON line:\n{out}"
    return records, process.pid


def leftover_databases(pid: int) -> list[str]:
    engine = create_engine(ADMIN_URL)
    try:
        with engine.connect() as connection:
            names = connection.execute(
                text("SELECT datname FROM pg_database WHERE datname LIKE :prefix"),
                {"prefix": f"gov_bench_{pid}_%"},
            )
            return [name for (name,) in names]
    finally:
        engine.dispose()
