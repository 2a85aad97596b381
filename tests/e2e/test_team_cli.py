"""`governor team` as an operator types it, in its own process against a real server over
HTTP: make a team, declare its month's ceiling in writing, list and show it, declare a budget
in it (and be refused one beyond what it has left), ask for and decide an extension, and read
its report; tables by default, JSON with --json, one clear line and exit 1 when refused."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from governor.cli.teams import TEAM_HEADERS
from tests.e2e.conftest import GovernorServer
from tests.e2e.test_cli_verbs import as_json, fails, governor, succeeds

pytestmark = pytest.mark.e2e


def test_an_operator_runs_a_team_from_the_command_line(
    spawn: Callable[..., GovernorServer], tmp_path: Path
) -> None:
    url = spawn(f"sqlite:///{tmp_path / 'governor.db'}").start().wait_ready().url
    made = as_json(
        url, "team", "create", "vision", "--time-zone", "Europe/Berlin", "--org-approval-over", "50"
    )
    assert (made["name"], made["time_zone"], made["period"]) == ("vision", "Europe/Berlin", None)
    assert made["org_approval_over_usd"] == "50.00"
    assert "ceiling            none (declare one: governor team ceiling)" in succeeds(
        url, "team", "show", "vision"
    )

    declared = succeeds(
        url, "team", "ceiling", "vision", "--usd", "100", "--reason", "the lab's GPU month"
    )
    assert "ceiling              $100.00 every month" in declared
    assert "left                 $100.00 (the most a budget may be declared with)" in declared
    again = fails(url, "team", "ceiling", "vision", "--usd", "5", "--reason", "less")
    assert "declared its ceiling of $100.00 already: request an extension" in again

    header, *rows = succeeds(url, "team", "list").splitlines()
    assert header.split() == [h for h in TEAM_HEADERS]
    assert [r.split()[1] for r in rows] == ["default", "vision"]
    vision = next(r for r in rows if r.split()[1] == "vision").split()
    assert vision[2:5] == ["Europe/Berlin", "month", "$100.00"] and vision[-1] == "no"
    shown = as_json(url, "team", "show", made["id"])  # by id as well as by name
    assert (shown["period"]["ceiling_usd"], shown["period"]["held"]) == ("100.00", False)

    budget = as_json(url, "budget", "declare", "pilot", "--ceiling", "80", "--team", "vision")
    assert budget["team_id"] == made["id"]
    beyond = fails(url, "budget", "declare", "big", "--ceiling", "120", "--team", "vision")
    assert "a budget's ceiling of $120.00 is more than the team has left this period" in beyond

    asked = as_json(url, "team", "extend", "vision", "--usd", "20", "--reason", "a sweep")
    assert (asked["amount_usd"], asked["state"], asked["reason"]) == ("20.00", "pending", "a sweep")
    decided = succeeds(url, "team", "approve", "vision", asked["id"], "--note", "go ahead")
    assert asked["id"] in decided and "approved" in decided and "go ahead" in decided
    twice = fails(url, "team", "deny", "vision", asked["id"])
    assert "already approved" in twice
    assert as_json(url, "team", "show", "vision")["period"]["ceiling_usd"] == "120.00"

    report = succeeds(url, "team", "report", "vision")
    assert "(current: to now)" in report and "ceiling  $120.00" in report
    assert "Budgets, most spent first:" in report and asked["id"] in report
    ahead = fails(url, "team", "report", "vision", "--period", "2099-01")
    assert "the period holding 2099-01-01 has not begun" in ahead

    assert "no team named 'nope'; 'governor team list' shows them" in fails(
        url, "team", "show", "nope"
    )
    for bad, said in (
        (("ceiling", "vision", "--usd", "5", "--period", "0d", "--reason", "x"), "'30d'"),
        (("report", "vision", "--period", "January"), "a month as YYYY-MM"),
    ):
        refused = governor(url, "team", *bad)
        assert refused.returncode == 2, refused
        assert "error: argument --period: " in refused.stderr and said in refused.stderr
