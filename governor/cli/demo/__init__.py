"""`governor demo`: its options; the demo itself is pilot.py, the plan it checks plan.py."""

from __future__ import annotations

import argparse

from governor.cli.verbs import Commands


def _demo(args: argparse.Namespace) -> int:
    from governor.cli.demo.pilot import run_demo

    return run_demo(port=args.port, keep_serving=not args.exit)


def add_command(commands: Commands) -> None:
    demo = commands.add_parser(
        "demo",
        help="watch a simulated pilot approach its ceiling, save, and stop (no cloud needed)",
    )
    demo.add_argument("--port", type=int, default=8000, help="port to serve on (default 8000)")
    demo.add_argument("--exit", action="store_true", help="exit when the demo ends")
    demo.set_defaults(handler=_demo)
