"""The memory model against published measurements (tests/preflight_cases/cases.json).

Every case is a table test: a published fit must not be refused (no_go), a published
out-of-memory run must not be admitted (go). The summary of the model's error, by part and
family, is printed (`pytest -s`) and asserted against the figures measured when the model
last changed: the issue's targets (median |error| <= 10%, 80% within ±15%) are not met yet,
so the bounds below are the honest measured figures, and a change that worsens them fails.
The interval's per-family errors (calibration.FAMILY_ERROR) must be the tuning part's own.
"""

from __future__ import annotations

import math

import pytest

from governor.domain.preflight.calibration import FAMILY_ERROR, POOLED_ERROR
from governor.domain.preflight.rules import Verdict
from tests.preflight_cases.validation import CASES, SET, Judged, Summary, judge

JUDGED = [judge(c) for c in CASES]
MEASURED = [j for j in JUDGED if j.error is not None]


def part(name: str) -> list[Judged]:
    return [j for j in MEASURED if j.case["part"] == name]


def test_the_set_is_large_enough_and_cited() -> None:
    assert len(MEASURED) >= 30
    assert len({c["source"]["url"] for c in CASES}) >= 4
    for c in CASES:
        assert c["source"]["url"] and c["source"]["where"] and c["published"] and c["left_out"]
        assert (c["measured"] is None) == (c["metric"] is None)
        assert c["metric"] in (None, "allocated", "reserved", "device")
    assert SET["left_out"], "the cases left out are counted"
    assert {j.case["part"] for j in MEASURED} == {"tuning", "held_out"}


@pytest.mark.parametrize("judged", [j for j in JUDGED if j.case["outcome"] == "fit"], ids=str)
def test_no_published_fit_is_refused(judged: Judged) -> None:
    assert judged.admission.assessment.memory_band is not Verdict.NO_GO, judged.case["id"]


# Published out-of-memory runs the model still admits: LitGPT's FSDP runs load the whole
# model on every rank before sharding, a load-time peak the model has no term for yet.
ADMITTED_OOM = {"litgpt-lora-llama-2-13b-none-mb1-2gpu", "litgpt-lora-falcon-40b-none-mb1-4gpu"}


@pytest.mark.parametrize("judged", [j for j in JUDGED if j.case["outcome"] == "oom"], ids=str)
def test_a_published_oom_is_not_admitted(judged: Judged) -> None:
    band = judged.admission.assessment.memory_band
    if judged.case["id"] in ADMITTED_OOM:
        assert band is Verdict.GO  # known miss, counted in docs/preflight.md
    else:
        assert band is not Verdict.GO, judged.case["id"]


# Measured on this model (docs/preflight.md, "Validation"): (median |error|, share within
# ±15%) per part. Bounds, not targets: median <= 10% and >= 80% within ±15% are not met.
MEASURED_BOUNDS = {"tuning": (0.225, 0.38), "held_out": (0.29, 0.20)}


@pytest.mark.parametrize("name", ["tuning", "held_out"])
def test_error_summary_within_measured_bounds(name: str) -> None:
    summary = Summary(name, [j.error for j in part(name) if j.error is not None])
    print()
    print(summary.line())
    for family in sorted({j.family for j in part(name)}):
        print("  " + Summary(family, [j.error for j in part(name) if j.family == family]).line())
    median, within = MEASURED_BOUNDS[name]
    assert summary.median <= median
    assert summary.within >= within


def test_interval_errors_are_the_tuning_parts_own() -> None:
    tuning = part("tuning")
    pooled = Summary("pooled", [j.error for j in tuning if j.error is not None]).p90
    assert math.isclose(POOLED_ERROR, math.ceil(pooled * 100) / 100)
    families = {j.family for j in tuning}
    assert set(FAMILY_ERROR) == families
    for family in families:
        p90 = Summary(family, [j.error for j in tuning if j.family == family]).p90
        assert math.isclose(FAMILY_ERROR[family], math.ceil(p90 * 100) / 100), family
