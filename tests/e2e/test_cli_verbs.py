"""The operator verbs as an operator types them: `python -m governor ...` in its own process,
against a real server, with GOVERNOR_URL and GOVERNOR_TOKEN; tables by default, JSON with
--json, and one clear line with a non-zero exit when something is wrong."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from governor.cli import build_parser
from governor.operator import BUDGET_HEADERS
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
        env["GOVERNOR_TOKEN"] = token
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
    listed = succeeds(url, "budget", "list")
    assert listed.splitlines()[0].split() == list(BUDGET_HEADERS)
    assert budget["id"] in listed and "$100,000.00" in listed
    shown = succeeds(url, "budget", "show", budget["id"])
    assert "effective ceiling    $100,000.00" in shown and "note                 cli" in shown

    add = ("pod", "add", budget["id"], "--provider", "fake", "--ref", "cli-1")
    pod = as_json(url, *add, "--gpu-type", "H100", "--gpu-count", "1")
    shown = succeeds(url, "pod", "show", pod["id"])
    assert "1 x H100" in shown and "$3,600.00/h (provider)" in shown and "running" in shown

    run = ("run", "create", budget["id"], "--pod", pod["id"], "--name", "sft")
    created = succeeds(url, *run, "--checkpoint-grace-s", "0.5")  # a job that never calls
    assert "checkpoint grace   0.5 s" in created
    assert created.rstrip().splitlines()[-1].strip().startswith("gov_job_")  # shown once

    with cli_server.client() as operator:
        body = {"amount_usd": "50", "reason": "one more eval"}
        ext = ok(operator.post(f"/v1/budgets/{budget['id']}/extensions", json=body), 201)
    pending = succeeds(url, "ext", "list", "--state", "pending")
    assert ext["id"] in pending and "$50.00" in pending
    approved = succeeds(url, "ext", "approve", ext["id"], "--note", "fine")
    assert "approved" in approved and "fine" in approved
    assert "already approved" in fails(url, "ext", "deny", ext["id"])
    assert as_json(url, "budget", "show", budget["id"])["effective_ceiling_usd"] == "100050.00"

    stop = succeeds(url, "pod", "stop", pod["id"], "--reason", "done for today")
    assert "manual" in stop
    with cli_server.client() as operator:
        wait_pod_stopped(operator, pod["id"])

    log = succeeds(url, "events", "--budget", budget["id"])
    ids = [int(line.split()[0]) for line in log.splitlines()[1:]]
    assert ids == sorted(ids) and "Stop ordered (manual)" in log
    assert as_json(url, "events", "--budget", budget["id"], "--severity", "warning")

    report = succeeds(url, "report", budget["id"])
    assert report.startswith(f"# Run report: pilot ({budget['id']})")
    assert "## Stops" in report and "`manual`" in report
    assert as_json(url, "report", budget["id"])["stops"][0]["reason"] == "manual"


def test_errors_say_what_to_do_and_exit_non_zero(cli_server: GovernorServer) -> None:
    url = cli_server.url
    nowhere = f"http://127.0.0.1:{free_port()}"
    assert f"the server is not reachable at {nowhere}" in fails(nowhere, "budget", "list")
    assert "no token was sent. Set GOVERNOR_TOKEN" in fails(url, "budget", "list", token=None)
    refused = fails(url, "budget", "list", token="gov_op_wrong")
    assert "the token was refused" in refused and "GOVERNOR_TOKEN" in refused
    assert "404: no budget 'bud_nope'" in fails(url, "budget", "show", "bud_nope")
    invalid = fails(url, "budget", "declare", "x", "--ceiling", "-5")
    assert "422" in invalid and "ceiling_usd" in invalid


@pytest.mark.parametrize(
    "verb",
    [
        "budget declare",
        "budget list",
        "budget show",
        "pod add",
        "pod show",
        "pod stop",
        "run create",
        "ext list",
        "ext approve",
        "ext deny",
        "events",
        "report",
    ],
)
def test_every_verb_has_help(verb: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args([*verb.split(), "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: governor {verb}") and "--token" in out and "--json" in out
