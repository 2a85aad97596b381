"""The GPU table: the memory each card's driver reports, what the driver keeps of it, where the
figures come from, and what a verdict says about a card's memory (verified, derived from a
datasheet, or unchecked).
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from governor.domain.preflight.gpus import (
    GPUS,
    RESERVES,
    UNREAD_RESERVE_MIB,
    Provenance,
    gpu_class,
)
from governor.domain.preflight.rules import Admission, Verdict, admit
from governor.services.plans.document import PlanIn
from tests.plans import variant

# The memory rules on the modeled peak: the interval's own effect is tested with the seed pilot
# and the validation set.
pytestmark = pytest.mark.usefixtures("exact_model")

FRESH = date(2026, 10, 8)
VERIFIED, DERIVED = Provenance.VERIFIED, Provenance.DERIVED
DOCS = Path(__file__).parents[4] / "docs" / "preflight.md"

# (the name as nvidia-smi or rocm-smi prints it, the total in MiB the table holds, provenance)
CARDS = [
    ("Tesla V100-SXM2-16GB", 16_384, VERIFIED),
    ("Tesla V100-PCIE-32GB", 32_768, VERIFIED),
    ("Tesla T4", 15_360, VERIFIED),
    ("NVIDIA A10", 23_028, VERIFIED),
    ("NVIDIA A10G", 23_028, VERIFIED),
    ("NVIDIA L4", 23_034, VERIFIED),
    ("NVIDIA L40", 46_068, VERIFIED),
    ("NVIDIA L40S", 46_068, VERIFIED),
    ("NVIDIA A100-SXM4-40GB", 40_960, VERIFIED),
    ("NVIDIA A100-PCIE-40GB", 40_960, VERIFIED),
    ("NVIDIA A100-SXM4-80GB", 81_920, VERIFIED),
    ("NVIDIA A100 80GB PCIe", 81_920, VERIFIED),
    ("NVIDIA RTX A6000", 49_140, VERIFIED),
    ("NVIDIA RTX 6000 Ada Generation", 49_140, VERIFIED),
    ("Quadro RTX 8000", 49_152, VERIFIED),
    ("Quadro RTX 6000", 24_576, VERIFIED),
    ("NVIDIA H100 PCIe", 81_559, VERIFIED),
    ("NVIDIA H100 80GB HBM3", 81_559, VERIFIED),
    ("NVIDIA H100 NVL", 95_830, VERIFIED),
    ("NVIDIA H200", 143_771, VERIFIED),
    ("NVIDIA H200 NVL", 143_771, VERIFIED),
    ("NVIDIA GH200 480GB", 97_871, VERIFIED),
    ("NVIDIA B200", 183_359, VERIFIED),
    ("NVIDIA B300 SXM6 AC", 275_040, VERIFIED),
    ("NVIDIA GB200", 189_471, VERIFIED),
    ("NVIDIA GB300", 284_208, VERIFIED),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", 97_887, VERIFIED),
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", 97_887, VERIFIED),
    ("AMD Instinct MI250X", 65_520, VERIFIED),  # one GCD; the card is two
    ("AMD Instinct MI250", 65_520, DERIVED),
    ("AMD Instinct MI300X", 196_288, VERIFIED),
    ("AMD Instinct MI325X", 261_824, DERIVED),
]


@pytest.mark.parametrize(("name", "mib", "memory"), CARDS, ids=[c[0] for c in CARDS])
def test_a_card_is_found_by_the_name_its_driver_prints(
    name: str, mib: int, memory: Provenance
) -> None:
    gpu = gpu_class(name)
    assert gpu is not None
    assert (gpu.total_mib, gpu.memory) == (mib, memory)


# (card, the driver's reserve in MiB, usable MiB): the largest reserve read on each
RESERVED = [
    ("NVIDIA A100-SXM4-80GB", 834, 81_086),  # 79.19 GiB (PyTorch: 79.25 where 763 is kept)
    ("NVIDIA H100 80GB HBM3", 564, 80_995),
    ("NVIDIA B300 SXM6 AC", 925, 274_115),  # torch and vLLM: 267.69 GiB
    ("Tesla T4", 393, 14_967),
    ("AMD Instinct MI300X", 0, 196_288),  # PyTorch sees rocm-smi's whole total
    ("NVIDIA H100 PCIe", UNREAD_RESERVE_MIB, 81_559 - UNREAD_RESERVE_MIB),  # none read
]


@pytest.mark.parametrize(("name", "reserved", "usable"), RESERVED, ids=[r[0] for r in RESERVED])
def test_usable_memory_is_the_total_less_the_drivers_reserve(
    name: str, reserved: int, usable: int
) -> None:
    gpu = gpu_class(name)
    assert gpu is not None
    assert (gpu.reserve.mib, gpu.usable_mib) == (reserved, usable)


def test_every_reserve_was_read_and_the_unread_one_is_the_largest() -> None:
    """Every card has a reading but the H100 PCIe; a card without one (or not on file) takes
    the largest reserve read, 1,103 MiB on a GH200, where the readings run from 240 MiB."""
    unread = [gpu.name for gpu in GPUS if gpu.name not in RESERVES]
    assert unread == ["H100-PCIe"]
    assert UNREAD_RESERVE_MIB == 1_103
    assert min(r.mib for r in RESERVES.values() if r.mib) == 240
    assert set(RESERVES) <= {gpu.name for gpu in GPUS}


@pytest.mark.parametrize("name", ["A100-40GB", "A100-80GB", "H100", "H100 SXM", "H200", "B200"])
def test_the_names_plans_already_use_still_resolve(name: str) -> None:
    assert gpu_class(name) is not None
    assert gpu_class(name.lower().replace("-", " ")) is gpu_class(name)


def test_every_name_and_alias_leads_to_one_card_only() -> None:
    for gpu in GPUS:
        assert gpu_class(gpu.name) is gpu
        for alias in gpu.aliases:
            assert gpu_class(alias) is gpu, alias
    assert len({gpu.name for gpu in GPUS}) == len(GPUS)


def test_every_source_is_resolved_in_the_docs() -> None:
    docs = DOCS.read_text()
    for gpu in GPUS:
        assert f"[{gpu.source}]" in docs, gpu.source
        if gpu.reserve.source is not None:
            assert f"[{gpu.reserve.source}]" in docs, gpu.reserve.source


def check(changes: dict[str, Any], rate: str = "4.59") -> Admission:
    doc = variant({**changes, "hardware.rate_usd_per_gpu_hour": float(rate)})
    return admit(PlanIn.model_validate(doc).to_plan(), FRESH, Decimal(500))


def on(gpu_type: str, mib: int) -> dict[str, Any]:
    return {"hardware.gpu_type": gpu_type, "hardware.usable_mib_per_gpu": mib}


def test_an_unknown_card_is_admitted_with_its_memory_unchecked() -> None:
    admission = check(on("NVIDIA H20", 97_871))
    assert admission.verdict is Verdict.GO
    finding = admission.finding("usable_memory")
    assert finding is not None and finding.verdict is Verdict.GO
    assert "not checked" in finding.message and "less the 1103 MiB" in finding.message
    assert finding.evidence["usable_memory"] == "unchecked"
    assert (finding.evidence["reserved_mib"], finding.evidence["reserved_source"]) == (1_103, None)
    memory = admission.as_json()["memory"]
    assert (memory["usable_memory"], memory["usable_source"]) == ("unchecked", None)
    assert admission.assessment.memory.usable_gib == pytest.approx((97_871 - 1_103) / 1024)


def test_a_derived_figure_is_said_to_be_derived() -> None:
    admission = check(on("MI325X", 261_824))
    finding = admission.finding("usable_memory")
    assert finding is not None and finding.verdict is Verdict.GO
    assert "derived from its datasheet" in finding.message
    fit = admission.finding("memory_fit")
    assert fit is not None
    assert (fit.evidence["usable_memory"], fit.evidence["usable_source"]) == (
        "derived",
        "AMD-MI325X",
    )
    assert admission.as_json()["memory"]["usable_source"] == "AMD-MI325X"


def test_a_verified_card_needs_no_memory_finding_and_the_verdict_names_its_source() -> None:
    admission = check({})  # the worked example on an H200
    assert admission.finding("usable_memory") is None
    memory = admission.as_json()["memory"]
    assert (memory["usable_memory"], memory["usable_source"]) == ("verified", "SMI-H200")
    assert (memory["reserved_mib"], memory["reserved_source"]) == (700, "RSV-GLS")
    assert memory["usable_gib"] == round((143_771 - 700) / 1024, 2)


def test_a_plan_claiming_the_marketing_figure_gets_the_reported_one() -> None:
    admission = check(on("NVIDIA B300 SXM6 AC", 288 * 1024))
    assert admission.assessment.memory.usable_gib == pytest.approx((275_040 - 925) / 1024)
    finding = admission.finding("usable_memory")
    assert finding is not None and "the reported figure is used" in finding.message


def test_a_card_with_no_on_demand_quote_skips_the_rate_check() -> None:
    assert check(on("L40S", 46_068), rate="0.05").finding("rate_plausible") is None
    assert check(on("B300", 275_040), rate="3.00").finding("rate_plausible") is not None
