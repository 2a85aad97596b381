"""bench/compare.py: one benchmark at two commits, interleaved, summarised as medians."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench.scripts import BENCH, TIMEOUT_S
from tests.programs import program

spec = importlib.util.spec_from_file_location("compare", BENCH / "compare.py")
assert spec is not None and spec.loader is not None
compare = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare)


def test_the_summary_gives_each_measurements_medians_and_after_over_before() -> None:
    records = [
        {"side": side, "db": "sqlite", "measure": "sequential", "pods_in_budget": 1,
         "ratio_p50": value, "p50_ms": 9.9}
        for side, value in [("before", 2.0), ("after", 1.0), ("before", 2.2), ("after", 1.1),
                            ("before", 9.0), ("after", 1.2)]
    ]  # fmt: skip
    records.append({"side": "before", "db": "sqlite", "measure": "closed_loop", "ratio": 0.5})
    records.append({"side": "after", "db": "sqlite", "measure": "closed_loop", "ratio": 0.6})
    records.append({"side": "after", "db": "sqlite", "measure": "open_loop", "ratio": 0.7})
    records.append({"side": "before", "db": "sqlite", "measure": "open_loop", "ratio": None})
    header, sequential, closed = compare.summary(records)  # open_loop: on one side only
    assert header.split()[:4] == ["measurement", "before", "after", "after/before"]
    assert sequential.split() == ["sqlite", "sequential", "1", "ratio_p50", "2.200", "1.100",
                                  "0.500"]  # fmt: skip
    assert closed.split() == ["sqlite", "closed_loop", "ratio", "0.500", "0.600", "1.200"]


def test_named_figures_are_compared_instead_of_the_ratios() -> None:
    records = [
        {"side": "before", "db": "sqlite", "task": "enforce", "pods": 1000, "best_s": 0.2,
         "ratio": 3.0},
        {"side": "after", "db": "sqlite", "task": "enforce", "pods": 1000, "best_s": 0.1,
         "ratio": 3.0},
    ]  # fmt: skip
    _, enforce = compare.summary(records, ["best_s"])
    assert enforce.split() == ["sqlite", "enforce", "1000", "best_s", "0.200", "0.100", "0.500"]


@pytest.mark.e2e
def test_a_quick_comparison_of_a_commit_with_itself(tmp_path: Path) -> None:
    out = tmp_path / "records.jsonl"
    done = subprocess.run(
        [sys.executable, str(BENCH / "compare.py"), "--before", "HEAD", "--after", "HEAD",
         "--repeats", "1", "--out", str(out), "--",
         "heartbeats.py", "--quick", "--db", "sqlite", "--measures", "sequential"],
        capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert {(r["side"], r["round"]) for r in records} == {("before", 1), ("after", 1)}
    assert all(r["measure"] == "sequential" and r["ratio_p50"] > 0 for r in records)
    lines = done.stdout.splitlines()
    assert lines[0].startswith("measurement") and any("ratio_p50" in line for line in lines)
    worktrees = subprocess.run(
        [program("git"), "worktree", "list"], capture_output=True, text=True, check=True
    ).stdout
    assert "bench-compare-" not in worktrees  # removed again
