"""`governor run create|list|show|acknowledge`: the request each sends, and what it prints."""

from __future__ import annotations

import pytest

from tests.unit.cli.scripted import (
    BUDGET_ID,
    POD_ID,
    RUN_ID,
    Governor,
    body,
    budget_out,
    page,
    pod_out,
    run_out,
)

SHOWN = f"""\
id                 {RUN_ID}
name               sft
budget             {BUDGET_ID}
pod                {POD_ID}
status             running
attempt            1
phase              training
step               1,200 / 10,000
last heartbeat     2026-04-01T10:00:00+00:00
checkpoint         step 1,000, /ckpt/1000
directive          continue
heartbeat timeout  120 s
checkpoint grace   0.5 s
ended at           -
acknowledged       -
"""


def test_create_finds_the_pod_within_the_budget_and_prints_the_job_token_once(
    governor: Governor,
) -> None:
    governor.has("/v1/budgets", budget_out())
    elsewhere = pod_out(id="pod_00000000000000b9", budget_id="bud_00000000000000a9")
    governor.has("/v1/pods", pod_out(), elsewhere)  # the same name in another budget
    governor.answer("POST", f"/v1/budgets/{BUDGET_ID}/runs", run_out(token="gov_job_1"), status=201)
    ran = governor.run(
        "run", "create", "pilot", "--pod", "gpu-a", "--name", "sft", "--total-steps", "10000",
        "--heartbeat-timeout-s", "120", "--checkpoint-grace-s", "0.5",
    )  # fmt: skip
    assert ran.sent == [
        ("GET", "/v1/budgets?name=pilot&limit=1000"),
        ("GET", f"/v1/pods?name=gpu-a&budget_id={BUDGET_ID}&limit=1000"),
        ("POST", f"/v1/budgets/{BUDGET_ID}/runs"),
    ]
    assert body(ran.last) == {
        "name": "sft",
        "pod_id": POD_ID,
        "total_steps": 10000,
        "heartbeat_timeout_s": 120.0,
        "checkpoint_grace_s": 0.5,
    }
    assert ran.code == 0
    assert ran.out == SHOWN + "\nThe job's token (shown once; give it to the job):\n  gov_job_1\n"


def test_create_names_the_budget_a_pod_was_not_found_in(governor: Governor) -> None:
    governor.has("/v1/pods")
    ran = governor.run("run", "create", BUDGET_ID, "--pod", "gpu-z", "--name", "sft")
    assert (ran.code, ran.out) == (1, "")
    assert ran.err == (
        f"governor: no pod named 'gpu-z' in budget {BUDGET_ID}; 'governor pod list' shows them\n"
    )


def test_show_prints_the_run(governor: Governor) -> None:
    governor.has("/v1/runs", run_out())
    governor.answer("GET", f"/v1/runs/{RUN_ID}", run_out())
    ran = governor.run("run", "show", "sft")
    assert ran.sent == [("GET", "/v1/runs?name=sft&limit=1000"), ("GET", f"/v1/runs/{RUN_ID}")]
    assert (ran.code, ran.out) == (0, SHOWN)


def test_show_of_a_run_told_to_save_without_a_checkpoint_or_total(governor: Governor) -> None:
    saving = run_out(
        total_steps=None, checkpoint=None, directive={"action": "checkpoint", "reason": "ceiling"}
    )
    governor.answer("GET", f"/v1/runs/{RUN_ID}", saving)
    out = governor.run("run", "show", RUN_ID).out
    assert "step               1,200\n" in out and "checkpoint         -\n" in out
    assert "directive          checkpoint ceiling\n" in out


@pytest.mark.parametrize(
    ("argv", "query"),
    [
        ((), "limit=100"),
        (("--state", "running", "--cursor", "c1"), "status=running&limit=100&cursor=c1"),
    ],
)
def test_list_names_budgets_and_pods(governor: Governor, argv: tuple[str, ...], query: str) -> None:
    governor.has("/v1/budgets", budget_out())
    governor.has("/v1/pods", pod_out())
    governor.answer("GET", "/v1/runs", page(run_out()))
    ran = governor.run("run", "list", *argv)
    assert ran.sent == [
        ("GET", f"/v1/runs?{query}"),
        ("GET", "/v1/budgets?limit=1000"),
        ("GET", "/v1/pods?limit=1000"),
    ]
    assert ran.out.splitlines() == [
        "id                    name  budget  pod    status   phase               step  "
        "last heartbeat",
        f"{RUN_ID}  sft   pilot   gpu-a  running  training  1,200 / 10,000  "
        "2026-04-01T10:00:00+00:00",
    ]


def test_list_within_a_budget_names_only_its_pods(governor: Governor) -> None:
    governor.has("/v1/budgets", budget_out())
    governor.has("/v1/pods", pod_out())
    governor.answer("GET", "/v1/runs", page())
    ran = governor.run("run", "list", "--budget", "pilot")
    assert ran.sent == [
        ("GET", "/v1/budgets?name=pilot&limit=1000"),
        ("GET", f"/v1/runs?budget_id={BUDGET_ID}&limit=100"),
        ("GET", "/v1/budgets?limit=1000"),
        ("GET", f"/v1/pods?budget_id={BUDGET_ID}&limit=1000"),
    ]
    assert ran.out == "(none)\n"


def test_list_refuses_a_state_runs_never_have(
    governor: Governor, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        governor.run("run", "list", "--state", "sleeping")
    assert exit_.value.code == 2
    assert "invalid choice: 'sleeping'" in capsys.readouterr().err


def test_acknowledge_posts_the_reason_and_shows_who_acknowledged(governor: Governor) -> None:
    governor.has("/v1/runs", run_out())
    acknowledged = run_out(
        status="lost",
        ended_at="2026-04-01T10:05:00+00:00",
        acknowledged_at="2026-04-01T10:30:00+00:00",
        acknowledged_by="operator token 'ops' (tok_1)",
    )
    governor.answer("POST", f"/v1/runs/{RUN_ID}/acknowledge", acknowledged)
    ran = governor.run("run", "acknowledge", "sft", "--reason", "relaunched by hand")
    assert ran.sent == [
        ("GET", "/v1/runs?name=sft&limit=1000"),
        ("POST", f"/v1/runs/{RUN_ID}/acknowledge"),
    ]
    assert body(ran.last) == {"reason": "relaunched by hand"}
    assert ran.code == 0
    assert (
        "acknowledged       2026-04-01T10:30:00+00:00 by operator token 'ops' (tok_1)\n" in ran.out
    )
    assert body(governor.run("run", "acknowledge", RUN_ID).last) == {}


def test_acknowledge_of_a_run_that_is_not_lost_says_the_server_refused(
    governor: Governor,
) -> None:
    message = "run 'sft' (run_1) is running: nothing to acknowledge"
    refused = {"error": {"code": "conflict", "message": message}}
    governor.answer("POST", f"/v1/runs/{RUN_ID}/acknowledge", refused, status=409)
    ran = governor.run("run", "acknowledge", RUN_ID)
    assert (ran.code, ran.out) == (1, "")
    assert "409: run 'sft' (run_1) is running: nothing to acknowledge (conflict)" in ran.err
