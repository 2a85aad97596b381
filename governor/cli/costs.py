"""`governor costs export`: the ledger's spend as FOCUS 1.0 cost rows, CSV or Parquet, written
to a file (or standard output) as the server streams it, with its progress on stderr."""

from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack
from typing import BinaryIO

from governor.cli.http import Api
from governor.cli.names import budget_filter
from governor.cli.verbs import Commands, Shown, budget_option, group, verb

PROGRESS_EVERY = 1 << 20  # a line on stderr each MiB received


def export(api: Api, a: argparse.Namespace) -> Shown:
    params = {
        "format": "focus",
        "file": a.format,
        "from": a.start,
        "to": a.end,
        "team": a.team,
        "budget_id": budget_filter(api, a.budget),
    }
    told = [0]

    def progress(written: int) -> None:
        if written - told[0] >= PROGRESS_EVERY:
            told[0] = written
            print(f"governor: {written / (1 << 20):.1f} MiB received", file=sys.stderr)

    with ExitStack() as files:
        sink: BinaryIO = (
            sys.stdout.buffer if a.output == "-" else files.enter_context(open(a.output, "wb"))
        )
        written = api.download("/v1/costs", params, sink, progress)
        sink.flush()
    where = "standard output" if a.output == "-" else a.output
    said = {"bytes": written, "file": where, "format": a.format}
    return said, lambda s: "" if a.output == "-" else f"wrote {s['bytes']} bytes to {s['file']}"


def add_commands(commands: Commands) -> None:
    costs = group(commands, "costs", "the ledger's spend as FOCUS cost data (over HTTP)")
    out = verb(
        costs,
        "export",
        "the ledger's spend by pod, hour and charge as FOCUS 1.0 rows (CSV or Parquet)",
        export,
    )
    out.add_argument(
        "--from",
        dest="start",
        metavar="HOUR",
        help="a whole UTC hour with its zone, e.g. 2026-01-01T00:00:00Z (default: the month's "
        "start)",
    )
    out.add_argument(
        "--to",
        dest="end",
        metavar="HOUR",
        help="a whole UTC hour, excluded, at most 366 days after --from (default: the next hour)",
    )
    out.add_argument("--team", help="only this team's budgets")
    budget_option(out)
    out.add_argument(
        "--format",
        choices=("csv", "parquet"),
        default="csv",
        help="csv (default), or parquet (the server needs the `focus` extra)",
    )
    out.add_argument(
        "-o", "--output", default="-", help="the file to write (default: standard output)"
    )
