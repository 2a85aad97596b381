"""`governor report`: a budget's run report, as Markdown (or the server's JSON)."""

from __future__ import annotations

import argparse

from governor.cli.http import Api
from governor.cli.names import BUDGET, path_of
from governor.cli.verbs import Commands, Shown, budget_arg, verb


def report(api: Api, a: argparse.Namespace) -> Shown:
    params = {"format": "json" if a.json else "md"}
    return api.call("GET", path_of(api, BUDGET, a.budget, "report"), params=params), str


def add_command(commands: Commands) -> None:
    budget_arg(verb(commands, "report", "a budget's run report, as Markdown (over HTTP)", report))
