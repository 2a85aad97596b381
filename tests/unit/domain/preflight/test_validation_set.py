"""The memory model against published measurements (tests/preflight_cases/cases.json).

Every case is a table test of its outcome (the published fits refused and the published
out-of-memory runs admitted, each named). The summary of the model's error, by part and
family, and for the sources added after the constants were first chosen, is printed after
every test run (tests/conftest.py) and asserted against the targets (median |error| <= 10%,
80% within ±15%) on the tuning and the held-out parts, and against the figures measured when
the set or the model last changed, so that a change that worsens them fails. The interval's
per-family errors (calibration.FAMILY_ERROR) must be the whole tuning part's own, the new
sources' tuning cases included.
"""

from __future__ import annotations

import math

import pytest

from governor.domain.preflight.calibration import FAMILY_ERROR, POOLED_ERROR
from governor.domain.preflight.rules import Verdict
from tests.preflight_cases.validation import (
    CASES,
    NEW_SOURCES,
    SET,
    Judged,
    Summary,
    device_errors,
    groups,
    judge,
    quantile,
)

JUDGED = [judge(c) for c in CASES]
MEASURED = [j for j in JUDGED if j.error is not None]


def part(name: str) -> list[Judged]:
    return [j for j in MEASURED if j.case["part"] == name]


def earlier(judged: list[Judged]) -> list[Judged]:
    """The cases of the sources the constants were chosen on (no `round`)."""
    return [j for j in judged if "round" not in j.case]


def test_the_set_is_large_enough_and_cited() -> None:
    assert len(MEASURED) >= 30
    assert len({c["source"]["url"] for c in CASES}) >= 4
    for c in CASES:
        assert c["source"]["url"] and c["source"]["where"] and c["published"] and c["left_out"]
        assert (c["measured"] is None) == (c["metric"] is None)
        assert c["metric"] in (None, "allocated", "reserved", "device")
    assert SET["left_out"], "the cases left out are counted"
    assert {j.case["part"] for j in MEASURED} == {"tuning", "held_out"}


def test_new_sources_are_new_and_split_by_the_sets_rule() -> None:
    """The sources added after the constants were chosen are marked, new to the set, at least
    three, and split as every source is: every third case of a source, by position, held out."""
    new = [c for c in CASES if "round" in c]
    assert all(c["round"] == NEW_SOURCES for c in new)
    earlier_urls = {c["source"]["url"] for c in CASES if "round" not in c}
    new_urls = {c["source"]["url"] for c in new}
    assert len(new_urls) >= 3 and not new_urls & earlier_urls
    assert sum(c["measured"] is not None for c in new) >= 10
    assert any(c.get("moe") and c["measured"] is not None for c in new)
    for url in new_urls:
        of_source = [c["part"] for c in new if c["source"]["url"] == url]
        assert of_source == [
            "held_out" if i % 3 == 2 else "tuning" for i in range(len(of_source))
        ], url


def misses(judged: list[Judged]) -> tuple[set[str], set[str]]:
    """The published fits refused (no_go) and the published out-of-memory runs admitted (go)."""
    refused = {
        j.case["id"]
        for j in judged
        if j.case["outcome"] == "fit" and j.admission.assessment.memory_band is Verdict.NO_GO
    }
    admitted = {
        j.case["id"]
        for j in judged
        if j.case["outcome"] == "oom" and j.admission.assessment.memory_band is Verdict.GO
    }
    return refused, admitted


# Findings of the sources added after the constants were chosen, kept rather than dropped
# (docs/preflight.md, "Validation"); each named so that any other miss fails the tests.
REFUSED_FITS: set[str] = set()  # Mistral 7B's full fine-tune at batch 8 was, until the step
# counted its foreach temporary and freed gradients: its peak is the optimizer step's (67.5
# GiB measured at batch 4 and 8 alike, 5 x its 13.5 GiB of bf16 weights), not the pass's.
ADMITTED_OOMS: set[str] = set()
# On the modeled peak alone (the verdict's rule without its interval), one: Llama 2 70B QLoRA
# under FSDP on 2 A100 80GB at batch 4 per GPU, 56.4 GiB modeled (71% of the 79.2 GiB a process
# can have), go. Its batch-2 twin measured 22% over the model. With the interval (the verdict),
# its upper edge is 71.6 GiB, 90.4%: canary only, since usable memory leaves out the driver's
# reserve (89.5% of the 80.0 GiB total before, go).
ADMITTED_ON_THE_POINT = {"fms-qlora-llama-2-70b-bs4-2gpu"}


@pytest.mark.usefixtures("exact_model")
def test_outcomes_on_the_modeled_peak() -> None:
    """Judged on the point figure: no published fit refused, no published OOM admitted, but
    for the findings named above. The OOMs LitGPT ran into on 2 and 4 A100s are no_go by the
    gradients FSDP accumulates unsharded under no_sync()."""
    assert misses([judge(c) for c in CASES]) == (REFUSED_FITS, ADMITTED_ON_THE_POINT)


# With the interval's upper edge deciding go where a family's error is over 10%, the fits that
# ran near their card's capacity are canary only, never refused: only a modeled peak that
# does not fit is no_go. Measured, not a target: docs/preflight.md, "Validation".
NOT_GO_ON_THE_INTERVAL = {
    "litgpt-lora-llama-2-13b-none-mb1-1gpu",
    "litgpt-lora-llama-2-13b-none-mb1-4gpu",
    "torchtune-lora-llama2-7b-4090",
    "torchtune-lora-llama2-7b-2x4090",  # an RTX 4090 is not on file: the largest reserve read
    "torchtune-full-llama2-7b-4090",
    "torchtune-full-llama2-7b-4x4090",
    "torchtune-full-llama2-70b-8xa100",
    *(f"unsloth-hf-fa2-llama3.1-8b-qlora-{gb}gb" for gb in (12, 16, 24, 40, 48, 80)),
    "fms-full-mistral-7b-bs4-1gpu",
    "fms-full-mistral-7b-bs8-1gpu",
    "torchtune-flags-full-llama3.2-3b-packed",
    "deepspeed-zero3-llama-7b-bs2",
    "peft-deepspeed-zero3-qlora-llama2-70b-2x40gb",
    "qwen-q-lora-72b-seq8192",
}


def test_outcomes_on_the_interval() -> None:
    assert misses(JUDGED) == (REFUSED_FITS, ADMITTED_OOMS)
    held = {
        j.case["id"]
        for j in JUDGED
        if j.case["outcome"] == "fit" and j.admission.assessment.memory_band is Verdict.CANARY_ONLY
    }
    assert held == NOT_GO_ON_THE_INTERVAL


# Measured on this model (docs/preflight.md, "Validation"): (median |error|, share within
# ±15%) per group, bounds that fail a change that worsens them. Both parts meet the targets
# (below); so do the added sources alone. The point errors do not depend
# on the interval's constants: they are the same before and after these were recomputed.
MEASURED_BOUNDS = {
    "tuning": (0.043, 0.82),
    "held_out": (0.080, 0.90),
    "new_sources": (0.064, 0.80),
    "earlier tuning": (0.040, 0.88),
    "earlier held_out": (0.061, 0.90),
}
TARGET_MEDIAN, TARGET_WITHIN = 0.10, 0.80  # the targets, for the tuning and held-out parts


def group(name: str) -> list[Judged]:
    if name.startswith("earlier "):
        return earlier(groups(MEASURED)[name.removeprefix("earlier ")])
    return groups(MEASURED)[name]


@pytest.mark.parametrize("name", list(MEASURED_BOUNDS))
def test_error_summary_within_measured_bounds(name: str) -> None:
    cases = group(name)
    summary = Summary(name, [j.error for j in cases if j.error is not None])
    print()
    print(summary.line())
    for family in sorted({j.family for j in cases}):
        print("  " + Summary(family, [j.error for j in cases if j.family == family]).line())
    median, within = MEASURED_BOUNDS[name]
    assert summary.median <= median
    assert summary.within >= within


def test_interval_errors_are_the_tuning_parts_own() -> None:
    """Chosen on the whole tuning part, the new sources' tuning cases included; their held-out
    cases, as every source's, are judged, never chosen against."""
    tuning = part("tuning")
    pooled = Summary("pooled", [j.error for j in tuning if j.error is not None]).p90
    assert math.isclose(POOLED_ERROR, math.ceil(pooled * 100) / 100)
    families = {j.family for j in tuning}
    assert set(FAMILY_ERROR) == families
    for family in families:
        p90 = Summary(family, [j.error for j in tuning if j.family == family]).p90
        assert math.isclose(FAMILY_ERROR[family], math.ceil(p90 * 100) / 100), family


@pytest.mark.parametrize("name", ["tuning", "held_out"])
def test_both_parts_meet_the_targets(name: str) -> None:
    summary = Summary(name, [j.error for j in group(name) if j.error is not None])
    assert summary.median <= TARGET_MEDIAN
    assert summary.within >= TARGET_WITHIN


# The device figure (the allocations plus the CUDA context, NCCL and the allocator's slack,
# modeled as a flat 1.5 GiB, 1 GiB and 5% of usable memory) against the nvidia-smi peaks the
# same runs published (fms-acceleration: the Hugging Face Trainer on A100 80GB). Those terms
# were set before these figures were read; measured, not a target.
DEVICE_BOUNDS = (0.056, 0.84)


def test_the_same_runs_device_figures_are_reported_and_bounded() -> None:
    errors = device_errors(JUDGED)
    assert len(errors) == 19
    summary = Summary("device, same runs", errors)
    print()
    print(summary.line())
    assert summary.median <= DEVICE_BOUNDS[0]
    assert summary.within >= DEVICE_BOUNDS[1]


def test_the_flat_overheads_sit_inside_the_measured_gap() -> None:
    """What a run holds on the device beyond its allocator's peak, both published for each
    run: 3.8 to 18.6 GiB, varying with the run, where the model adds the same 5.5 GiB on one
    A100 80GB (6.5 GiB on two, with NCCL's). The flat figure sits between the measured gaps'
    quartiles: right on the middle run, short by up to 13 GiB on the others."""
    measured, modeled = [], set()
    for j in JUDGED:
        device, allocated = j.device_gib, j.measured_gib
        if device is None or allocated is None:
            continue
        measured.append(device - allocated)
        memory = j.admission.assessment.memory
        modeled.add(round(memory.predicted_gib("device") - memory.predicted_gib("allocated"), 2))
    assert modeled == {5.46, 6.46}
    assert round(min(measured), 1) == 3.8 and round(max(measured), 1) == 18.6
    assert quantile(measured, 0.25) < min(modeled) and max(modeled) < quantile(measured, 0.75)
