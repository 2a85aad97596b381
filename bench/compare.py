"""One benchmark at two commits, interleaved: a change measured before and after on one
machine in one sitting, so that what the machine does meanwhile weighs on both alike.

Each commit is checked out in a worktree of its own (removed at the end); the benchmark
script of that commit runs there, with that commit's code, `--repeats` times, before and
after taking turns (before, after, before, after, ...). The script's JSON lines are kept with
the side and the round they came from (`--out`), and for each measurement (the same `db`,
`measure`, `task`, `pods`, `pods_in_budget` and `jobs`) the median of each ratio the script
reports (its keys ending in `ratio`, or starting with `ratio_`; or the keys named by `--key`)
is printed for both sides, with after over before: below 1.0 a ratio to `/healthz` (or a
time) got better.

    .venv/bin/python bench/compare.py --before 34d3981 --after HEAD -- \\
        heartbeats.py --db both --measures sequential,closed
    .venv/bin/python bench/compare.py --before HEAD~1 --after HEAD --repeats 5 -- \\
        heartbeats.py --db sqlite --measures sequential
    .venv/bin/python bench/compare.py --before HEAD~1 --key best_s -- \\
        enforce_scale.py --pods 1000,10000 --db sqlite
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
IDENTITY = ("db", "measure", "task", "pods", "pods_in_budget", "jobs")


def worktree(commit: str, into: Path) -> Path:
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(into), commit],
        check=True,
    )
    return into


def run(tree: Path, script: Sequence[str]) -> list[dict[str, Any]]:
    """The script's JSON lines, run from `tree` with `tree`'s code."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, str(tree / "bench" / script[0]), *script[1:]],
        cwd=tree,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        check=True,
    )
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def compared(record: dict[str, Any], keys: Sequence[str] = ()) -> dict[str, float]:
    """The record's figures to compare: `keys`, or else every ratio it reports."""
    return {
        key: value
        for key, value in record.items()
        if (key in keys if keys else key.endswith("ratio") or key.startswith("ratio_"))
        and isinstance(value, int | float)
    }


def summary(records: list[dict[str, Any]], keys: Sequence[str] = ()) -> list[str]:
    """One line per measurement and figure: the medians of both sides and after / before."""
    values: defaultdict[tuple[Any, ...], defaultdict[str, list[float]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for record in records:
        identity = tuple(record.get(key) for key in IDENTITY)
        for key, value in compared(record, keys).items():
            values[(*identity, key)][record["side"]].append(value)
    lines = [f"{'measurement':<48} {'before':>8} {'after':>8} {'after/before':>12}  (medians)"]
    for (*identity, key), sides in values.items():
        name = " ".join(str(part) for part in identity if part is not None) + f" {key}"
        if not sides["before"] or not sides["after"]:  # measured on one side only
            continue
        before, after = (statistics.median(sides[side]) for side in ("before", "after"))
        change = f"{after / before:>12.3f}" if before else f"{'-':>12}"
        lines.append(f"{name:<48} {before:>8.3f} {after:>8.3f} {change}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--before", required=True, help="the commit before the change")
    parser.add_argument("--after", default="HEAD", help="the commit after it (default HEAD)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each (default 3)")
    parser.add_argument("--out", type=Path, help="also write every record here, as JSON lines")
    parser.add_argument(
        "--key", action="append", default=[], help="a figure to compare (default: the ratios)"
    )
    parser.add_argument("script", nargs=argparse.REMAINDER, help="-- SCRIPT.py [ITS ARGUMENTS]")
    args = parser.parse_args(argv)
    script = args.script[1:] if args.script[:1] == ["--"] else args.script
    if not script or not script[0].endswith(".py"):
        parser.error("name the benchmark after --, e.g. -- heartbeats.py --measures sequential")
    records: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-compare-") as scratch:
        trees = {
            side: worktree(commit, Path(scratch) / side)
            for side, commit in (("before", args.before), ("after", args.after))
        }
        try:
            for round_ in range(1, args.repeats + 1):
                for side, tree in trees.items():
                    print(f"round {round_} of {args.repeats}: {side}", file=sys.stderr)
                    records += [{"side": side, "round": round_, **r} for r in run(tree, script)]
        finally:
            for tree in trees.values():
                subprocess.run(
                    ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                    check=False,
                )
    if args.out:
        args.out.write_text("".join(json.dumps(r) + "\n" for r in records))
    print("\n".join(summary(records, args.key)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
