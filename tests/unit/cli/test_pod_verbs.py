"""`governor pod add|list|show|stop|resume`: the request each sends, and what it prints."""

from __future__ import annotations

from tests.unit.cli.scripted import (
    BUDGET_ID,
    POD_ID,
    RUN_ID,
    Governor,
    body,
    budget_out,
    gpu_out,
    page,
    pod_out,
    stop_out,
)


def test_add_posts_the_pod_under_the_named_budget_and_shows_it(governor: Governor) -> None:
    governor.has("/v1/budgets", budget_out())
    governor.answer("POST", f"/v1/budgets/{BUDGET_ID}/pods", pod_out(), status=201)
    ran = governor.run(
        "pod", "add", "pilot", "--provider", "fake", "--ref", "ref-1", "--name", "gpu-a",
        "--rate", "3.60", "--gpu-type", "H100", "--gpu-count", "1", "--storage-gb", "200",
        "--storage-usd-per-gb-month", "0.10", "--stopped-storage-usd-per-gb-month", "0.05",
        "--local", "--node", "box-1", "--persistent-filesystem", "fs-1", "--plan", "pln_1",
    )  # fmt: skip
    assert ran.sent == [
        ("GET", "/v1/budgets?name=pilot&limit=1000"),
        ("POST", f"/v1/budgets/{BUDGET_ID}/pods"),
    ]
    assert body(ran.last) == {
        "provider": "fake",
        "provider_ref": "ref-1",
        "name": "gpu-a",
        "hourly_rate_usd": "3.60",
        "gpu_type": "H100",
        "gpu_count": 1,
        "storage_gb": 200.0,
        "storage_usd_per_gb_month": "0.10",
        "stopped_storage_usd_per_gb_month": "0.05",
        "local": True,
        "node": "box-1",
        "persistent_filesystem": "fs-1",
        "plan_id": "pln_1",
    }
    assert (ran.code, ran.err) == (0, "")
    assert ran.out == (
        f"id          {POD_ID}\n"
        "name        gpu-a\n"
        f"budget      {BUDGET_ID}\n"
        "provider    fake ref-1\n"
        "GPUs        1 x H100\n"
        "plan        -\n"
        "node        -\n"
        "state       running\n"
        "rate        $3.60/h (provider)\n"
        "spent       $12.00\n"
        "stop order  -\n"
        "telemetry   no agent has reported\n"
    )


def test_add_sends_the_acknowledged_loss_and_shows_it_with_who_wrote_it(
    governor: Governor,
) -> None:
    loss = {"lost": "its container disk", "why": "a smoke test", "by": "operator token 'ana'"}
    shown = pod_out(acknowledged_loss=loss, terminate_only=True)
    governor.answer("POST", f"/v1/budgets/{BUDGET_ID}/pods", shown, status=201)
    ran = governor.run(
        "pod", "add", BUDGET_ID, "--provider", "aws", "--ref", "i-1",
        "--persistent-filesystem", "vol-1", "--persistent-mount", "/data",
        "--acknowledge-loss", "a smoke test",
    )  # fmt: skip
    assert body(ran.last) == {
        "provider": "aws",
        "provider_ref": "i-1",
        "persistent_filesystem": "vol-1",
        "persistent_mount": "/data",
        "acknowledge_loss": "a smoke test",
    }
    assert ran.code == 0
    assert "stops by      terminate only\n" in ran.out
    assert "a stop loses  its container disk\n" in ran.out
    assert "acknowledged  a smoke test (by operator token 'ana')\n" in ran.out


def test_add_leaves_what_was_not_given_to_the_server(governor: Governor) -> None:
    governor.answer("POST", f"/v1/budgets/{BUDGET_ID}/pods", pod_out(), status=201)
    ran = governor.run("pod", "add", BUDGET_ID, "--provider", "fake", "--ref", "ref-1")
    assert body(ran.last) == {"provider": "fake", "provider_ref": "ref-1"}


def test_show_adds_a_table_of_the_gpus_as_people_read_them(governor: Governor) -> None:
    order = {"id": "stp_1", "state": "checkpoint_requested"}
    telemetry = {"gpus": [gpu_out(), gpu_out(index=1, uuid="GPU-2", utilization_pct=None)]}
    shown = pod_out(stop_order=order, telemetry={**telemetry, "note": "2 GPUs, 1 s ago"})
    governor.has("/v1/pods", shown)
    governor.answer("GET", f"/v1/pods/{POD_ID}", shown)
    ran = governor.run("pod", "show", "gpu-a")
    assert ran.sent == [("GET", "/v1/pods?name=gpu-a&limit=1000"), ("GET", f"/v1/pods/{POD_ID}")]
    assert "stop order  stp_1 checkpoint_requested\n" in ran.out
    assert ran.out.endswith(
        "telemetry   2 GPUs, 1 s ago\n"
        "\n"
        "gpu  uuid   name    util           memory  at\n"
        "0    GPU-1  H100  94.9 %  12.3 / 80.0 GiB  2026-04-01T10:00:00+00:00\n"
        "1    GPU-2  H100       -  12.3 / 80.0 GiB  2026-04-01T10:00:00+00:00\n"
    )


def test_list_names_each_pods_budget(governor: Governor) -> None:
    governor.has("/v1/budgets", budget_out())
    unnamed = pod_out(id="pod_00000000000000b2", name="ref-2", gpu_type=None, gpu_count=None)
    governor.answer("GET", "/v1/pods", page(pod_out(), unnamed))
    ran = governor.run("pod", "list", "--budget", "pilot", "--limit", "5")
    assert ran.sent == [
        ("GET", "/v1/budgets?name=pilot&limit=1000"),
        ("GET", f"/v1/pods?budget_id={BUDGET_ID}&limit=5"),
        ("GET", "/v1/budgets?limit=1000"),
    ]
    assert ran.out.splitlines() == [
        "id                    name   budget  provider    GPUs      state       rate   spent",
        f"{POD_ID}  gpu-a  pilot   fake ref-1  1 x H100  running  $3.60/h  $12.00",
        "pod_00000000000000b2  ref-2  pilot   fake ref-1  -         running  $3.60/h  $12.00",
    ]


def test_stop_posts_the_reason_and_shows_the_stop_order(governor: Governor) -> None:
    governor.answer("POST", f"/v1/pods/{POD_ID}/stop", stop_out(), status=202)
    ran = governor.run("pod", "stop", POD_ID, "--reason", "done for today")
    assert ran.sent == [("POST", f"/v1/pods/{POD_ID}/stop")]
    assert body(ran.last) == {"reason": "done for today"}
    assert ran.out == (
        "stop order     stp_00000000000000f1\n"
        f"pod            {POD_ID}\n"
        "reason         manual\n"
        "state          checkpoint_requested\n"
        "save deadline  2026-04-01T10:05:00+00:00\n"
    )
    assert body(governor.run("pod", "stop", POD_ID).last) == {}


def test_stopping_a_stopped_pod_says_so_and_how_to_resume_it(governor: Governor) -> None:
    governor.has("/v1/pods", pod_out())
    stopped = stop_out(state="stopped", confirmed_at="2026-04-01T10:06:00+00:00")
    governor.answer("POST", f"/v1/pods/{POD_ID}/stop", stopped)  # 200: nothing new ordered
    ran = governor.run("pod", "stop", "gpu-a")
    assert ran.code == 0
    assert ran.out == (
        "Pod gpu-a was already stopped at 2026-04-01T10:06:00+00:00 (stop order "
        "stp_00000000000000f1, manual): nothing new was ordered.\n"
        "Its workspace is kept. To run it again: governor pod resume gpu-a\n"
    )


def test_resume_prints_the_runs_new_job_token(governor: Governor) -> None:
    resumed = {
        "pod": pod_out(state="starting"),
        "run": {"id": RUN_ID, "name": "sft", "attempt": 2, "checkpoint": None},
        "token": "gov_job_new",
    }
    governor.answer("POST", f"/v1/pods/{POD_ID}/resume", resumed)
    ran = governor.run("pod", "resume", POD_ID, "--reason", "budget extended")
    assert ran.sent == [("POST", f"/v1/pods/{POD_ID}/resume")]
    assert body(ran.last) == {"reason": "budget extended"}
    assert ran.out == (
        f"pod    {POD_ID}\n"
        "state  starting\n"
        "rate   $3.60/h (provider)\n"
        f"run   {RUN_ID} (sft), attempt 2\n"
        "from  -\n"
        "\n"
        "The attempt's job token (shown once; the previous one has ended). Relaunch the job "
        "with it:\n"
        "  gov_job_new\n"
    )


def test_resume_without_a_run_says_to_create_one(governor: Governor) -> None:
    resumed = {"pod": pod_out(state="starting"), "run": None, "token": None}
    governor.answer("POST", f"/v1/pods/{POD_ID}/resume", resumed)
    ran = governor.run("pod", "resume", POD_ID)
    assert ran.out.endswith(
        "\n\nNo unfinished run stopped with this pod: create a run for the next job.\n"
    )
