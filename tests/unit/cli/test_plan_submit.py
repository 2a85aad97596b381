"""`governor plan submit`: the server's verdict on a plan against a budget, kept there; its
plan id is what `pod add --plan` names."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.plans import variant, write
from tests.unit.cli.scripted import (
    BUDGET_ID,
    POD_ID,
    TOKEN,
    Governor,
    body,
    budget_out,
    error,
    pod_out,
)
from tests.unit.cli.test_plan_check import on_the_server


def _doc() -> dict[str, object]:
    return variant({"hardware.rate_quoted_at": datetime.now(UTC).date().isoformat()})


def test_submit_asks_the_server_about_the_named_budget_and_prints_the_plans_id(
    governor: Governor, tmp_path: Path
) -> None:
    doc = _doc()
    governor.has("/v1/budgets", budget_out())
    governor.answer("POST", f"/v1/budgets/{BUDGET_ID}/plans", on_the_server(doc, "500"), status=201)
    file = str(write(doc, tmp_path / "plan.json"))
    ran = governor.run("plan", "submit", file, "--budget", "pilot")
    assert ran.sent == [
        ("GET", "/v1/budgets?name=pilot&limit=1000"),
        ("POST", f"/v1/budgets/{BUDGET_ID}/plans"),
    ]
    assert body(ran.last) == doc  # the document as it was written
    assert ran.last.headers["authorization"] == f"Bearer {TOKEN}"
    assert (ran.code, ran.err) == (0, "")  # go
    assert ran.out.splitlines()[0] == (
        f"GO: pilot-gemma3-lora-001 (plan pln_00000000000000a1, kept with budget {BUDGET_ID}), "
        "1 x H200"
    )


def test_submit_with_a_pod_also_judges_its_gpus_and_exits_with_the_verdict(
    governor: Governor, tmp_path: Path
) -> None:
    doc = _doc()
    verdict = on_the_server(doc, "0.01")
    governor.answer("GET", f"/v1/pods/{POD_ID}", pod_out())
    governor.answer("POST", f"/v1/budgets/{BUDGET_ID}/plans", verdict, status=201)
    file = str(write(doc, tmp_path / "plan.json"))
    ran = governor.run("plan", "submit", file, "--budget", BUDGET_ID, "--pod", POD_ID, "--json")
    assert ran.sent == [
        ("GET", f"/v1/pods/{POD_ID}"),
        ("POST", f"/v1/budgets/{BUDGET_ID}/plans?pod_id={POD_ID}"),
    ]
    assert ran.code == 2  # no_go: not the money for it
    assert json.loads(ran.out) == verdict


def test_submit_says_when_the_server_could_not_be_asked(governor: Governor, tmp_path: Path) -> None:
    governor.always = error(404, "not_found", f"no budget '{BUDGET_ID}'")
    file = str(write(_doc(), tmp_path / "plan.json"))
    ran = governor.run("plan", "submit", file, "--budget", BUDGET_ID)
    assert (ran.code, ran.out) == (4, "")
    assert ran.err.startswith("governor plan submit: the server answered 404: no budget")


def test_an_invalid_plan_is_not_submitted(governor: Governor, tmp_path: Path) -> None:
    file = tmp_path / "plan.json"
    file.write_text('{"schema": "preflight-plan/0.1"}')
    ran = governor.run("plan", "submit", str(file), "--budget", "pilot")
    assert (ran.code, ran.out, ran.requests) == (3, "", [])
    assert f"governor plan submit: {file}: job_id: " in ran.err


def test_submit_needs_a_budget(governor: Governor, tmp_path: Path) -> None:
    file = str(write(_doc(), tmp_path / "plan.json"))
    with pytest.raises(SystemExit) as usage:
        governor.run("plan", "submit", file)
    assert usage.value.code == 3  # a usage error, as an invalid plan
    assert "--budget" in governor.capsys.readouterr().err
