"""The `governor` command line: its options, and each command from the module that carries it
out, in the order `governor --help` lists them."""

from __future__ import annotations

import argparse

from governor import __version__
from governor.cli import (
    agent,
    budgets,
    costs,
    demo,
    events,
    extensions,
    login,
    plan,
    pods,
    providers,
    report,
    runs,
    serve,
    teams,
    tokens,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="governor",
        description="Holds rented GPU pods under a hard dollar ceiling: meters spend, makes "
        "training jobs check in, and when a limit is hit has the job save, then stops the pod "
        "in the way that keeps its workspace.",
        epilog="Settings come from GOVERNOR_* environment variables (see docs/settings.md).",
    )
    parser.add_argument("--version", action="version", version=f"governor {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve.add_commands(commands)  # serve, migrate
    agent.add_command(commands)
    demo.add_command(commands)
    plan.add_command(commands)
    providers.add_command(commands)
    teams.add_commands(commands)
    budgets.add_commands(commands)
    pods.add_commands(commands)
    runs.add_commands(commands)
    tokens.add_commands(commands)
    extensions.add_commands(commands)
    events.add_command(commands)
    report.add_command(commands)
    costs.add_commands(commands)
    login.add_command(commands)
    return parser
