"""bench/poll_cost.py, run once at a tiny size over the fake NVML driver layer.

Checked: exit 0, one JSON line with the fields its readers use, and sane values (every time
positive, the ratios those of the times). No timing is asserted.
"""

from __future__ import annotations

import pytest

from tests.bench.scripts import run_plain


def test_poll_cost_compares_eight_gpus_with_one() -> None:
    [record] = run_plain("poll_cost.py", "--quick")
    assert (record["bench"], record["polls"], record["gpus"]) == ("poll_cost", 20, 8)
    assert record["samples_per_gpu_per_poll"] == 30  # 6 a second, 5 s apart
    for key in ("baseline_median_us", "baseline_p95_us", "median_us", "p95_us"):
        assert record[key] > 0
    ratio = record["median_us"] / record["baseline_median_us"]
    assert record["median_ratio"] == pytest.approx(ratio, rel=0.01)
