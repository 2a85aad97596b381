"""What every operator verb shares: a name looked up (refused when it matches none or several),
and where the governor is and the token, from the environment or the flags."""

from __future__ import annotations

import httpx
import pytest

from governor.cli import run_command
from governor.cli.parser import build_parser
from tests.unit.cli.scripted import (
    BUDGET_ID,
    POD_ID,
    Governor,
    budget_out,
    page,
    pod_out,
)


def test_a_name_that_matches_nothing_is_refused_with_where_to_look(governor: Governor) -> None:
    governor.has("/v1/budgets")
    ran = governor.run("budget", "show", "nope")
    assert ran.sent == [("GET", "/v1/budgets?name=nope&limit=1000")]
    assert (ran.code, ran.out) == (1, "")
    assert ran.err == "governor: no budget named 'nope'; 'governor budget list' shows them\n"


def test_a_name_two_pods_share_is_refused_with_both_told_apart(governor: Governor) -> None:
    side = budget_out(id="bud_00000000000000a2", name="side")
    governor.has("/v1/budgets", budget_out(), side)
    other = pod_out(id="pod_00000000000000b2", budget_id=side["id"], state="stopped")
    governor.has("/v1/pods", pod_out(), other)
    ran = governor.run("pod", "stop", "gpu-a")
    assert ran.sent == [
        ("GET", "/v1/pods?name=gpu-a&limit=1000"),
        ("GET", "/v1/budgets?limit=1000"),
    ]
    assert (ran.code, ran.out) == (1, "")
    assert ran.err == (
        f"governor: 2 pods are named 'gpu-a': {POD_ID} (budget 'pilot' {BUDGET_ID}, running), "
        f"pod_00000000000000b2 (budget 'side' {side['id']}, stopped); give the id\n"
    )


def test_a_budgets_name_means_the_one_not_closed(governor: Governor) -> None:
    closed = budget_out(id="bud_00000000000000a0", state="closed")
    governor.has("/v1/budgets", closed, budget_out())
    governor.answer("GET", f"/v1/budgets/{BUDGET_ID}", budget_out())
    ran = governor.run("budget", "show", "pilot")
    assert ran.sent[-1] == ("GET", f"/v1/budgets/{BUDGET_ID}")
    assert ran.code == 0


def test_two_closed_budgets_of_one_name_are_told_apart_by_when_declared(
    governor: Governor,
) -> None:
    first = budget_out(id="bud_00000000000000a0", state="closed")
    second = budget_out(state="closed", created_at="2026-04-20T09:00:00+00:00")
    governor.has("/v1/budgets", first, second)
    ran = governor.run("budget", "show", "pilot")
    assert ran.err == (
        "governor: 2 budgets are named 'pilot': bud_00000000000000a0 (declared 2026-04-01, "
        f"closed), {BUDGET_ID} (declared 2026-04-20, closed); give the id\n"
    )


def test_a_lookup_reads_every_page(governor: Governor) -> None:
    governor.answer("GET", "/v1/pods", page(next_cursor="p2"), page(pod_out()))
    governor.answer("GET", f"/v1/pods/{POD_ID}", pod_out())
    ran = governor.run("pod", "show", "gpu-a")
    assert ran.sent == [
        ("GET", "/v1/pods?name=gpu-a&limit=1000"),
        ("GET", "/v1/pods?name=gpu-a&limit=1000&cursor=p2"),
        ("GET", f"/v1/pods/{POD_ID}"),
    ]
    assert ran.code == 0


def test_where_and_with_what_token_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GOVERNOR_URL", "https://governor.example:8443/")
    monkeypatch.setenv("GOVERNOR_OPERATOR_TOKEN", "gov_op_from_env")
    monkeypatch.setenv("GOVERNOR_TOKEN", "gov_op_the_former_name")
    sent: list[httpx.Request] = []

    def refuse(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        raise httpx.ConnectError("[Errno 111] Connection refused")

    args = build_parser().parse_args(["budget", "list"])
    assert run_command(args, transport=httpx.MockTransport(refuse)) == 1
    assert str(sent[0].url) == "https://governor.example:8443/v1/budgets?limit=100"
    assert sent[0].headers["authorization"] == "Bearer gov_op_from_env"
    # the address as the operator gave it, less the trailing slash
    assert "not reachable at https://governor.example:8443 (" in capsys.readouterr().err


def test_without_a_url_the_verbs_talk_to_the_local_governor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("GOVERNOR_URL", raising=False)
    assert build_parser().parse_args(["budget", "list"]).url == "http://127.0.0.1:8000"


def test_every_request_of_one_command_goes_through_one_client(
    governor: Governor, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[httpx.Client] = []
    real = httpx.Client

    def client(*args: object, **kwargs: object) -> httpx.Client:
        made.append(real(*args, **kwargs))  # type: ignore[arg-type]
        return made[-1]

    monkeypatch.setattr(httpx, "Client", client)
    governor.has("/v1/budgets", budget_out())
    governor.answer("GET", "/v1/runs", page())
    governor.has("/v1/pods", pod_out())
    ran = governor.run("run", "list", "--budget", "pilot")
    assert len(ran.requests) == 4 and len(made) == 1
    assert made[0].is_closed  # and it is closed when the command ends


def _token_sent(argv: list[str]) -> str | None:
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json={"items": [], "next_cursor": None})

    assert run_command(build_parser().parse_args(argv), transport=httpx.MockTransport(answer)) == 0
    return sent[0].headers.get("authorization")


def test_the_token_is_the_flag_then_the_operator_variable_then_the_former_name(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("GOVERNOR_URL", "GOVERNOR_OPERATOR_TOKEN", "GOVERNOR_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    assert _token_sent(["budget", "list"]) is None

    monkeypatch.setenv("GOVERNOR_TOKEN", "gov_op_former")
    assert _token_sent(["budget", "list"]) == "Bearer gov_op_former"
    assert capsys.readouterr().err == (
        "governor: GOVERNOR_TOKEN is deprecated for the command line: set "
        "GOVERNOR_OPERATOR_TOKEN instead (it is also the name 'governor serve' prints)\n"
    )

    monkeypatch.setenv("GOVERNOR_OPERATOR_TOKEN", "gov_op_current")
    assert _token_sent(["budget", "list"]) == "Bearer gov_op_current"
    assert _token_sent(["budget", "list", "--token", "gov_op_flag"]) == "Bearer gov_op_flag"
    assert capsys.readouterr().err == ""  # the former name is not read, nor mentioned
