"""Every operator verb, when the server refuses it or cannot be reached: exit 1, nothing on
stdout, and one line on stderr that says what happened and what to do."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.plans import EXAMPLE, write
from tests.unit.cli.scripted import (
    BUDGET_ID,
    EXTENSION_ID,
    POD_ID,
    RUN_ID,
    TOKEN_ID,
    URL,
    Governor,
    error,
    respond,
)

VERBS = {
    "budget declare": ("budget", "declare", "pilot", "--ceiling", "100"),
    "budget list": ("budget", "list"),
    "budget show": ("budget", "show", BUDGET_ID),
    "budget show by name": ("budget", "show", "pilot"),  # the lookup is what fails
    "budget close": ("budget", "close", BUDGET_ID),
    "budget adopt-labelled-pods": (
        "budget",
        "adopt-labelled-pods",
        BUDGET_ID,
        "--adopt",
        "--reason",
        "ours",
    ),
    "pod add": ("pod", "add", BUDGET_ID, "--provider", "fake", "--ref", "ref-1"),
    "pod list": ("pod", "list"),
    "pod show": ("pod", "show", POD_ID),
    "pod stop": ("pod", "stop", POD_ID),
    "pod resume": ("pod", "resume", POD_ID),
    "run create": ("run", "create", BUDGET_ID, "--pod", POD_ID, "--name", "sft"),
    "run list": ("run", "list"),
    "run show": ("run", "show", RUN_ID),
    "token create": ("token", "create", "--role", "viewer"),
    "token list": ("token", "list"),
    "token revoke": ("token", "revoke", TOKEN_ID),
    "ext request": ("ext", "request", BUDGET_ID, "--amount", "5", "--reason", "an eval"),
    "ext list": ("ext", "list"),
    "ext approve": ("ext", "approve", EXTENSION_ID),
    "ext deny": ("ext", "deny", EXTENSION_ID),
    "events": ("events",),
    "report": ("report", BUDGET_ID),
}

SET_TOKEN = (
    "Set GOVERNOR_OPERATOR_TOKEN (or --token) to an operator token: 'governor serve' prints "
    "one at first start, or set GOVERNOR_OPERATOR_TOKEN on the server too"
)
FAILURES: dict[str, tuple[httpx.Response | Exception, str]] = {
    "401": (
        error(401, "unauthorized", "unknown or revoked token"),
        f"the token was refused: unknown or revoked token (unauthorized). {SET_TOKEN}",
    ),
    "404": (
        error(404, "not_found", "no budget 'bud_00000000000000a1'"),
        "the server answered 404: no budget 'bud_00000000000000a1' (not_found)",
    ),
    "409": (
        error(409, "conflict", "extension ext_1 is already approved"),
        "the server answered 409: extension ext_1 is already approved (conflict)",
    ),
    "422": (
        error(422, "validation_error", "body.ceiling_usd: must be positive"),
        "the server answered 422: body.ceiling_usd: must be positive (validation_error)",
    ),
    "503": (
        error(503, "database_unavailable", "the database does not answer"),
        "the server answered 503: the database does not answer (database_unavailable)",
    ),
    "503 from a proxy": (
        respond(503, "  <html>Service Unavailable</html>\n"),
        "the server answered 503: <html>Service Unavailable</html>",
    ),
    "an empty 502": (respond(502, ""), "the server answered 502: no details"),
    "connection refused": (
        httpx.ConnectError("[Errno 111] Connection refused"),
        f"the server is not reachable at {URL} ([Errno 111] Connection refused); start it "
        "with 'governor serve', or point GOVERNOR_URL (or --url) at it",
    ),
    "timeout": (httpx.ReadTimeout("timed out"), f"the server at {URL} did not answer within 30 s"),
    "a broken answer": (
        httpx.RemoteProtocolError("peer closed connection"),
        f"talking to {URL} failed: peer closed connection",
    ),
}


@pytest.mark.parametrize("failure", FAILURES, ids=str)
@pytest.mark.parametrize("verb", VERBS, ids=str)
def test_a_verb_that_fails_says_why_in_one_line_and_exits_1(
    governor: Governor, verb: str, failure: str
) -> None:
    governor.always, said = FAILURES[failure]
    ran = governor.run(*VERBS[verb])
    assert (ran.code, ran.out) == (1, "")
    assert ran.err == f"governor: {said}\n"
    assert len(ran.requests) == 1  # nothing more is tried after a failure


@pytest.mark.parametrize("verb", VERBS, ids=str)
def test_a_verb_without_a_token_sends_none_and_says_how_to_get_one(
    governor: Governor, verb: str
) -> None:
    governor.always = error(401, "unauthorized", "a bearer token is required")
    ran = governor.run(*VERBS[verb], token=None)
    assert "authorization" not in ran.requests[0].headers
    assert (ran.code, ran.out, ran.err) == (1, "", f"governor: no token was sent. {SET_TOKEN}\n")


@pytest.mark.parametrize("failure", FAILURES, ids=str)
def test_plan_check_on_a_pod_that_cannot_be_asked_exits_4(
    governor: Governor, failure: str, tmp_path: Path
) -> None:
    plan = write(EXAMPLE, tmp_path / "plan.json")
    governor.always, said = FAILURES[failure]
    ran = governor.run("plan", "check", str(plan), "--pod", POD_ID)
    assert (ran.code, ran.out, ran.err) == (4, "", f"governor plan check: {said}\n")
