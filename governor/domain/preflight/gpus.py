"""GPU classes the governor knows: the memory the driver really reports, and the cheapest
on-demand rate seen for the class.

A plan may not claim more usable memory than the class reports; a rate far below the
cheapest on-demand quote is a typo or a stale page, not a bargain.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal


@dataclass(frozen=True)
class GpuClass:
    name: str
    usable_mib: int
    lowest_on_demand_usd: Decimal  # per GPU-hour, the lowest on-demand quote seen


A100_40GB = GpuClass("A100-40GB", 40_509, Decimal("1.00"))  # torch: 39.56 GiB total capacity
A100_80GB = GpuClass("A100-80GB", 81_920, Decimal("1.19"))
H100 = GpuClass("H100", 81_559, Decimal("1.99"))
H200 = GpuClass("H200", 143_771, Decimal("3.59"))
B200 = GpuClass("B200", 183_359, Decimal("5.98"))

_NAMES = {
    "A10040GB": A100_40GB,
    "A100SXM440GB": A100_40GB,
    "A10080GB": A100_80GB,
    "A100SXM480GB": A100_80GB,
    "H100": H100,
    "H100SXM": H100,
    "H10080GBHBM3": H100,
    "H200": H200,
    "H200SXM": H200,
    "H200NVL": H200,
    "B200": B200,
}


def gpu_class(gpu_type: str) -> GpuClass | None:
    """The class for a GPU name, ignoring case, spaces, dashes and underscores."""
    return _NAMES.get(re.sub(r"[^A-Z0-9]", "", gpu_type.upper()))
