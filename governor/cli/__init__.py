"""The `governor` command: serve, migrate, agent, demo, plan, providers, and the operator verbs
over HTTP (team, budget, pod, run, token, ext, events, report, costs)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from governor.cli.http import Api, connect, operator_token
from governor.cli.parser import build_parser
from governor.settings import load_settings

if TYPE_CHECKING:
    import httpx


def main(argv: Sequence[str] | None = None) -> int:
    from pydantic import ValidationError

    args = build_parser().parse_args(argv)
    try:
        settings = load_settings()
    except ValidationError as exc:
        from governor.api.errors import problem

        for error in exc.errors():
            if not error["loc"]:  # a rule across settings names them in its message
                print(f"governor: invalid settings: {problem(error)}", file=sys.stderr)
                continue
            name = "GOVERNOR_" + "_".join(str(p) for p in error["loc"]).upper()
            print(f"governor: invalid setting {name}: {problem(error)}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
    )
    # httpx and botocore at DEBUG would log request headers (botocore: the AWS key id);
    # alembic's migration context logs two lines each time the schema is looked at (every
    # /readyz) and each migration's whole docstring as it runs: the governor says it in one
    noisy_loggers = ("apscheduler", "alembic", "httpx", "botocore", "urllib3")
    for noisy in noisy_loggers:
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        return run_command(args)
    except BrokenPipeError:  # the reader went away (`governor events | head`): not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def run_command(args: argparse.Namespace, transport: httpx.BaseTransport | None = None) -> int:
    """Carry out the command `args` were parsed for; its exit status. A command over HTTP is
    given the governor's API at its --url, with its --token (or GOVERNOR_OPERATOR_TOKEN): one
    client for the invocation, over `transport` if one is given (else httpx's own), closed
    when the command ends."""
    if "remote" not in args:
        return int(args.handler(args))
    url = args.url.rstrip("/")

    def client() -> httpx.Client:  # the token is looked for once a request is made
        return connect(url, operator_token(args.token, os.environ), transport=transport)

    with Api(url, client) as api:
        return int(args.remote(args, api))
