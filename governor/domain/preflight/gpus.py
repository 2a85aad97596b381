"""GPU classes the governor knows: the memory the driver really reports, what it keeps of it,
and the cheapest on-demand rate seen for the class.

The total is what the driver reports for one device (nvidia-smi / NVML memory.total, rocm-smi
VRAM total), never the marketing figure, read on a current driver in the card's default ECC
mode. A row is `verified` when that figure was read from a card, `derived` when it is
datasheet arithmetic still to be read from one. The driver keeps part of the total for itself
(NVML's `reserved`, nvidia-smi's "Reserved"): no process can allocate it, and CUDA's own total
(PyTorch's "total capacity") leaves it out. Usable memory is the total less that reserve. A
plan may not claim more usable memory than its class; a rate far below the cheapest on-demand
quote is a typo or a stale page, not a bargain. docs/preflight.md resolves every source key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum


class Provenance(StrEnum):
    VERIFIED = "verified"  # a driver's report, read from a card
    DERIVED = "derived"  # from the datasheet, not yet read from a card


@dataclass(frozen=True)
class GpuClass:
    name: str
    total_mib: int  # what the driver reports for one device
    memory: Provenance
    source: str  # a source key, resolved in docs/preflight.md
    lowest_on_demand_usd: Decimal | None  # per GPU-hour; None: no on-demand quote on file
    aliases: tuple[str, ...] = ()  # other names, as normalize() leaves them

    @property
    def reserve(self) -> Reserve:
        return RESERVES.get(self.name) or unread_reserve(self.total_mib)

    @property
    def usable_mib(self) -> int:
        """What one process can have: the total less the driver's reserve."""
        return self.total_mib - self.reserve.mib


@dataclass(frozen=True)
class Reserve:
    """The MiB of a card's total its driver keeps, and where that figure comes from."""

    mib: int
    source: str | None  # a source key; None: not read for this card (unread_reserve)


VERIFIED, DERIVED = Provenance.VERIFIED, Provenance.DERIVED

GPUS = (
    GpuClass("V100-16GB", 16_384, VERIFIED, "SMI-V100", None, ("V100SXM216GB", "V100PCIE16GB")),
    GpuClass("V100-32GB", 32_768, VERIFIED, "SMI-V100", None, ("V100SXM232GB", "V100PCIE32GB")),
    GpuClass("T4", 15_360, VERIFIED, "SMI-T4", None),
    GpuClass("A10", 23_028, VERIFIED, "SMI-A10", None),
    GpuClass("A10G", 23_028, VERIFIED, "SMI-A10G", None),
    GpuClass("L4", 23_034, VERIFIED, "SMI-L4", None),
    GpuClass("L40", 46_068, VERIFIED, "SMI-L40", None),
    GpuClass("L40S", 46_068, VERIFIED, "SMI-L40S", None),
    GpuClass(
        "A100-40GB",
        40_960,
        VERIFIED,
        "SMI-A100",
        Decimal("1.00"),
        ("A100SXM440GB", "A100PCIE40GB"),
    ),
    GpuClass(
        "A100-80GB",
        81_920,
        VERIFIED,
        "SMI-A100",
        Decimal("1.19"),
        ("A100SXM480GB", "A10080GBPCIE", "A100PCIE80GB"),
    ),
    GpuClass("RTX-A6000", 49_140, VERIFIED, "SMI-A6000", None, ("A6000",)),
    GpuClass("RTX-6000-Ada", 49_140, VERIFIED, "SMI-6000ADA", None, ("RTX6000ADAGENERATION",)),
    GpuClass("Quadro-RTX-8000", 49_152, VERIFIED, "SMI-QRTX", None, ("RTX8000",)),
    GpuClass("Quadro-RTX-6000", 24_576, VERIFIED, "SMI-QRTX", None),
    GpuClass("H100-PCIe", 81_559, VERIFIED, "SMI-H100", Decimal("1.99"), ("H100PCIE80GB",)),
    GpuClass(
        "H100-SXM",
        81_559,
        VERIFIED,
        "SMI-H100",
        Decimal("2.69"),
        ("H100", "H100SXM5", "H10080GBHBM3", "H100SXM580GB"),
    ),
    GpuClass("H100-NVL", 95_830, VERIFIED, "SMI-H100NVL", None),
    GpuClass("H200", 143_771, VERIFIED, "SMI-H200", Decimal("3.59"), ("H200SXM", "H200NVL")),
    GpuClass("GH200", 97_871, VERIFIED, "SMI-GH200", Decimal("2.29"), ("GH200480GB",)),
    GpuClass("B200", 183_359, VERIFIED, "SMI-B200", Decimal("5.98"), ("B200SXM6",)),
    GpuClass("B300", 275_040, VERIFIED, "SMI-B300", Decimal("6.94"), ("B300SXM6AC", "B300SXM6")),
    GpuClass("GB200", 189_471, VERIFIED, "SMI-GB200", None),
    GpuClass("GB300", 284_208, VERIFIED, "SMI-GB300", None),
    GpuClass(
        "RTX-PRO-6000-Blackwell",
        97_887,
        VERIFIED,
        "SMI-RTXPRO6000",
        None,
        (
            "RTXPRO6000",
            "RTXPRO6000BLACKWELLWORKSTATIONEDITION",
            "RTXPRO6000BLACKWELLSERVEREDITION",
            "RTXPRO6000BLACKWELLMAXQWORKSTATIONEDITION",
        ),
    ),
    # AMD: one device is one GCD (an MI250/MI250X card is two of them)
    GpuClass("MI250X", 65_520, VERIFIED, "ROCM-MI250X", None),
    GpuClass("MI250", 65_520, DERIVED, "AMD-MI250", None),
    GpuClass("MI300X", 196_288, VERIFIED, "ROCM-MI300X", None),
    GpuClass("MI325X", 261_824, DERIVED, "AMD-MI325X", None),
)


# The largest reserve read for each card on a named card (driver readings move with the driver
# version and GSP firmware); docs/preflight.md, "GPU table", gives every reading.
RESERVES = {
    "V100-16GB": Reserve(240, "RSV-V100"),
    "V100-32GB": Reserve(277, "RSV-V100"),
    "T4": Reserve(393, "RSV-T4"),
    "A10": Reserve(526, "RSV-GLS"),
    "A10G": Reserve(441, "RSV-A10G"),
    "L4": Reserve(556, "RSV-GLS"),
    "L40": Reserve(602, "RSV-L40"),
    "L40S": Reserve(609, "RSV-L40S"),
    "A100-40GB": Reserve(620, "RSV-A100"),
    "A100-80GB": Reserve(834, "RSV-A100"),
    "RTX-A6000": Reserve(569, "RSV-A6000"),
    "RTX-6000-Ada": Reserve(572, "RSV-6000ADA"),
    "Quadro-RTX-8000": Reserve(551, "RSV-QRTX"),
    "Quadro-RTX-6000": Reserve(356, "RSV-QRTX"),
    "H100-SXM": Reserve(564, "RSV-H100"),
    "H100-NVL": Reserve(598, "RSV-H100NVL"),
    "H200": Reserve(700, "RSV-GLS"),
    "GH200": Reserve(1_103, "RSV-GLS"),
    "B200": Reserve(729, "RSV-B200"),
    "B300": Reserve(925, "RSV-B300"),
    "GB200": Reserve(741, "RSV-GB200"),
    "GB300": Reserve(1_072, "RSV-GB300"),
    "RTX-PRO-6000-Blackwell": Reserve(638, "RSV-RTXPRO6000"),
    # ROCm: PyTorch sees rocm-smi's whole VRAM total (or more); an MI250 GCD is an MI250X one
    "MI250X": Reserve(0, "RSV-ROCM"),
    "MI250": Reserve(0, "RSV-ROCM"),
    "MI300X": Reserve(0, "RSV-ROCM"),
    "MI325X": Reserve(0, "RSV-ROCM"),
}
UNREAD_RESERVE_MIB = max(r.mib for r in RESERVES.values())


def unread_reserve(total_mib: int) -> Reserve:
    """A card with no reserve read (or not on file): the largest read on any card, the figures
    being 240 to 1,103 MiB whatever the card's size; never more than its total."""
    return Reserve(min(UNREAD_RESERVE_MIB, total_mib), None)


def normalize(gpu_type: str) -> str:
    """A GPU name without case, punctuation or vendor words: "NVIDIA A100-SXM4-80GB" and
    "a100 sxm4 80gb" are both "A100SXM480GB"."""
    key = re.sub(r"[^A-Z0-9]", "", gpu_type.upper())
    return re.sub(r"^(NVIDIA|AMD)?(TESLA|INSTINCT)?", "", key)


_NAMES = {key: gpu for gpu in GPUS for key in (normalize(gpu.name), *gpu.aliases)}


def gpu_class(gpu_type: str) -> GpuClass | None:
    """The class for a GPU name, as a plan or nvidia-smi writes it; None for a card not on file."""
    return _NAMES.get(normalize(gpu_type))


def same_model(a: str, b: str) -> bool:
    """Two GPU names for the same model: the same class on file or, for cards not on file,
    the same name once normalized ("NVIDIA H100 80GB HBM3" is an "H100")."""
    known_a, known_b = gpu_class(a), gpu_class(b)
    if known_a is None and known_b is None:
        return normalize(a) == normalize(b)
    return known_a is known_b
