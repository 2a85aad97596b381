"""RunPod, end to end: the real server governs a pod on the fake RunPod cloud, each in its
own process, over the real GraphQL request and response shapes.

A $5.00 ceiling and a pod whose costPerHr is $3600 (a dollar a second): the ceiling is
reached in seconds, the job saves, podStop is sent (podTerminate never), and the cloud's
own bill ends under the ceiling. The fake stops at once, so the stop latency reserved is
0.5 s, not RunPod's 30 s (which at a dollar a second would exceed the ceiling by itself).
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import (
    GovernorServer,
    ServerFactory,
    SimulatedJob,
    assert_error,
    clean_environ,
    create_run,
    declare_budget,
    free_port,
    get_budget,
    ok,
    usd,
    utcnow,
    wait_for,
    wait_pod_stopped,
)
from tests.e2e.runpod_cloud import KEY, RunPodCloud

pytestmark = pytest.mark.e2e

CEILING = Decimal("5.00")


@pytest.fixture
def runpod_cloud(tmp_path: Path) -> Iterator[RunPodCloud]:
    cloud = RunPodCloud(tmp_path)
    yield cloud
    cloud.close()


def register_runpod_pod(client: httpx.Client, budget_id: str, ref: str) -> httpx.Response:
    body = {"provider": "runpod", "provider_ref": ref}
    return client.post(f"/v1/budgets/{budget_id}/pods", json=body)


def test_the_ceiling_stops_a_runpod_pod_with_pod_stop_and_never_terminates(
    start_server: ServerFactory, runpod_cloud: RunPodCloud
) -> None:
    server: GovernorServer = start_server(
        GOVERNOR_RUNPOD_API_KEY=KEY,
        GOVERNOR_RUNPOD_URL=f"{runpod_cloud.url}/graphql",
        GOVERNOR_RUNPOD_STOP_LATENCY_S="0.5",
        GOVERNOR_BILLING_INTERVAL_S="0.5",
    )
    runpod_cloud.start("pod-1=3600")  # billing from now: start it just before registering
    with server.client() as operator:
        budget = declare_budget(operator, str(CEILING))
        pod = ok(register_runpod_pod(operator, budget["id"], "pod-1"), 201)
        assert usd(pod["hourly_rate_usd"]) == Decimal(3600)
        assert pod["rate_source"] == "provider"
        run = create_run(operator, budget["id"], pod["id"], checkpoint_grace_s=1)
        with SimulatedJob(server.url, run, on_stop="ack") as job:
            job.join()
            stopped = wait_pod_stopped(operator, pod["id"])
        spent = usd(get_budget(operator, budget["id"])["spent_usd"])

    assert job.errors == [] and job.ack is not None
    assert stopped["stop_order"]["reason"] == "ceiling"
    cloud = runpod_cloud.state()
    assert "podStop" in cloud.mutation_names()
    assert "podTerminate" not in cloud.mutation_names()
    cloud_pod = cloud.pods["pod-1"]
    assert cloud_pod.desired_status == "EXITED" and cloud_pod.stopped_at is not None
    bill = cloud_pod.bill_usd(utcnow())
    assert bill <= CEILING, f"RunPod billed ${bill}, over the ${CEILING} ceiling"
    assert spent <= CEILING, f"metered ${spent} over the ${CEILING} ceiling"
    billed = stopped["billed_usd"]  # RunPod's own billing records, read while it ran
    assert billed is not None and usd(billed) > 0, stopped
    assert stopped["billing_drift"] is False, (billed, stopped["spent_usd"])
    assert KEY not in server.output(this_start_only=False)


def test_a_runpod_pod_without_a_configured_key_is_refused_saying_what_to_set(
    server: GovernorServer, operator: httpx.Client
) -> None:
    budget = declare_budget(operator, str(CEILING))
    error = assert_error(register_runpod_pod(operator, budget["id"], "pod-1"), 422)
    assert "GOVERNOR_RUNPOD_API_KEY" in error["message"], error


README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_commands_for_the_fake_runpod_cloud_work_as_written(tmp_path: Path) -> None:
    """The README's two lines, a fake cloud and a governor given its URL and key, on a free
    port: the governor's providers check is accepted and sees the fake's pod."""
    fake, governor = re.findall(
        r"^\s*(python -m governor\.fakes\.runpod .*)\n\s*(GOVERNOR_RUNPOD_API_KEY=.*)$",
        README.read_text(),
        re.MULTILINE,
    )[0]
    port = str(free_port())
    fake_args = [a.replace("8765", port) for a in shlex.split(fake)]
    assert fake_args[:3] == ["python", "-m", "governor.fakes.runpod"]
    *settings, command = shlex.split(governor.replace("8765", port))[:-1]
    assert command == "governor", governor
    cloud = subprocess.Popen(
        [sys.executable, *fake_args[1:]],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        url = f"http://127.0.0.1:{port}/_fake/state"
        wait_for(lambda: answers(url), "the README's fake RunPod cloud to listen", timeout_s=30)
        checked = subprocess.run(
            [sys.executable, "-m", "governor", "providers", "check"],
            cwd=tmp_path,
            env={**clean_environ(), **dict(s.split("=", 1) for s in settings)},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        cloud.kill()
        cloud.wait(timeout=30)
    assert "runpod: ok (stops keeping the workspace): credentials accepted; 1 pod(s)" in (
        checked.stdout
    ), checked.stdout + checked.stderr
    assert re.search(r"^pod-1\s+running\s+3600\.00", checked.stdout, re.MULTILINE), checked.stdout


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.TransportError:
        return False
