"""`governor plan check`: offline, on a plan of several GPU models (preflight-plan/0.2), a
memory line and a cost line per model, and each reason about one model names it; with --pod,
the server's verdict on the pod's budget, asked over HTTP."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from governor.cli import run_command
from governor.cli.parser import build_parser
from governor.domain.preflight.rules import admit
from governor.services.plans.document import PlanIn
from tests.plans import gpu_groups, variant, write
from tests.unit.cli.scripted import BUDGET_ID, POD_ID, TOKEN, Governor, body, pod_out


def test_plan_check_prints_a_line_per_gpu_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    today = datetime.now(UTC).date().isoformat()
    doc = variant(
        {
            **gpu_groups(
                {"gpu_type": "H200", "gpu_count": 1, "rate_usd_per_gpu_hour": 4.59},
                {"gpu_type": "A100-40GB", "gpu_count": 1, "rate_usd_per_gpu_hour": 1.29},
            ),
            "hardware.rate_quoted_at": today,
        }
    )
    args = build_parser().parse_args(["plan", "check", str(write(doc, tmp_path / "plan.json"))])
    assert run_command(args) == 2  # no_go
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "NO_GO: pilot-gemma3-lora-001 on 1 x A100-40GB + 1 x H200"
    assert out[1:4] == [
        "memory, per GPU model (the tightest first):",
        "  1 x A100-40GB: 61.6 GiB modeled per GPU of 39.4 GiB usable (156%): no_go",
        "  1 x H200: 61.6 GiB modeled per GPU of 139.7 GiB usable (44%): go",
    ]
    assert "  1 x H200 at $4.59/GPU-hour: $51.87 at max hours" in out
    assert "  1 x A100-40GB at $1.29/GPU-hour: $14.58 at max hours" in out
    fits = [line for line in out if "memory_fit" in line]
    assert fits[0].startswith("  [no_go] memory_fit (A100-40GB): Modeled peak 61.6 GiB")
    assert fits[1].startswith("  [go] memory_fit (H200): Modeled peak 61.6 GiB")
    assert any(line.startswith("  [go] cost_fit: ") for line in out)  # about the whole plan


def on_the_server(doc: dict[str, Any], remaining_usd: str) -> dict[str, Any]:
    """The verdict the server keeps for `doc` on a pod's budget, as its API answers it."""
    plan = PlanIn.model_validate(doc).to_plan()
    verdict = admit(plan, datetime.now(UTC).date(), Decimal(remaining_usd)).as_json()
    return {**verdict, "id": "pln_00000000000000a1", "job_id": doc["job_id"]}


def test_plan_check_on_a_pod_asks_the_server_about_that_pods_budget(
    governor: Governor, tmp_path: Path
) -> None:
    doc = variant({"hardware.rate_quoted_at": datetime.now(UTC).date().isoformat()})
    verdict = on_the_server(doc, "500")
    governor.has("/v1/pods", pod_out())
    governor.answer("GET", f"/v1/pods/{POD_ID}", pod_out())
    governor.answer("POST", f"/v1/budgets/{BUDGET_ID}/plans", verdict, status=201)
    ran = governor.run("plan", "check", str(write(doc, tmp_path / "plan.json")), "--pod", "gpu-a")
    assert ran.sent == [
        ("GET", "/v1/pods?name=gpu-a&limit=1000"),
        ("GET", f"/v1/pods/{POD_ID}"),
        ("POST", f"/v1/budgets/{BUDGET_ID}/plans?pod_id={POD_ID}"),
    ]
    assert body(ran.last) == doc  # the document as it was written
    assert ran.last.headers["authorization"] == f"Bearer {TOKEN}"
    assert (ran.code, ran.err) == (0, "")  # go
    out = ran.out.splitlines()
    assert out[0] == (
        f"GO: pilot-gemma3-lora-001 on pod gpu-a (plan pln_00000000000000a1, kept with budget "
        f"{BUDGET_ID}), 1 x H200"
    )
    assert out[1:3] == [
        "memory: 60.6 GiB modeled per GPU of 139.7 GiB usable (43%)",
        "cost:   worst case $65.20, expected $39.95; $450.00 available",
    ]


def test_plan_check_on_a_pod_exits_with_the_servers_verdict_and_prints_its_json(
    governor: Governor, tmp_path: Path
) -> None:
    doc = variant({"hardware.rate_quoted_at": datetime.now(UTC).date().isoformat()})
    verdict = on_the_server(doc, "0.01")
    governor.answer("GET", f"/v1/pods/{POD_ID}", pod_out())
    governor.answer("POST", f"/v1/budgets/{BUDGET_ID}/plans", verdict, status=201)
    file = str(write(doc, tmp_path / "plan.json"))
    ran = governor.run("plan", "check", file, "--pod", POD_ID, "--json")
    assert ran.code == 2  # no_go: not the money for it
    assert json.loads(ran.out) == verdict


def test_an_invalid_plan_is_refused_before_the_server_is_asked(
    governor: Governor, tmp_path: Path
) -> None:
    file = tmp_path / "plan.json"
    file.write_text('{"schema": "preflight-plan/0.1"}')
    ran = governor.run("plan", "check", str(file), "--pod", "gpu-a")
    assert (ran.code, ran.out, ran.requests) == (3, "", [])
    assert f"governor plan check: {file}: job_id: " in ran.err
