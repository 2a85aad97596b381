"""The operator verbs as an operator types them: `python -m governor ...` in its own process,
against a real server, with GOVERNOR_URL and GOVERNOR_OPERATOR_TOKEN; tables by default, JSON with
--json, and one clear line with a non-zero exit when something is wrong."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from governor.cli.budgets import BUDGET_HEADERS
from governor.cli.parser import build_parser
from tests.e2e.conftest import (
    OPERATOR_TOKEN,
    GovernorServer,
    clean_environ,
    free_port,
    ok,
    wait_pod_stopped,
)

pytestmark = pytest.mark.e2e

CLI_TIMEOUT_S = 60


def governor(
    url: str, *args: str, token: str | None = OPERATOR_TOKEN
) -> subprocess.CompletedProcess[str]:
    env = {**clean_environ(), "GOVERNOR_URL": url}
    if token is not None:
        env["GOVERNOR_OPERATOR_TOKEN"] = token
    return subprocess.run(
        [sys.executable, "-m", "governor", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        check=False,
    )


def succeeds(url: str, *args: str) -> str:
    result = governor(url, *args)
    assert result.returncode == 0, f"governor {' '.join(args)}: {result.stderr}"
    return result.stdout


def as_json(url: str, *args: str) -> Any:
    return json.loads(succeeds(url, *args, "--json"))


def fails(url: str, *args: str, token: str | None = OPERATOR_TOKEN) -> str:
    """The one line the command wrote to stderr, having exited 1 with nothing on stdout."""
    result = governor(url, *args, token=token)
    assert (result.returncode, result.stdout) == (1, ""), result
    [line] = result.stderr.splitlines()
    assert line.startswith("governor: ")
    return line


@pytest.fixture
def cli_server(
    spawn: Callable[..., GovernorServer], tmp_path_factory: pytest.TempPathFactory
) -> GovernorServer:
    """One server on SQLite: the verbs only speak HTTP, the database does not matter here."""
    database = tmp_path_factory.mktemp("cli") / "governor.db"
    return spawn(f"sqlite:///{database}").start().wait_ready()


def test_an_operator_runs_a_pilot_from_the_command_line(cli_server: GovernorServer) -> None:
    url = cli_server.url
    budget = as_json(url, "budget", "declare", "pilot", "--ceiling", "100000", "--note", "cli")
    as_json(url, "budget", "declare", "side", "--ceiling", "2500")
    listed = succeeds(url, "budget", "list").splitlines()
    assert listed[0].split() == list(BUDGET_HEADERS)
    assert budget["id"] in listed[1] and "$100,000.00" in listed[1]
    ceiling = listed[0].index("ceiling") + len("ceiling")  # money right-aligned: ends line up
    assert {line[:ceiling].rstrip()[-3:] for line in listed[1:]} == {".00"}, listed
    shown = succeeds(url, "budget", "show", "pilot")  # by name
    assert f"id                   {budget['id']}" in shown
    assert "effective ceiling    $100,000.00" in shown and "note                 cli" in shown

    add = ("pod", "add", "pilot", "--provider", "fake", "--ref", "cli-1", "--name", "gpu-a")
    pod = as_json(url, *add, "--gpu-type", "H100", "--gpu-count", "1")
    assert (pod["budget_id"], pod["name"]) == (budget["id"], "gpu-a")
    at = datetime.now(UTC).isoformat()
    gpu = {
        "uuid": "GPU-cli",
        "index": 0,
        "name": "H100",
        "utilization_pct": 94.93333333333334,
        "memory_total_bytes": 80 * 1024**3,
        "memory_used_bytes": 13_207_024_435,
        "memory_free_bytes": 80 * 1024**3 - 13_207_024_435,
    }
    with cli_server.client() as operator:
        readings = {"readings": [{"at": at, "gpus": [gpu]}]}
        ok(operator.post(f"/v1/pods/{pod['id']}/telemetry", json=readings), 202)
    shown = succeeds(url, "pod", "show", "gpu-a")
    assert "1 x H100" in shown and "$3,600.00/h (provider)" in shown and "running" in shown
    assert "94.9 %" in shown and "12.3 / 80.0 GiB" in shown, shown
    assert "94.933" not in shown and "13207024435" not in shown
    pods = succeeds(url, "pod", "list", "--budget", "pilot").splitlines()
    assert len(pods) == 2 and pods[1].split()[:3] == [pod["id"], "gpu-a", "pilot"]

    run = ("run", "create", "pilot", "--pod", "gpu-a", "--name", "sft")  # names throughout
    created = succeeds(url, *run, "--checkpoint-grace-s", "0.5")  # a job that never calls
    assert "checkpoint grace   0.5 s" in created
    job_token = created.rstrip().splitlines()[-1].strip()
    assert job_token.startswith("gov_job_")  # shown once
    [sft] = as_json(url, "run", "list", "--budget", "pilot", "--state", "running")["items"]
    assert (sft["name"], sft["pod_id"]) == ("sft", pod["id"])
    runs = succeeds(url, "run", "list").splitlines()
    assert runs[1].split()[:5] == [sft["id"], "sft", "pilot", "gpu-a", "running"]
    assert "directive          continue" in succeeds(url, "run", "show", "sft")
    with cli_server.client(token=job_token) as job:
        event = {"category": "model", "severity": "critical", "message": "loss is NaN"}
        ok(job.post(f"/v1/runs/{sft['id']}/events", json=event), 201)

    asked = succeeds(url, "ext", "request", "pilot", "--amount", "50", "--reason", "one more eval")
    [ext] = as_json(url, "ext", "list", "--budget", "pilot", "--state", "pending")["items"]
    assert ext["id"] in asked and "$50.00" in asked and "pilot" in asked
    approved = succeeds(url, "ext", "approve", ext["id"], "--note", "fine")
    assert "approved" in approved and "fine" in approved
    assert "already approved" in fails(url, "ext", "deny", ext["id"])
    assert as_json(url, "budget", "show", "pilot")["effective_ceiling_usd"] == "100050.00"

    stop = succeeds(url, "pod", "stop", "gpu-a", "--reason", "done for today")
    assert "manual" in stop
    with cli_server.client() as operator:
        wait_pod_stopped(operator, pod["id"])

    log = succeeds(url, "events", "--budget", "pilot")
    ids = [int(line.split()[0]) for line in log.splitlines()[1:]]
    assert ids == sorted(ids) and "Stop ordered (manual)" in log
    severe = as_json(url, "events", "--budget", "pilot", "--severity", "warning")["items"]
    assert {e["severity"] for e in severe} == {"warning", "critical"}  # warning or worse
    latest = succeeds(url, "events", "--budget", "pilot", "--limit", "2").splitlines()
    assert latest[-1].startswith("2 shown; there are more: run the same command with --cursor")
    cursor = latest[-1].split()[-1]
    before = succeeds(url, "events", "--budget", "pilot", "--limit", "2", "--cursor", cursor)
    newer, older = (
        [int(row.split()[0]) for row in rows[1:3]] for rows in (latest, before.splitlines())
    )
    assert ids[-4:] == older + newer  # the page before the latest two, each shown oldest first

    report = succeeds(url, "report", "pilot")
    assert report.startswith(f"# Run report: pilot ({budget['id']})")
    assert "## Stops" in report and "`manual`" in report
    assert as_json(url, "report", "pilot")["stops"][0]["reason"] == "manual"

    # a pod is named after its reference unless named; a name two pods share is refused
    side = as_json(url, "pod", "add", "side", "--provider", "fake", "--ref", "gpu-a")
    assert side["name"] == "gpu-a"
    ambiguous = fails(url, "pod", "show", "gpu-a")
    assert "2 pods are named 'gpu-a'" in ambiguous and "give the id" in ambiguous
    assert f"{pod['id']} (budget 'pilot' {budget['id']}, stopped)" in ambiguous
    assert f"{side['id']} (budget 'side' {side['budget_id']}, running)" in ambiguous

    # a closed budget's name is free again, and then names the budget that is not closed
    assert as_json(url, "budget", "close", "pilot")["state"] == "closed"
    again = as_json(url, "budget", "declare", "pilot", "--ceiling", "10")
    assert as_json(url, "budget", "show", "pilot")["id"] == again["id"] != budget["id"]


def test_errors_say_what_to_do_and_exit_non_zero(cli_server: GovernorServer) -> None:
    url = cli_server.url
    nowhere = f"http://127.0.0.1:{free_port()}"
    assert f"the server is not reachable at {nowhere}" in fails(nowhere, "budget", "list")
    unsent = fails(url, "budget", "list", token=None)
    assert "no token was sent. Set GOVERNOR_OPERATOR_TOKEN" in unsent
    refused = fails(url, "budget", "list", token="gov_op_wrong")
    assert "the token was refused" in refused and "GOVERNOR_OPERATOR_TOKEN" in refused
    assert "no budget named 'nope'; 'governor budget list' shows them" in fails(
        url, "budget", "show", "nope"
    )
    an_id = "bud_0123456789abcdef"  # used as it is, not looked up as a name
    assert f"404: no budget '{an_id}'" in fails(url, "budget", "show", an_id)
    invalid = fails(url, "budget", "declare", "x", "--ceiling", "-5")
    assert "422" in invalid and "ceiling_usd" in invalid


@pytest.mark.parametrize(
    "verb",
    [
        "budget declare",
        "budget list",
        "budget show",
        "pod add",
        "pod list",
        "pod show",
        "pod stop",
        "pod resume",
        "run create",
        "run list",
        "run show",
        "ext request",
        "ext list",
        "ext approve",
        "ext deny",
        "events",
        "report",
        "team create",
        "team list",
        "team show",
        "team ceiling",
        "team extend",
        "team approve",
        "team deny",
        "team report",
    ],
)
def test_every_verb_has_help(verb: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args([*verb.split(), "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: governor {verb}") and "--token" in out and "--json" in out
