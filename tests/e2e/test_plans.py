"""Preflight plans over real HTTP, and `governor plan check` as a command.

The server judges a plan against the budget's money left and keeps the verdict; a bad plan
is a 422 naming the field; a job token works only for its own budget. The command gives the
same verdict offline, with no server, and says it in its exit code.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from governor.fakes.nvml import uuid_for
from tests.e2e.conftest import (
    OPERATOR_TOKEN,
    GovernorServer,
    ServerFactory,
    assert_error,
    clean_environ,
    create_run,
    declare_budget,
    fresh,
    ok,
    register_pod,
    submit,
    wait_for,
)
from tests.plans import EXAMPLE_FILE, write

pytestmark = pytest.mark.e2e

A100_40 = {
    "hardware.gpu_type": "A100-40GB",
    "hardware.usable_mib_per_gpu": 40_960,
    "memory_per_gpu_gib.fragmentation_margin": 1.98,
}


def test_a_plan_gets_a_verdict_with_its_reasons_and_is_kept(
    server: GovernorServer, operator: httpx.Client
) -> None:
    budget = declare_budget(operator, "500")
    go = ok(submit(operator, budget["id"], fresh()), 201)
    assert go["verdict"] == "go"
    assert go["budget_id"] == budget["id"]
    assert go["job_id"] == "pilot-gemma3-lora-001"
    assert go["cost"]["worst_case_usd"] == "65.204859"
    assert (go["cost"]["remaining_usd"], go["cost"]["available_usd"]) == ("500.00", "450.00")
    assert go["memory"]["modeled_gib"] == 60.64
    assert {r["rule"]: r["verdict"] for r in go["reasons"]}["memory_fit"] == "go"
    assert go["plan"]["schema"] == "preflight-plan/0.1"

    no_go = ok(submit(operator, budget["id"], fresh(A100_40)), 201)
    assert no_go["verdict"] == "no_go"
    fit = next(r for r in no_go["reasons"] if r["verdict"] == "no_go")
    assert fit["rule"] == "memory_fit"
    assert fit["evidence"]["ratio"] > 1.2

    viewer_token = ok(operator.post("/v1/tokens", json={"role": "viewer"}), 201)["token"]
    with server.client(viewer_token) as viewer:
        listed = ok(viewer.get(f"/v1/budgets/{budget['id']}/plans"))["items"]
        assert_error(submit(viewer, budget["id"], fresh()), 403)
    assert [(p["id"], p["verdict"]) for p in listed] == [(go["id"], "go"), (no_go["id"], "no_go")]
    assert listed[0] == go

    events = ok(operator.get("/v1/events", params={"budget_id": budget["id"]}))["items"]
    assert {e["subject"] for e in events} >= {f"plan:{go['id']}", f"plan:{no_go['id']}"}
    assert_error(operator.get("/v1/budgets/bud_missing/plans"), 404)


BAD_PLANS = [
    ({"memory_per_gpu_gib.logits_peak": "lots"}, "memory_per_gpu_gib.logits_peak"),
    ({"hardware.rate_usd_per_gpu_hour": -4.59}, "hardware.rate_usd_per_gpu_hour"),
    ({"training.ce_impl": "fast"}, "training.ce_impl"),
    ({"phases.2.max_hours": 1}, "phases.2"),  # under its expected 6 hours
    ({"hardware.rate_quoted_at": "last week"}, "hardware.rate_quoted_at"),
]


def test_a_bad_plan_is_a_422_naming_the_field(
    server: GovernorServer, operator: httpx.Client
) -> None:
    budget = declare_budget(operator, "500")
    for changes, field in BAD_PLANS:
        error = assert_error(submit(operator, budget["id"], fresh(changes, total=False)), 422)
        assert error["message"].startswith(f"{field}: "), error
    missing = fresh()
    del missing["memory_per_gpu_gib"]["weights"]
    error = assert_error(submit(operator, budget["id"], missing), 422)
    assert error["message"] == "memory_per_gpu_gib.weights: Field required"
    assert ok(operator.get(f"/v1/budgets/{budget['id']}/plans"))["items"] == []


def test_a_job_token_checks_plans_for_its_own_budget_only(
    server: GovernorServer, operator: httpx.Client
) -> None:
    mine, other = declare_budget(operator, "500"), declare_budget(operator, "500", name="other")
    pod = register_pod(operator, mine["id"])
    run = create_run(operator, mine["id"], pod["id"], heartbeat_timeout_s=600)
    with server.client(run["token"]) as job:
        assert_error(submit(job, other["id"], fresh()), 403)
        own = ok(submit(job, mine["id"], fresh()), 201)
        assert_error(job.get(f"/v1/budgets/{mine['id']}/plans"), 403)  # listing is for viewers
    assert own["verdict"] == "go"
    assert ok(operator.get(f"/v1/budgets/{other['id']}/plans"))["items"] == []


def test_a_no_go_plan_refuses_pods_and_runs_until_an_operator_overrides_it(
    server: GovernorServer, operator: httpx.Client
) -> None:
    budget = declare_budget(operator, "500")
    no_go = ok(submit(operator, budget["id"], fresh(A100_40)), 201)
    body = {"provider": "fake", "provider_ref": "pod-1", "plan_id": no_go["id"]}
    refused = assert_error(operator.post(f"/v1/budgets/{budget['id']}/pods", json=body), 409)
    assert "is no_go" in refused["message"] and "override" in refused["message"]
    assert ok(operator.get(f"/v1/budgets/{budget['id']}"))["spent_usd"] == "0.00"

    path = f"/v1/budgets/{budget['id']}/plans/{no_go['id']}/override"
    reason = {"reason": "measured 38 GiB on this card last week"}
    overridden = ok(operator.post(path, json=reason))
    assert overridden["override_reason"] == reason["reason"]
    pod = ok(operator.post(f"/v1/budgets/{budget['id']}/pods", json=body), 201)
    assert pod["plan_id"] == no_go["id"]
    create_run(operator, budget["id"], pod["id"])
    report = operator.get(f"/v1/budgets/{budget['id']}/report", params={"format": "md"})
    assert f"no_go (overridden: {reason['reason']})" in report.text

    admitted = ok(operator.get(f"/v1/budgets/{budget['id']}/plans/admitted"))["items"]
    assert [(a["plan"]["id"], a["released"]) for a in admitted] == [(no_go["id"], False)]
    ok(operator.delete(f"/v1/budgets/{budget['id']}/plans/{no_go['id']}"))
    assert ok(operator.get(f"/v1/budgets/{budget['id']}/plans/admitted"))["items"] == []
    again = {**body, "provider_ref": "pod-2"}
    withdrawn = assert_error(operator.post(f"/v1/budgets/{budget['id']}/pods", json=again), 409)
    assert "withdrawn" in withdrawn["message"]


# 44.9 GiB modeled per GPU, judged at its upper edge (QLoRA's ±29%): 58.0 GiB, more than the
# busy GPU 0 has free (49.6), less than GPU 1 has (60.1)
SHARED_FIT = {"training.seq_len": 3584, "memory_per_gpu_gib.logits_peak": 12.3}


def test_a_plan_checked_on_a_pod_names_the_gpu_that_has_room(
    start_server: ServerFactory, tmp_path: Path
) -> None:
    server = start_server(GOVERNOR_FAKE_NVML="shared", GOVERNOR_TELEMETRY_INTERVAL_S="0.3")
    with server.client() as operator:
        budget = declare_budget(operator, "500")
        pod = register_pod(operator, budget["id"], "shared-box", local=True)
        wait_for(
            lambda: len(ok(operator.get(f"/v1/pods/{pod['id']}"))["telemetry"]["gpus"]) == 2,
            "both local GPUs sampled",
        )
        checked = operator.post(
            f"/v1/budgets/{budget['id']}/plans",
            json=fresh(SHARED_FIT),
            params={"pod_id": pod["id"]},
        )
        verdict = ok(checked, 201)
    placement = next(r for r in verdict["reasons"] if r["rule"] == "placement")
    assert verdict["verdict"] == placement["verdict"] == "go"
    fits = {g["uuid"]: g["fits"] for g in placement["evidence"]["gpus"]}
    assert fits == {uuid_for(0): False, uuid_for(1): True}
    assert f"GPU 1 {uuid_for(1)}" in placement["message"]

    two = write(fresh({**SHARED_FIT, "hardware.gpu_count": 2}), tmp_path / "two.json")
    answered = subprocess.run(
        [sys.executable, "-m", "governor", "plan", "check", str(two), "--pod", pod["id"]],
        env={
            **clean_environ(),
            "GOVERNOR_URL": server.url,
            "GOVERNOR_OPERATOR_TOKEN": OPERATOR_TOKEN,
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert answered.returncode == 2, answered.stderr  # no_go: one GPU has room, two needed
    assert "[no_go] placement: Only 1 of the pod's 2 GPUs" in answered.stdout


# --- governor plan check: offline, no server -------------------------------------------


def plan_check(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "governor", "plan", "check", *map(str, args)],
        env=clean_environ(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_plan_check_says_go_with_exit_0(tmp_path: Path) -> None:
    result = plan_check(write(fresh(), tmp_path / "plan.json"), "--remaining-usd", "500")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("GO: pilot-gemma3-lora-001 on 1 x H200")
    assert "worst case $65.20, expected $39.95; $450.00 available" in result.stdout
    assert "[go] memory_fit: Modeled peak 60.6 GiB per GPU is 43%" in result.stdout


def test_the_example_plan_the_readme_points_to_checks_go() -> None:
    result = plan_check(EXAMPLE_FILE, "--remaining-usd", "450")  # as the README shows it
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("GO: pilot-gemma3-lora-001 on 1 x H200")
    assert "[go] cost_fit:" in result.stdout and "$405.00 available" in result.stdout


def test_plan_check_says_no_go_with_exit_2_and_every_reason(tmp_path: Path) -> None:
    path = write(fresh(A100_40), tmp_path / "plan.json")
    result = plan_check(path)
    assert result.returncode == 2, result.stderr
    assert result.stdout.startswith("NO_GO:")
    assert "[no_go] memory_fit:" in result.stdout
    assert "[go] cost_fit:" in result.stdout and "not checked against a budget" in result.stdout

    as_json = plan_check(path, "--json", "--remaining-usd", "60")
    assert as_json.returncode == 2
    verdict = json.loads(as_json.stdout)
    assert verdict["verdict"] == "no_go"
    assert {r["rule"]: r["verdict"] for r in verdict["reasons"]}["cost_fit"] == "no_go"
    assert verdict["cost"]["available_usd"] == "40.00"


def test_plan_check_says_canary_only_with_exit_1(tmp_path: Path) -> None:
    # 115.7 GiB modeled (82%), 129.5 GiB (92%) on the long-context upper edge: fits, unproven
    tight = fresh({"memory_per_gpu_gib.transients": [{"name": "eval_logits_accum", "gib": 55.0}]})
    result = plan_check(write(tight, tmp_path / "plan.json"))
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.startswith("CANARY_ONLY:")


def test_plan_check_refuses_an_invalid_plan_file_with_exit_3(tmp_path: Path) -> None:
    bad = fresh({"training.seq_len": 0})
    result = plan_check(write(bad, tmp_path / "plan.json"))
    assert result.returncode == 3
    assert "training.seq_len: Input should be greater than or equal to 1" in result.stderr
    assert plan_check(tmp_path / "missing.json").returncode == 3
    (tmp_path / "broken.json").write_text("{")
    broken = plan_check(tmp_path / "broken.json")
    assert (broken.returncode, "Invalid JSON" in broken.stderr) == (3, True)
    assert plan_check(tmp_path / "plan.json", "--remaining-usd", "lots").returncode == 3
