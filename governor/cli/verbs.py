"""The operator verbs over HTTP: `team`, `budget`, `pod`, `run`, `ext`, `token`, `events`,
`report` and `costs`, each registered here with the options every verb takes, and its answer
printed here.

Each verb is an API call made with the operator token (GOVERNOR_URL, GOVERNOR_OPERATOR_TOKEN
or --url, --token). A budget, pod or run is named by its id or by its name (governor.cli.names).
Output is a readable table by default, money right-aligned, and the server's JSON with
--json; either way a character that does not show what it is (U+202E, say) is written as its
escape. Any failure exits 1 with one line that says what to do: the server is not reachable,
the token is missing or refused, no such name, or the server's own error message.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import Any, TypeAlias

from governor.cli.http import DEFAULT_URL, Api, OperatorError, Remote
from governor.domain.text import visible

# What `governor` and each group of verbs add their subcommands to.
Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

Shown = tuple[Any, Callable[[Any], str]]  # what the server said, and how to show it
Verb = Callable[[Api, argparse.Namespace], Shown]

PAGE = 100  # a list verb's items per page unless --limit says otherwise


def group(commands: Commands, name: str, what: str) -> Commands:
    """A group of verbs, `governor <name> VERB`."""
    parser = commands.add_parser(name, help=what, description=what)
    return parser.add_subparsers(dest=f"{name}_verb", required=True, metavar="VERB")


def verb(commands: Commands, name: str, what: str, handler: Verb) -> argparse.ArgumentParser:
    """A verb with the options every verb takes: where the governor is, the token, --json."""
    parser = commands.add_parser(name, help=what, description=what)
    parser.add_argument(
        "--url",
        default=os.environ.get("GOVERNOR_URL", DEFAULT_URL),
        help=f"the governor's URL (or GOVERNOR_URL; default {DEFAULT_URL})",
    )
    parser.add_argument(
        "--token",
        help="an operator token (or GOVERNOR_OPERATOR_TOKEN)",
    )
    parser.add_argument("--json", action="store_true", help="print the server's JSON")
    parser.set_defaults(remote=_answered(handler))
    return parser


def _answered(handler: Verb) -> Remote:
    """The verb carried out: the server's answer printed as the verb shows it (or as JSON),
    exit 0; or the one line that says what went wrong, on stderr, exit 1."""

    def run(args: argparse.Namespace, api: Api) -> int:
        try:
            data, show = handler(api, args)
        except OperatorError as exc:
            print(f"governor: {visible(str(exc))}", file=sys.stderr)
            return 1
        print(json.dumps(data, indent=2) if args.json else visible(show(data)).rstrip("\n"))
        return 0

    return run


def paging(parser: argparse.ArgumentParser, order: str) -> None:
    parser.add_argument(
        "--limit", type=int, default=PAGE, help=f"at most this many, {order} (default {PAGE})"
    )
    parser.add_argument(
        "--cursor", help="the next page: the cursor the previous page's output ends with"
    )


def page(a: argparse.Namespace) -> dict[str, Any]:
    """The page a list verb was asked for."""
    return {"limit": a.limit, "cursor": a.cursor}


def budget_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("budget", metavar="BUDGET", help="the budget's name or id")


def pod_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pod", metavar="POD", help="the pod's name or id")


def budget_option(parser: argparse.ArgumentParser) -> None:
    """A listing narrowed to one budget's."""
    parser.add_argument("--budget", metavar="BUDGET", help="only this budget's (name or id)")
