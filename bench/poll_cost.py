"""What one NvmlSource poll of 8 GPUs costs, against 1 GPU measured in the same run.

Both run over the fake NVML driver layer (the real pynvml wrappers, Python functions in place
of libnvidia-ml), so the absolute numbers include the fake's own work and say little about a
real driver; the ratio and the per-GPU cost are the point. Between polls the fake's clock moves
--step-s seconds (default 5: a daemon polling every 5 s), so each poll drains 6 samples per
second per GPU, as against a real driver; --step-s 0 measures the no-new-samples path instead.

    .venv/bin/python bench/poll_cost.py
    .venv/bin/python bench/poll_cost.py --quick    # 20 polls: what CI runs

One JSON line, then a summary.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time

from governor.adapters.telemetry.nvml import NvmlSource
from governor.domain.ports import SystemClock
from governor.fakes.nvml import FakeNvml, healthy


class SteppedMonotonic:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def measure(gpus: int, polls: int, step_s: float) -> list[float]:
    """Seconds per poll of `gpus` fake H100s, after warming up (init, first drain)."""
    monotonic = SteppedMonotonic()
    with FakeNvml(healthy(gpus), monotonic=monotonic):
        source = NvmlSource(SystemClock())
        for _ in range(20):
            monotonic.now += step_s
            reading = source.read()
        assert len(reading.gpus) == gpus, reading
        times = []
        gc.disable()
        try:
            for _ in range(polls):
                monotonic.now += step_s
                start = time.perf_counter()
                source.read()
                times.append(time.perf_counter() - start)
        finally:
            gc.enable()
            source.close()
    return times


def summary(times: list[float]) -> tuple[float, float]:
    """Median and p95, in microseconds."""
    p95 = statistics.quantiles(times, n=20)[-1]
    return statistics.median(times) * 1e6, p95 * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--polls", type=int, default=2000, help="timed polls (default 2000)")
    parser.add_argument("--gpus", type=int, default=8, help="GPUs in the measured case")
    parser.add_argument(
        "--step-s", type=float, default=5.0, help="fake seconds between polls (default 5)"
    )
    parser.add_argument("--quick", action="store_true", help="20 polls: what CI runs")
    args = parser.parse_args(argv)
    if args.quick:
        args.polls = 20

    base_median, base_p95 = summary(measure(1, args.polls, args.step_s))
    many_median, many_p95 = summary(measure(args.gpus, args.polls, args.step_s))
    samples = round(6 * args.step_s)
    record = {
        "bench": "poll_cost",
        "polls": args.polls,
        "gpus": args.gpus,
        "samples_per_gpu_per_poll": samples,
        "baseline_median_us": round(base_median, 1),
        "baseline_p95_us": round(base_p95, 1),
        "median_us": round(many_median, 1),
        "p95_us": round(many_p95, 1),
        "median_ratio": round(many_median / base_median, 3),
        "p95_ratio": round(many_p95 / base_p95, 3),
    }
    print(json.dumps(record))

    print(f"NvmlSource.read() over the fake NVML, {args.polls} polls, {samples} samples/GPU/poll")
    print(f"  baseline 1 GPU     median {base_median:8.1f} µs   p95 {base_p95:8.1f} µs")
    print(f"  {args.gpus} GPUs{'':11} median {many_median:8.1f} µs   p95 {many_p95:8.1f} µs")
    print(f"  per GPU ({args.gpus} GPUs)   median {many_median / args.gpus:8.1f} µs")
    print(
        f"  ratio {args.gpus} GPUs / 1 GPU: median {many_median / base_median:.2f}x, "
        f"p95 {many_p95 / base_p95:.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
