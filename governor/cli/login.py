"""`governor login`: sign in through the identity provider from a terminal (the device flow).

The governor starts the sign-in at its identity provider and says where to confirm the code;
once the person has signed in there, it answers a short-lived token (within the hour) with
the role their groups grant. Printed as a line to paste into the shell:
`export GOVERNOR_OPERATOR_TOKEN=...`, which every other verb reads.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from governor.cli.http import Api, OperatorError
from governor.cli.verbs import Commands, Shown, verb


def shown(signed_in: dict[str, Any]) -> str:
    teams = signed_in["teams"]
    scope = "org-wide" if teams is None else "for " + ", ".join(teams)
    return (
        f"# signed in as {signed_in['person']}: {signed_in['role']} {scope}, "
        f"until {signed_in['expires_at']}\n"
        f"export GOVERNOR_OPERATOR_TOKEN={signed_in['token']}"
    )


def login(api: Api, _: argparse.Namespace) -> Shown:
    started = api.call("POST", "/v1/signin/device")
    where = started["verification_uri_complete"] or started["verification_uri"]
    print(
        f"Open {where} and confirm the code {started['user_code']}; waiting for you to sign "
        "in there ...",
        file=sys.stderr,
        flush=True,
    )
    interval = max(1, int(started["interval_s"]))
    deadline = time.monotonic() + int(started["expires_in_s"])
    body = {"device_code": started["device_code"]}
    while time.monotonic() < deadline:
        time.sleep(interval)  # RFC 8628: poll no faster than the provider asks
        answer = api.call("POST", "/v1/signin/device/token", body=body)
        if answer["status"] == "signed_in":
            return answer, shown
    raise OperatorError(
        "the code expired before anyone signed in with it: run 'governor login' again"
    )


def add_command(commands: Commands) -> None:
    verb(
        commands,
        "login",
        "sign in through the identity provider; prints a short-lived operator or viewer token",
        login,
    )
