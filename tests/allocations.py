"""The most memory a piece of work held at once, counted by PyTorch's own profiler: the peak of
the running sum of its allocation records (a free is a negative one), in the order they were
made. On the CPU the tensors are the same, of the same sizes, as on a GPU (the kernels differ,
not what they allocate); what existed before the work is not counted."""

from __future__ import annotations

import itertools
from collections.abc import Callable

from torch.profiler import ProfilerActivity, profile


def peak_bytes(work: Callable[[], object]) -> int:
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        work()
    assert prof.profiler is not None
    records = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    ordered = sorted(records, key=lambda e: e.start_ns())
    return max(itertools.accumulate(e.nbytes() for e in ordered), default=0)
