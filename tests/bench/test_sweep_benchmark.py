"""bench/sweep.py, run once at a tiny size (--quick) on SQLite.

Checked: exit 0, one JSON line per pass with the fields its readers use, and what it shows
about the sweep: the baseline account is wholly governed, the first and steady passes find
the same ungoverned pods, and each pass's ratio and added seconds are those of its seconds
against the baseline's. No timing is asserted.
"""

from __future__ import annotations

import pytest

from tests.bench.scripts import run_plain


def test_the_sweep_bench_times_a_governed_account_then_its_ungoverned_pods() -> None:
    records = run_plain("sweep.py", "--quick")
    assert [r["pass"] for r in records] == ["baseline", "first", "steady"]
    baseline = records[0]
    for r in records:
        assert r["bench"] == "sweep" and r["db"] == "sqlite" and r["listed"] == 30
        assert r["seconds"] > 0 and r["goal_added_s"] == 1.0
        assert r["ratio"] == pytest.approx(r["seconds"] / baseline["seconds"], rel=0.01)
        assert r["added_s"] == pytest.approx(r["seconds"] - baseline["seconds"], abs=1e-3)
    assert [r["ungoverned"] for r in records] == [0, 5, 5]
