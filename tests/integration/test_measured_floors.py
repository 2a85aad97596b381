"""Measured floors (SQLite and PostgreSQL): a run whose plan names its model keeps its peak per
GPU and phase under the plan's configuration; the next plan of the same model, recipe and
hardware is judged against it and cites it, one that differs cites it as context only, and the
report of a failed run says what floor it measured.

The reference plan on one H200 (139.7 GiB usable) models 60.6 GiB: go on its own.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from governor.db import repository as repo
from governor.domain.model import Category, Phase, RunStatus, Severity
from governor.domain.preflight.rules import Verdict
from governor.domain.telemetry import GIB, GpuProcess, GpuSample
from governor.services.runs import job_events
from governor.services.view import report
from tests.integration.conftest import Governor, check, gpu_sample, plan, register

pytestmark = pytest.mark.usefixtures("exact_model")

MODEL = {"model.id": "google/gemma-3-27b-pt", "model.revision": "r1"}


def h200(used_gib: float, uuid: str = "GPU-0") -> GpuSample:
    total = 141.0
    return replace(
        gpu_sample(used_gib=0),
        uuid=uuid,
        name="NVIDIA H200",
        memory_total_bytes=int(total * GIB),
        memory_used_bytes=int(used_gib * GIB),
        memory_free_bytes=int((total - used_gib) * GIB),
        processes=(GpuProcess(4100, int(used_gib * GIB)),),
    )


def first_run(gov: Governor, budget: str, *, used_gib: float, **changes: Any) -> str:
    """One run of the plan, its canary holding `used_gib` on its GPU, then its training less."""
    row = check(gov, budget, plan(gov, **MODEL, **changes))
    assert row.verdict is Verdict.GO
    pod = register(gov, budget, row.id)
    run = gov.run(budget, pod, timeout_s=10**6)
    gov.beat(run, step=1, phase=Phase.CANARY)
    gov.report(pod, h200(used_gib))
    gov.tick(1)
    gov.beat(run, step=3, phase=Phase.TRAINING)
    gov.report(pod, h200(used_gib - 10))
    gov.tick(1)
    return run


def memory_fit(row: Any) -> dict[str, Any]:
    return next(r for r in row.reasons if r["rule"] == "memory_fit")


def test_the_next_identical_plan_is_judged_against_the_floor_and_cites_it(
    gov: Governor,
) -> None:
    budget = gov.budget("500")
    run = first_run(gov, budget, used_gib=130.0)  # 93% of 139.7 GiB: more than modeled
    with gov.session() as s:
        kept = {(f.phase, round(f.peak_used_bytes / GIB, 1)) for f in repo.floors_of_runs(s, [run])}
    assert kept == {("canary", 130.0), ("training", 120.0)}
    gov.beat(run, step=4, status=RunStatus.FINISHED)
    gov.tick(60)
    again = check(gov, budget, plan(gov, **MODEL))
    fit = memory_fit(again)
    assert again.verdict is Verdict.CANARY_ONLY  # raised from 43% to 93%: over the go line
    day = gov.clock.now().date().isoformat()
    assert f"measured 130.0 GiB (canary) on run {run}, {day}" in fit["message"]
    assert fit["evidence"]["measured"] == {
        "gib": 130.0,
        "on": day,
        "oom": False,
        "source": "floor",
        "run_id": run,
        "phase": "canary",
        "gpu": "NVIDIA H200",
    }


def test_a_floor_of_a_run_that_ran_out_of_memory_makes_the_next_plan_no_go(
    gov: Governor,
) -> None:
    budget = gov.budget("500")
    run = first_run(gov, budget, used_gib=70.0)
    with gov.session() as s:
        job_events.report(
            s,
            run,
            gov.clock.now(),
            severity=Severity.CRITICAL,
            category=Category.MODEL,
            kind="oom",
            message="CUDA out of memory during evaluation",
            evidence=None,
        )
    gov.beat(run, step=4, status=RunStatus.FAILED)
    again = check(gov, budget, plan(gov, **MODEL))
    fit = memory_fit(again)
    assert again.verdict is Verdict.NO_GO and fit["verdict"] == "no_go"
    assert f"measured 70.0 GiB (canary) on run {run}" in fit["message"]
    assert "its run ran out of memory" in fit["message"]
    with gov.session() as s:  # the failed run's report says what floor it measured
        floors = report.build(s, gov.ctx.config, budget, gov.clock.now()).memory.floors
    assert {(f.run_id, f.phase, f.run_status, f.out_of_memory) for f in floors} == {
        (run, "canary", RunStatus.FAILED, True),
        (run, "training", RunStatus.FAILED, True),
    }
    assert {f.model_id for f in floors} == {"google/gemma-3-27b-pt"}


def test_another_recipe_cites_the_floor_as_context_only(gov: Governor) -> None:
    budget = gov.budget("500")
    run = first_run(gov, budget, used_gib=136.0)  # over 95%: it would refuse the same plan
    gov.beat(run, step=4, status=RunStatus.FINISHED)
    other = check(gov, budget, plan(gov, **MODEL, **{"training.micro_batch": 2}))
    assert other.verdict is not Verdict.NO_GO
    assert "measured" not in memory_fit(other)["evidence"]
    [context] = [r for r in other.reasons if r["rule"] == "measured_context"]
    assert context["verdict"] == "go"
    assert f"measured 136.0 GiB (canary) on run {run}" in context["message"]
    assert "another recipe: context only" in context["message"]
    same = check(gov, budget, plan(gov, **MODEL))
    assert same.verdict is Verdict.NO_GO  # the identical plan is judged by it


def test_a_plan_without_a_model_id_keeps_no_floor(gov: Governor) -> None:
    budget = gov.budget("500")
    row = check(gov, budget, plan(gov))
    assert row.floor_key is None
    pod = register(gov, budget, row.id)
    run = gov.run(budget, pod, timeout_s=10**6)
    gov.beat(run, step=1, phase=Phase.CANARY)
    gov.report(pod, h200(130.0))
    with gov.session() as s:
        assert repo.floors_of_runs(s, [run]) == []
        assert repo.peaks_of(s, [run])  # its peak is kept as before
