"""`governor costs export` in its own process against a real server over HTTP: the FOCUS file
it writes, CSV and Parquet, adds up to what the budget's report says was spent."""

from __future__ import annotations

import csv
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest

from governor.render.focus import COLUMNS
from tests.e2e.conftest import GovernorServer, ok, wait_pod_stopped
from tests.e2e.test_cli_verbs import as_json, governor, succeeds

pytestmark = pytest.mark.e2e


def test_an_export_written_by_the_command_line_adds_up_to_the_report(
    spawn: Callable[..., GovernorServer], tmp_path: Path
) -> None:
    import pyarrow.parquet as pq

    server = spawn(f"sqlite:///{tmp_path / 'governor.db'}").start().wait_ready()
    url = server.url
    budget = as_json(url, "budget", "declare", "pilot", "--ceiling", "100000")
    pod = as_json(url, "pod", "add", "pilot", "--provider", "fake", "--ref", "focus-1")
    succeeds(url, "pod", "stop", pod["id"], "--reason", "measured enough")
    with server.client() as operator:
        wait_pod_stopped(operator, pod["id"])
        report = ok(operator.get(f"/v1/budgets/{budget['id']}/report"))
    spent = Decimal(report["spend"]["spent_usd"])
    assert spent > 0

    target = tmp_path / "costs.csv"
    said = succeeds(url, "costs", "export", "--budget", "pilot", "-o", str(target))
    assert said == f"wrote {target.stat().st_size} bytes to {target}\n"
    with target.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows and list(rows[0]) == list(COLUMNS)
    assert sum(Decimal(r["BilledCost"]) for r in rows) == spent
    assert {r["ResourceId"] for r in rows} == {"focus-1"}

    parquet = tmp_path / "costs.parquet"
    succeeds(url, "costs", "export", "--format", "parquet", "-o", str(parquet))
    billed = pq.read_table(parquet).column("BilledCost").to_pylist()
    assert round(Decimal(str(sum(billed))), 2) == round(spent, 2)

    refused = governor(url, "costs", "export", "--from", "2026-01-01T00:30:00Z")
    assert refused.returncode == 1 and "whole UTC hour" in refused.stderr
