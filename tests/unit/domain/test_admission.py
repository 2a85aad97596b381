"""Preflight admission as a table: each row a plan and the verdict with its deciding reason.

Plans are written as preflight documents (tests/plans.py: a worked example plan and
variants of it), validated the way the API and the CLI validate them.
"""

from __future__ import annotations

import json
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import pytest
from pydantic import ValidationError

from governor.domain.preflight.cost import billed_hours, reserve
from governor.domain.preflight.plan import Plan
from governor.domain.preflight.rules import RULES, Admission, Verdict, admit
from governor.services.plans.document import PlanIn
from tests.plans import EXAMPLE, EXAMPLE_FILE, GATHER, MOE_4BIT, gpu_groups, variant

# The memory rules on the modeled peak: the interval's own effect is tested with the seed pilot
# and the validation set.
pytestmark = pytest.mark.usefixtures("exact_model")

D = Decimal
FRESH = date(2026, 10, 8)  # the day after the reference plan's rate was quoted
STALE = date(2026, 12, 1)
GO, CANARY_ONLY, NO_GO = Verdict.GO, Verdict.CANARY_ONLY, Verdict.NO_GO


def plan(doc: dict[str, Any]) -> Plan:
    return PlanIn.model_validate(doc).to_plan()


def check(doc: dict[str, Any], remaining: str | None = "500", today: date = FRESH) -> Admission:
    return admit(plan(doc), today, None if remaining is None else D(remaining))


def gpu(name: str, mib: int, margin_gib: float) -> dict[str, Any]:
    """The reference plan on another GPU, its fragmentation margin 5% of that GPU."""
    return {
        "hardware.gpu_type": name,
        "hardware.usable_mib_per_gpu": mib,
        "memory_per_gpu_gib.fragmentation_margin": margin_gib,
    }


# The worked example plan on other GPUs. An A100 40GB shows 40,960 MiB in nvidia-smi, of
# which its driver keeps 620: 39.39 GiB usable.
A100_40 = gpu("A100-40GB", 40_960, 1.98)
MARGIN = "fragmentation_margin"
FRAGMENT = f"memory_per_gpu_gib.{MARGIN}"
A100_80 = gpu("A100-80GB", 81_920, 4.0)
H100 = gpu("H100", 81_559, 3.98)
FLCE = {"training.ce_impl": "liger_flce", "memory_per_gpu_gib.logits_peak": 0.5}

# A dense 27B LoRA in BF16 (no quantization) on a GH200, which reports 95.6 GiB (the
# table's 97,871 MiB caps the plan's 97,894).
CARD_95 = {
    "hardware.gpu_type": "GH200",
    "hardware.usable_mib_per_gpu": 97_894,
    "memory_per_gpu_gib.weights": 50.3,
    "memory_per_gpu_gib.weights_breakdown": {
        "quantized_params": 0,
        "bytes_per_quantized": 0.52,
        "unquantized_params": 27e9,
        "bytes_per_unquantized": 2,
    },
    "memory_per_gpu_gib.adapters_grads_optimizer": 1.64,
    "memory_per_gpu_gib.fragmentation_margin": 4.78,
}

# A 235B MoE (225B in fused 3-D experts) for LoRA on 4 x H100 with FSDP. The plan counts
# every expert at 4 bits, but bitsandbytes' Linear4bit leaves fused experts in BF16.
MOE = {**MOE_4BIT, "model.moe.expert_quantizer": "bnb_linear4bit"}

# The reference plan on an H100 with an extra 28 GiB transient: modeled 1.07 x usable.
TIGHT = {**H100, "memory_per_gpu_gib.transients": [{"name": "eval_logits_accum", "gib": 28.0}]}


def measured(days_ago: int, mib: int = 74_000, same: bool = True) -> dict[str, Any]:
    on = (FRESH - timedelta(days=days_ago)).isoformat()
    return {"evidence": {"measured_peak_mib": mib, "measured_on": on, "same_config": same}}


# preflight-plan/0.2: the reference plan on GPUs of two models, one group each
H200 = {"gpu_type": "H200", "gpu_count": 1, "rate_usd_per_gpu_hour": 4.59}
H100_GROUP = {"gpu_type": "H100", "gpu_count": 1, "rate_usd_per_gpu_hour": 2.69}
A100_40_GROUP = {"gpu_type": "A100-40GB", "gpu_count": 1, "rate_usd_per_gpu_hour": 1.29}
NEW_CARD = {  # a card not in the table, with the usable memory its driver reports
    "gpu_type": "Acme X1",
    "gpu_count": 1,
    "usable_mib_per_gpu": 98_304,
    "rate_usd_per_gpu_hour": 2.0,
}

PHASES: list[dict[str, Any]] = EXAMPLE["phases"]
LOAD, CANARY, TRAIN, CKPT, *AFTER = PHASES

CASES = [
    # (id, plan document, remaining USD, today, verdict, deciding rule)
    ("worked example on an H200", variant(), "500", FRESH, GO, "memory_fit"),
    ("reference plan on an H100", variant(H100), "500", FRESH, GO, "memory_fit"),
    ("reference plan on an A100 80GB", variant(A100_80), "500", FRESH, GO, "memory_fit"),
    ("dense QLoRA on an A100 40GB", variant(A100_40), "500", FRESH, NO_GO, "memory_fit"),
    ("same with a fused loss", variant({**A100_40, **FLCE}), "500", FRESH, GO, "memory_fit"),
    ("262k vocab, naive loss, 95.6 GiB", variant(CARD_95), "500", FRESH, CANARY_ONLY, "memory_fit"),
    (
        "262k vocab, fused loss, 95.6 GiB",
        variant({**CARD_95, **FLCE}),
        "500",
        FRESH,
        GO,
        "memory_fit",
    ),
    ("MoE experts stay BF16 under 4-bit", variant(MOE), "500", FRESH, NO_GO, "memory_fit"),
    (
        "MoE with an expert-aware quantizer",
        variant(MOE_4BIT),
        "500",
        FRESH,
        GO,
        "memory_fit",
    ),
    ("worst case over the remaining budget", variant(), "60", FRESH, NO_GO, "cost_fit"),
    ("worst case fits the remaining budget", variant(), "100", FRESH, GO, "cost_fit"),
    ("stale quote pushes the cost over", variant(), "90", STALE, NO_GO, "cost_fit"),
    ("no budget given: cost not checked", variant(), None, FRESH, GO, "cost_fit"),
    (
        "canary only: the canary fits, the full plan does not",
        variant(CARD_95),
        "70",
        FRESH,
        CANARY_ONLY,
        "memory_fit",
    ),
    ("canary only, but not even the canary fits", variant(CARD_95), "25", FRESH, NO_GO, "cost_fit"),
    ("1.07 x usable, no evidence", variant(TIGHT), "500", FRESH, NO_GO, "memory_fit"),
    (
        "1.07 x usable, same config measured to fit",
        variant({**TIGHT, **measured(10)}),
        "500",
        FRESH,
        CANARY_ONLY,
        "memory_fit",
    ),
    (
        "1.07 x usable, measured 40 days ago",
        variant({**TIGHT, **measured(40)}),
        "500",
        FRESH,
        NO_GO,
        "memory_fit",
    ),
    (
        "1.07 x usable, measured peak over 95%",
        variant({**TIGHT, **measured(10, mib=80_000)}),
        "500",
        FRESH,
        NO_GO,
        "memory_fit",
    ),
    # structural rejections
    (
        "no canary phase",
        variant({"phases": [LOAD, TRAIN, CKPT, *AFTER]}),
        "500",
        FRESH,
        NO_GO,
        "canary_before_train",
    ),
    (
        "canary after train",
        variant({"phases": [LOAD, TRAIN, CANARY, CKPT, *AFTER]}),
        "500",
        FRESH,
        NO_GO,
        "canary_before_train",
    ),
    (
        "no train phase",
        variant({"phases": [LOAD, CANARY, CKPT]}),
        "500",
        FRESH,
        NO_GO,
        "canary_before_train",
    ),
    (
        "canary of one optimizer step",
        variant({"phases.1.min_optimizer_steps": 1}),
        "500",
        FRESH,
        NO_GO,
        "canary_steps",
    ),
    (
        "no checkpoint after train",
        variant({"phases": [LOAD, CANARY, TRAIN, *AFTER]}),
        "500",
        FRESH,
        NO_GO,
        "checkpoint_after_train",
    ),
    (
        "modeled_total is not the sum of its components",
        variant({"memory_per_gpu_gib.modeled_total": 40.0}, total=False),
        "500",
        FRESH,
        NO_GO,
        "modeled_total_adds_up",
    ),
    (
        "weights breakdown does not add up to params_total",
        variant({"model.params_total": 30e9}),
        "500",
        FRESH,
        NO_GO,
        "params_add_up",
    ),
    (
        "rate under half the cheapest on-demand quote",
        variant({"hardware.rate_usd_per_gpu_hour": 1.5}),
        "500",
        FRESH,
        NO_GO,
        "rate_plausible",
    ),
    # preflight-plan/0.2: the tightest GPU model decides
    (
        "0.2: an H200 and an H100",
        variant(gpu_groups(H200, H100_GROUP)),
        "500",
        FRESH,
        GO,
        "cost_fit",
    ),
    (
        "0.2: an H200 and an A100 40GB, whose memory is too small",
        variant(gpu_groups(H200, A100_40_GROUP)),
        "500",
        FRESH,
        NO_GO,
        "memory_fit",
    ),
    (
        "0.2: one group's rate under half the cheapest on-demand quote",
        variant(gpu_groups(H200, {**H100_GROUP, "rate_usd_per_gpu_hour": 1.0})),
        "500",
        FRESH,
        NO_GO,
        "rate_plausible",
    ),
    (
        "a low spot rate is fine",
        variant({"hardware.rate_usd_per_gpu_hour": 1.5, "hardware.interruptible": True}),
        "500",
        FRESH,
        GO,
        "cost_fit",
    ),
]


@pytest.mark.parametrize(
    ("name", "doc", "remaining", "today", "verdict", "rule"), CASES, ids=[c[0] for c in CASES]
)
def test_admission_decides(
    name: str,
    doc: dict[str, Any],
    remaining: str | None,
    today: date,
    verdict: Verdict,
    rule: str,
) -> None:
    admission = check(doc, remaining, today)
    assert admission.verdict is verdict, [f.message for f in admission.findings]
    finding = admission.finding(rule)
    assert finding is not None and finding.message
    assert finding.verdict is verdict
    if verdict is not GO:
        assert admission.deciding == finding


def test_the_worked_example_reproduces_its_numbers() -> None:
    """The worked example: the plan's memory on four GPUs and its cost, fresh and stale."""
    h200 = check(variant())
    m, cost = h200.assessment.memory, h200.assessment.cost
    assert m.usable_gib == pytest.approx(139.7, abs=0.05)  # 143,771 MiB less 700 reserved
    # The plan rounds the adapters to 1.6 GiB; 1.1e8 x 16 B is 1.64 GiB, so M is 60.64.
    assert m.modeled_gib == pytest.approx(60.6, abs=0.1)
    assert round(m.ratio, 2) == 0.43
    floors = {c.name: round(c.floor_gib, 2) for c in m.components}
    assert floors["adapters_grads_optimizer"] == 1.64
    assert floors["activations"] == 6.48  # 62 x 2·s·h + 34·s·h, h = 5376
    assert floors["logits_peak"] == 24.0  # 12 B x 2,147,483,648 logits; the plan declares 28
    assert floors["fragmentation_margin"] == 6.99  # 5% of 139.72 GiB: the plan's 7.0 stands

    for gpu, modeled, ratio in ((H100, 57.6, 0.73), (A100_80, 57.6, 0.73), (A100_40, 55.6, 1.41)):
        memory = check(variant(gpu)).assessment.memory
        assert memory.modeled_gib == pytest.approx(modeled, abs=0.1), gpu
        assert memory.ratio == pytest.approx(ratio, abs=0.01), gpu

    flce = check(variant({**A100_40, **FLCE})).assessment.memory
    assert next(c for c in flce.components if c.name == "logits_peak").floor_gib == 0.5
    assert flce.modeled_gib == pytest.approx(28.1, abs=0.1)
    assert round(flce.ratio, 2) == 0.71

    assert round(cost.compute, 2) == D("51.87")  # 11.3 h x $4.59
    assert round(cost.storage, 2) == D("4.83")  # 300 GB x $0.07 x 168 h / 730
    assert round(cost.worst, 2) == D("65.20")  # x 1.15
    assert round(cost.expected, 2) == D("39.95")
    assert cost.drift == 0
    stale = check(variant(), today=STALE).assessment.cost
    assert stale.drift == D("0.25")
    assert round(stale.worst, 2) == D("80.12")
    assert check(variant(), today=STALE).finding("quote_age") is not None


def test_the_moe_floor_counts_fused_experts_at_two_bytes() -> None:
    admission = check(variant(MOE))
    weights = admission.finding("weights_floor")
    assert weights is not None
    assert weights.evidence["floor_gib"] == pytest.approx(107.7, abs=0.1)  # 4.6e11 B / 4
    assert "bnb_linear4bit" in weights.message
    assert admission.assessment.memory.ratio > 1.5  # far more than 20% over
    declared = admission.assessment.memory.declared_gib / admission.assessment.memory.usable_gib
    assert declared < 0.6  # the plan as written looked like a comfortable go


def test_every_finding_is_reported_in_rule_order() -> None:
    claims_more = {**A100_40, "hardware.usable_mib_per_gpu": 41_000}  # over the card's 40,960
    doc = variant({**claims_more, "phases.1.min_optimizer_steps": 0}, total=False)
    doc["memory_per_gpu_gib"]["modeled_total"] = 10.0
    admission = check(doc, remaining="30")
    assert [f.rule for f in admission.findings] == [
        "modeled_total_adds_up",
        "canary_steps",
        "adapters_grads_optimizer_floor",
        "usable_memory",
        "memory_fit",
        "cost_fit",
    ]
    assert admission.deciding is not None
    assert admission.deciding.rule == "modeled_total_adds_up"
    names = [r.__name__ for r in RULES]
    assert names[:5] == [
        "modeled_total_adds_up",
        "params_add_up",
        "canary_before_train",
        "canary_steps",
        "checkpoint_after_train",
    ]
    assert names[-6:] == [
        "usable_memory",
        "memory_fit",
        "measured_context",
        "rate_plausible",
        "quote_age",
        "cost_fit",
    ]


@pytest.mark.parametrize(
    ("changes", "component", "floor"),
    [
        # no checkpointing: 62 layers x 34·s·h
        ({"training.grad_checkpointing": "none"}, "activations", 86.46),
        # eager attention with full checkpointing: + one layer's 5·a·s² = 10 GiB
        ({"training.attention_impl": "eager"}, "activations", 16.48),
        ({"training.ce_impl": "cce"}, "logits_peak", 1.2),
        ({"training.ce_impl": "chunked_upcast"}, "logits_peak", 6.5),
        ({"training.optimizer": "adamw_bnb_8bit"}, "adapters_grads_optimizer", 1.02),
        ({"hardware.gpu_count": 2}, "nccl", 1.0),
        (
            {"training.sharding": {"kind": "fsdp", "shards": 2}, "hardware.gpu_count": 2},
            "weights",
            7.92,
        ),
        (
            {
                "training.sharding": {"kind": "zero3", "shards": 2, "forward_prefetch": True},
                "hardware.gpu_count": 2,
            },
            GATHER,
            0.51,  # two layers of the 15.83 GiB of weights over 62 layers
        ),
    ],
)
def test_floors(changes: dict[str, Any], component: str, floor: float) -> None:
    memory = check(variant(changes)).assessment.memory
    assert next(c for c in memory.components if c.name == component).floor_gib == pytest.approx(
        floor, abs=0.01
    )


def test_the_table_caps_the_usable_memory_a_plan_claims() -> None:
    admission = check(variant({"hardware.usable_mib_per_gpu": 150_000}))
    assert admission.assessment.memory.usable_gib == pytest.approx(139.7, abs=0.05)
    assert admission.finding("usable_memory") is not None


def test_cost_rounds_each_phase_to_the_billing_increment() -> None:
    assert billed_hours(D("0.4"), 3600) == 1
    assert billed_hours(D("0.25"), 60) == D("0.25")
    assert billed_hours(D("0.001"), 60) == D(60) / D(3600)
    hourly = check(variant({"hardware.billing_increment_s": 3600})).assessment.cost
    assert hourly.compute == D("64.26")  # 1 + 1 + 8 + 1 + 1 + 1 + 1 hours at $4.59


@pytest.mark.parametrize(("remaining", "kept"), [("500", "50"), ("100", "20"), ("0", "20")])
def test_the_reserve_is_ten_percent_or_twenty_dollars(remaining: str, kept: str) -> None:
    assert reserve(D(remaining)) == D(kept)


def test_a_quote_dated_in_the_future_counts_as_stale() -> None:
    admission = check(variant({"hardware.rate_quoted_at": "2027-10-07"}))
    assert admission.assessment.cost.drift == D("0.25")
    finding = admission.finding("quote_age")
    assert finding is not None and "in the future" in finding.message


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"phases.2.max_hours": 1.0}, "phases.2"),  # less than its expected 6 hours
        ({"hardware.rate_usd_per_gpu_hour": "-1"}, "hardware.rate_usd_per_gpu_hour"),
        ({"training.ce_impl": "fast"}, "training.ce_impl"),
        ({"training.sharding": {"kind": "fsdp", "shards": 1}}, "training.sharding"),
        ({"training.sharding": {"kind": "fsdp", "shards": 8}}, ""),  # more shards than GPUs
        ({"memory_per_gpu_gib.logits_peak": "NaN"}, "memory_per_gpu_gib.logits_peak"),
        ({"hardware.surprise": 1}, "hardware.surprise"),
    ],
)
def test_a_malformed_plan_is_refused_at_the_edge_naming_the_field(
    changes: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        plan(variant(changes, total=False))
    [error] = caught.value.errors()
    assert ".".join(str(p) for p in error["loc"]) == field


def test_a_plan_missing_a_memory_component_is_refused_naming_it() -> None:
    doc = variant()
    del doc["memory_per_gpu_gib"]["nccl"]
    with pytest.raises(ValidationError) as caught:
        plan(doc)
    [error] = caught.value.errors()
    assert error["loc"] == ("memory_per_gpu_gib", "nccl")
    assert error["type"] == "missing"


# --- preflight-plan/0.2: several GPU models in one plan ---------------------------------


def test_a_01_plan_is_one_group_of_its_declared_gpus() -> None:
    for doc in (variant(), {k: v for k, v in variant().items() if k != "schema"}):
        [group] = plan(doc).hardware.groups
        assert (group.gpu_type, group.gpu_count, group.usable_mib_per_gpu) == ("H200", 1, 143_771)
        assert group.rate_usd_per_gpu_hour == D("4.59")


def test_a_02_plan_reads_a_group_per_gpu_model() -> None:
    doc = variant(gpu_groups({**H200, "gpu_count": 4}, {**H100_GROUP, "gpu_count": 4}))
    hardware = plan(doc).hardware
    assert [(g.gpu_type, g.gpu_count, g.usable_mib_per_gpu) for g in hardware.groups] == [
        ("H200", 4, None),  # unset: the GPU table's figure
        ("H100", 4, None),
    ]
    assert hardware.gpus == 8
    assert PlanIn.model_validate(doc).document()["hardware"]["gpus"][1]["gpu_type"] == "H100"


@pytest.mark.parametrize(
    ("changes", "field", "problem"),
    [
        (gpu_groups(H200, {**H100_GROUP, "gpu_count": 0}), "hardware.gpus.1.gpu_count", "greater"),
        (gpu_groups(), "hardware.gpus", "at least 1 item"),
        (
            gpu_groups(H200, {**NEW_CARD, "usable_mib_per_gpu": None}),
            "hardware.gpus.1",
            "'Acme X1' is not in the GPU table: give its usable_mib_per_gpu",
        ),
        (
            gpu_groups(H100_GROUP, H200, {**H100_GROUP, "gpu_type": "NVIDIA H100 80GB HBM3"}),
            "hardware.gpus",
            "'H100' and 'NVIDIA H100 80GB HBM3' are the same GPU model: give one group per model",
        ),
        (
            {"schema": "preflight-plan/0.3"},
            "schema",
            "'preflight-plan/0.1' or 'preflight-plan/0.2'",
        ),
        # each version's hardware as that version writes it
        ({"schema": "preflight-plan/0.2"}, "hardware.gpus", "Field required"),
        ({"hardware.gpus": [H200]}, "hardware.gpus", "Extra inputs are not permitted"),
    ],
)
def test_a_malformed_02_plan_is_refused_naming_the_field(
    changes: dict[str, Any], field: str, problem: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        plan(variant(changes, total=False))
    errors = {".".join(str(p) for p in e["loc"]): e["msg"] for e in caught.value.errors()}
    assert problem in errors[field], errors


def test_an_unknown_gpu_model_is_judged_on_its_declared_memory_with_a_warning() -> None:
    admission = check(variant(gpu_groups(H200, NEW_CARD)))
    warning = admission.finding("usable_memory")
    assert warning is not None and warning.verdict is GO
    # its declared 96 GiB less the largest reserve read on a card (1,103 MiB)
    assert (warning.gpu_type, warning.usable_gib) == ("Acme X1", 94.92)
    assert "No reported memory on file for 'Acme X1': its memory was not checked" in (
        warning.message
    )
    [acme] = [g for g in admission.as_json()["memory"]["groups"] if g["gpu_type"] == "Acme X1"]
    assert (acme["usable_gib"], acme["usable_memory"], acme["verdict"]) == (
        94.92,
        "unchecked",
        "go",
    )


def test_each_gpu_model_is_judged_on_its_own_memory_and_the_tightest_decides() -> None:
    admission = check(variant(gpu_groups(H200, A100_40_GROUP)))
    fits = [f for f in admission.findings if f.rule == "memory_fit"]
    # one row per model, the tightest first, each with its own arithmetic
    assert [(f.gpu_type, f.usable_gib, f.verdict) for f in fits] == [
        ("A100-40GB", 39.39, NO_GO),
        ("H200", 139.72, GO),
    ]
    assert admission.deciding == fits[0]
    # the plan's own 7.02 GiB margin and, on two GPUs, NCCL's 1 GiB on both
    assert "Modeled peak 61.6 GiB per GPU is 156% of the 39.4 GiB usable on the 1 x A100-40GB" in (
        fits[0].message
    )
    assert "on the 1 x H200 (go up to 90%): it fits by 78.1 GiB" in fits[1].message
    memory = admission.as_json()["memory"]
    assert (memory["gpu_type"], memory["usable_gib"]) == ("A100-40GB", 39.39)
    assert [(g["gpu_type"], g["ratio"]) for g in memory["groups"]] == [
        ("A100-40GB", 1.565),
        ("H200", 0.441),
    ]
    # rows about the model as a whole name no GPU; a 5% margin is each model's own
    floors = {(f.rule, f.gpu_type) for f in admission.findings if f.rule.endswith("_floor")}
    assert ("adapters_grads_optimizer_floor", None) in floors
    margins = {
        g.group.gpu_type: next(c.floor_gib for c in g.memory.components if c.name == MARGIN)
        for g in admission.assessment.groups
    }
    assert margins == pytest.approx(
        {"A100-40GB": 0.05 * 40_340 / 1024, "H200": 0.05 * 143_071 / 1024}
    )
    on_h200 = check(variant({**gpu_groups(H200, A100_40_GROUP), FRAGMENT: 2.0}))
    floors = {(f.rule, f.gpu_type) for f in on_h200.findings if f.rule.endswith("_floor")}
    assert ("fragmentation_margin_floor", "H200") in floors
    assert ("fragmentation_margin_floor", "A100-40GB") not in floors  # 1.97 GiB: under 2.0


def test_each_gpu_model_is_billed_at_its_own_rate() -> None:
    doc = variant(gpu_groups({**H200, "gpu_count": 2}, H100_GROUP))
    cost = check(doc).assessment.cost
    # 11.3 GPU-held hours at max: 2 x $4.59 + 1 x $2.69 an hour
    assert [(g.gpu_type, g.gpus, g.compute) for g in cost.groups] == [
        ("H200", 2, D("103.734")),
        ("H100", 1, D("30.397")),
    ]
    assert cost.compute == D("134.131")
    assert cost.rate == D("11.87") / 3  # the mean over the plan's 3 GPUs
    stale = check(doc, today=STALE)
    assert [g.rate for g in stale.assessment.cost.groups] == [D("5.7375"), D("3.3625")]
    quote = stale.finding("quote_age")
    assert quote is not None
    assert "to $5.74/GPU-hour for the H200 and $3.36/GPU-hour for the H100" in quote.message


def test_the_02_example_plan_checks_go_on_its_smaller_gpus() -> None:
    doc = json.loads(EXAMPLE_FILE.with_name("plan-0.2.json").read_text())
    admission = check(doc, remaining="1000")
    assert admission.verdict is GO, [f.message for f in admission.findings]
    tightest = admission.finding("memory_fit")
    assert tightest is not None and tightest.gpu_type == "H100"
    assert "it fits by 12.2 GiB" in tightest.message
