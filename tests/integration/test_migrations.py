import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import JSON, Text, cast, insert, inspect, select

from governor.db import schema
from governor.db.engine import build_engine
from governor.db.tables import Base, BudgetRow, EventRow, PodRow
from governor.domain.model import BudgetState, Category, PodState, RateSource, Severity
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
    "signins",
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


BEFORE_CHECKED_INPUT = "b4e8d1a6c3f2"


def test_the_upgrade_makes_stored_events_servable(database_url: str) -> None:
    """Events stored before input was checked at the edge: a lone surrogate or a NUL (and, on
    SQLite, a NaN or a NUL in the message) made the whole event log answer 500."""
    schema.upgrade(database_url, BEFORE_CHECKED_INPUT)
    sqlite = database_url.startswith("sqlite")
    at = datetime(2026, 1, 1, tzinfo=UTC)
    stored = [
        ("bad evidence", {"k": "a\ud83d", "list": ["\x00", {"\udc00key": 1}], "ok": "\U0001f600"}),
        ("m\x00essage" if sqlite else "message", {"loss": float("nan")} if sqlite else {}),
        ("clean", {"emoji": "\U0001f600", "n": 2**62, "text": "tab\tnew\nline"}),
    ]
    engine = build_engine(database_url)
    try:
        with engine.begin() as connection:
            connection.execute(
                insert(EventRow),
                [
                    {
                        "at": at,
                        "severity": Severity.WARNING,
                        "category": Category.HARNESS,
                        "subject": "run:x",
                        "budget_id": None,
                        "message": message,
                        "evidence": evidence,
                    }
                    for message, evidence in stored
                ],
            )
        schema.upgrade(database_url)
        with engine.connect() as connection:
            rows = connection.execute(select(EventRow).order_by(EventRow.id)).all()
    finally:
        engine.dispose()
    served = [(r.message, r.evidence) for r in rows]
    for message, evidence in served:
        json.dumps([message, evidence], ensure_ascii=False, allow_nan=False).encode()
    assert served[0] == (
        "bad evidence",
        {"k": "a\ufffd", "list": ["\ufffd", {"\ufffdkey": 1}], "ok": "\U0001f600"},
    )
    assert served[1] == (("m\ufffdessage", {"loss": "nan"}) if sqlite else ("message", {}))
    assert served[2] == stored[2]


@pytest.mark.parametrize("command", [["migrate"], ["serve", "--port", "0"]])
def test_without_the_migrations_the_command_says_what_to_do_in_one_line(
    command: list[str], tmp_path: Path
) -> None:
    """An installed package, not a checkout: no traceback, one line naming the setting."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("GOVERNOR_")},
        "GOVERNOR_DATABASE_URL": f"sqlite:///{tmp_path / 'governor.db'}",
        "GOVERNOR_MIGRATIONS_DIR": str(tmp_path),  # no env.py there, as in site-packages
    }
    result = subprocess.run(
        [sys.executable, "-m", "governor", *command],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stdout) == (2, ""), result
    assert result.stderr == (
        f"governor: no database migrations at {tmp_path}: set GOVERNOR_MIGRATIONS_DIR to the "
        "migrations/ folder of the gpu-governor source, or run from a checkout of it\n"
    )


BEFORE_NAMES = "f4a5b6c7d8e9"


def stored_pod(at: datetime) -> dict[str, Any]:
    """The columns a running pod of budget bud_1 has stored, as a row inserted beneath the
    models (an id, a provider and a reference to be added)."""
    return {
        "budget_id": "bud_1",
        "hourly_rate_usd": Decimal(1),
        "rate_source": RateSource.DECLARED,
        "storage_gb": 0.0,
        "storage_usd_per_gb_month": Decimal(0),
        "stopped_storage_usd_per_gb_month": Decimal(0),
        "stop_latency_s": 0.0,
        "state": PodState.RUNNING,
        "accrued_until": at,
        "created_at": at,
    }


def test_the_upgrade_names_stored_pods_and_keeps_open_budget_names_apart(
    database_url: str,
) -> None:
    """Pods stored before they had names are named after their reference (with the provider
    where two providers' references meet in one budget); of open budgets that shared a name,
    the first keeps it and the others get their id added; a closed budget keeps its own."""
    schema.upgrade(database_url, BEFORE_NAMES)
    at = datetime(2026, 1, 1, tzinfo=UTC)
    budget = {
        "ceiling_usd": Decimal(100),
        "reserve_usd": Decimal(0),
        "storage_tail_hours": 0.0,
        "alert_thresholds": [50],
        "state": BudgetState.OPEN,
    }
    budgets = [
        {**budget, "id": "bud_1", "name": "pilot", "created_at": at},
        {**budget, "id": "bud_2", "name": "pilot", "created_at": at + timedelta(hours=1)},
        {**budget, "id": "bud_3", "name": "pilot", "state": BudgetState.CLOSED, "created_at": at},
    ]
    pod = stored_pod(at)
    pods = [
        {**pod, "id": "pod_1", "provider": "fake", "provider_ref": "h100-a"},
        {**pod, "id": "pod_2", "provider": "runpod", "provider_ref": "h100-a"},
        {**pod, "id": "pod_3", "provider": "fake", "provider_ref": "h100-b"},
        {**pod, "id": "pod_4", "provider": "vast", "provider_ref": "h100-b", "budget_id": "bud_2"},
    ]
    engine = build_engine(database_url)
    try:
        with engine.begin() as connection:
            connection.execute(insert(BudgetRow), budgets)
            connection.execute(insert(PodRow), pods)
        schema.upgrade(database_url)
        with engine.connect() as connection:
            budget_names = dict(connection.execute(select(BudgetRow.id, BudgetRow.name)).all())
            pod_names = dict(connection.execute(select(PodRow.id, PodRow.name)).all())
    finally:
        engine.dispose()
    assert budget_names == {"bud_1": "pilot", "bud_2": "pilot (bud_2)", "bud_3": "pilot"}
    assert pod_names == {
        "pod_1": "fake:h100-a",
        "pod_2": "runpod:h100-a",
        "pod_3": "h100-b",
        "pod_4": "h100-b",
    }


BEFORE_SQL_NULLS = "6d2e8f4a1b7c"


def test_the_upgrade_stores_absent_documents_as_sql_null_and_the_downgrade_restores_them(
    database_url: str,
) -> None:
    """A pod's GPUs that were never given were stored as a JSON `null`, decoded on every read:
    the upgrade makes them SQL NULL (a document that is there is kept), the governor writes
    them so from then on, and the downgrade stores them as before."""
    schema.upgrade(database_url, BEFORE_SQL_NULLS)
    at = datetime(2026, 1, 1, tzinfo=UTC)
    budget = {
        "id": "bud_1",
        "name": "pilot",
        "ceiling_usd": Decimal(100),
        "reserve_usd": Decimal(0),
        "storage_tail_hours": 0.0,
        "alert_thresholds": [50],
        "state": BudgetState.OPEN,
        "created_at": at,
    }
    pod = {**stored_pod(at), "provider": "fake"}
    stored_as_text = select(PodRow.id, cast(PodRow.gpu_uuids, Text)).order_by(PodRow.id)
    engine = build_engine(database_url)
    try:
        with engine.begin() as connection:
            connection.execute(insert(BudgetRow), budget)
            connection.execute(
                insert(PodRow),
                [
                    {
                        **pod,
                        "id": "pod_1",
                        "name": "a",
                        "provider_ref": "a",
                        "gpu_uuids": JSON.NULL,
                    },
                    {
                        **pod,
                        "id": "pod_2",
                        "name": "b",
                        "provider_ref": "b",
                        "gpu_uuids": ["GPU-1"],
                    },
                ],
            )
        with engine.connect() as connection:
            before = dict(connection.execute(stored_as_text).all())
        schema.upgrade(database_url)
        with engine.begin() as connection:
            upgraded = dict(connection.execute(stored_as_text).all())
            connection.execute(
                insert(PodRow),
                {**pod, "id": "pod_3", "name": "c", "provider_ref": "c", "gpu_uuids": None},
            )
            written = dict(connection.execute(stored_as_text).all())
        schema.downgrade(database_url, BEFORE_SQL_NULLS)
        with engine.connect() as connection:
            downgraded = dict(connection.execute(stored_as_text).all())
    finally:
        engine.dispose()
    listed = before["pod_2"]
    assert before == {"pod_1": "null", "pod_2": listed}
    assert json.loads(listed) == ["GPU-1"]
    assert upgraded == {"pod_1": None, "pod_2": listed}
    assert written == {"pod_1": None, "pod_2": listed, "pod_3": None}
    assert downgraded == {"pod_1": "null", "pod_2": listed, "pod_3": "null"}
