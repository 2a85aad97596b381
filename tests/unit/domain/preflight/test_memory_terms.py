"""The memory model's representation and layout terms, and worked examples of each.

Plans are preflight documents (tests/plans.py) validated as the API validates them; the
fields under test (dequantize, kernel format, softcap, expert parallelism, gather depth,
all of which the document also carries) are then set on the domain plan. The cost is not
checked here (no remaining budget), so each verdict is the memory rules' own.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import date
from typing import Any

import pytest

from governor.domain.preflight.memory import Component
from governor.domain.preflight.plan import CrossEntropy, Dequantize, KernelFormat, Plan
from governor.domain.preflight.rules import Admission, Verdict, admit
from governor.domain.telemetry import GIB
from governor.services.plans.document import PlanIn
from tests.plans import GATHER, MOE_4BIT, gpu_groups, variant

# The memory rules on the modeled peak: the interval's own effect is tested with the seed pilot
# and the validation set.
pytestmark = pytest.mark.usefixtures("exact_model")

FRESH = date(2026, 10, 8)
GO, CANARY_ONLY, NO_GO = Verdict.GO, Verdict.CANARY_ONLY, Verdict.NO_GO


def plan(
    doc: dict[str, Any],
    model: dict[str, Any] | None = None,
    moe: dict[str, Any] | None = None,
    training: dict[str, Any] | None = None,
) -> Plan:
    """A plan document validated at the edge, then fields changed in the domain's terms."""
    p = PlanIn.model_validate(doc).to_plan()
    if moe is not None:
        assert p.model.moe is not None
        p = replace(p, model=replace(p.model, moe=replace(p.model.moe, **moe)))
    if model is not None:
        p = replace(p, model=replace(p.model, **model))
    if training is not None:
        p = replace(p, training=replace(p.training, **training))
    return p


def check(doc: dict[str, Any], **fields: dict[str, Any]) -> Admission:
    return admit(plan(doc, **fields), FRESH, None)


def component(admission: Admission, name: str) -> Component:
    return admission.assessment.component(name)


MOE_EXPERTS = 117e9  # bytes: 225B expert params x 0.52
MOE_DENSE = 12.6e9  # bytes: 5B BF16 params x 2 + 5B quantized dense params x 0.52
DEQUANTIZE_EXPERTS = {"training": {"dequantize": Dequantize.EXPERTS}}

# The same MoE on 8 x H100 without FSDP: each GPU holds the dense part whole, and
# expert parallelism decides how many whole experts it holds.
MOE_EP = {
    **MOE_4BIT,
    "hardware.gpu_count": 8,
    "training.sharding": {"kind": "none", "shards": 1},
    "memory_per_gpu_gib.weights": 20.0,
    "memory_per_gpu_gib.adapters_grads_optimizer": 3.0,
    "memory_per_gpu_gib.transients": [],
}


def expert_parallel(ep: int) -> dict[str, Any]:
    return {"moe": {"num_experts": 128, "expert_parallel": ep}}


# A dense 70B trained from an NVFP4 checkpoint (0.5625 bytes per weight: 4-bit values and
# one FP8 scale per 16) on an H100, its declared figures right for the stored copy alone.
NVFP4_70B = {
    "hardware.gpu_type": "H100",
    "hardware.usable_mib_per_gpu": 81_559,
    "hardware.rate_usd_per_gpu_hour": 2.69,
    "model": {
        "params_total": 70.6e9,
        "vocab_size": 128_256,
        "hidden_size": 8192,
        "num_layers": 80,
        "num_heads": 64,
        "moe": None,
    },
    "training.trainable_params": 2e8,
    "training.ce_impl": "liger_flce",
    "memory_per_gpu_gib.weights": 39.8,
    "memory_per_gpu_gib.weights_breakdown": {
        "quantized_params": 68.5e9,
        "bytes_per_quantized": 0.5625,
        "unquantized_params": 2.1e9,
        "bytes_per_unquantized": 2,
    },
    "memory_per_gpu_gib.adapters_grads_optimizer": 2.98,
    "memory_per_gpu_gib.activations": 12.1,
    "memory_per_gpu_gib.logits_peak": 0.5,
    "memory_per_gpu_gib.fragmentation_margin": 3.98,
}
NVFP4_ON_H200 = {
    **NVFP4_70B,
    "hardware.gpu_type": "H200",
    "hardware.usable_mib_per_gpu": 143_771,
    "memory_per_gpu_gib.fragmentation_margin": 7.02,
}
# The same base on 8 GPUs of two sizes (preflight-plan/0.2): 4 x H200 and 4 x H100, each GPU
# holding the whole model, or the model sharded over all eight.
NVFP4_MIXED = {
    **NVFP4_70B,
    **gpu_groups(
        {"gpu_type": "H200", "gpu_count": 4, "rate_usd_per_gpu_hour": 3.59},
        {"gpu_type": "H100", "gpu_count": 4, "rate_usd_per_gpu_hour": 2.69},
    ),
}
NVFP4_MIXED_FSDP = {**NVFP4_MIXED, "training.sharding": {"kind": "fsdp", "shards": 8}}
GEMM_WEIGHTS = 70.6e9 - 128_256 * 8192  # every weight but the embedding
# The kernels keep a column-wise copy for the backward GEMM; the stored copy is row-wise.
TWO_LAYOUTS = {"training": {"kernel_format": KernelFormat.NVFP4, "kernel_layouts": 1}}

# The worked example plan (27B QLoRA, 262,144 vocabulary, 8,192 tokens) on a 48 GB card,
# with a measured peak of the same configuration at 45,000 MiB (under 95%) a week ago.
ADA_48GB = {
    "hardware.gpu_type": "NVIDIA RTX 6000 Ada Generation",
    "hardware.usable_mib_per_gpu": 49_140,
    "hardware.rate_usd_per_gpu_hour": 0.77,
    "memory_per_gpu_gib.fragmentation_margin": 2.4,
    "evidence": {"measured_peak_mib": 45_000, "measured_on": "2026-10-01", "same_config": True},
}
FUSED = {"training.ce_impl": "liger_flce", "memory_per_gpu_gib.logits_peak": 0.5}
SOFTCAPPED = {"model": {"final_logit_softcapping": 30.0}}

EXAMPLES = [
    # (id, plan document, fields set on the domain plan, verdict, deciding rule, term it names)
    ("4-bit MoE, experts kept 4-bit", variant(MOE_4BIT), {}, GO, None, None),
    (
        "4-bit MoE, recipe dequantizes the experts",
        variant(MOE_4BIT),
        DEQUANTIZE_EXPERTS,
        NO_GO,
        "memory_fit",
        "dequantized_copy",
    ),
    ("NVFP4 70B, stored layout only, H100", variant(NVFP4_70B), {}, GO, None, None),
    (
        "NVFP4 70B in two layouts, H100",
        variant(NVFP4_70B),
        TWO_LAYOUTS,
        NO_GO,
        "memory_fit",
        "kernel_layouts",
    ),
    ("NVFP4 70B in two layouts, H200", variant(NVFP4_ON_H200), TWO_LAYOUTS, GO, None, None),
    (
        "NVFP4 70B in two layouts, 4 x H200 + 4 x H100, unsharded",
        variant(NVFP4_MIXED),
        TWO_LAYOUTS,
        NO_GO,
        "memory_fit",
        "kernel_layouts",
    ),
    (
        "NVFP4 70B in two layouts, 4 x H200 + 4 x H100, FSDP over 8",
        variant(NVFP4_MIXED_FSDP),
        TWO_LAYOUTS,
        GO,
        None,
        None,
    ),
    (
        "262k vocab, 8k tokens, no softcap, naive loss",
        variant(ADA_48GB),
        {},
        CANARY_ONLY,
        "memory_fit",
        None,
    ),
    (
        "262k vocab softcapped, 8k tokens, naive loss",
        variant(ADA_48GB),
        SOFTCAPPED,
        NO_GO,
        "memory_fit",
        "softcap_logits",
    ),
    (
        "262k vocab softcapped, 8k tokens, fused loss",  # the 45,000 MiB was another loss's
        variant({**ADA_48GB, **FUSED, "evidence.same_config": False}),
        SOFTCAPPED,
        GO,
        None,
        None,
    ),
    ("MoE, no expert parallelism", variant(MOE_EP), expert_parallel(1), NO_GO, "memory_fit", None),
    (
        "MoE, experts over 2 GPUs",
        variant(MOE_EP),
        expert_parallel(2),
        NO_GO,  # 79.4 GiB modeled on an H100's 79.1 usable
        "memory_fit",
        None,
    ),
    ("MoE, experts over 8 GPUs", variant(MOE_EP), expert_parallel(8), GO, None, None),
]


@pytest.mark.parametrize(
    ("name", "doc", "fields", "verdict", "rule", "term"), EXAMPLES, ids=[e[0] for e in EXAMPLES]
)
def test_worked_examples(
    name: str,
    doc: dict[str, Any],
    fields: dict[str, dict[str, Any]],
    verdict: Verdict,
    rule: str | None,
    term: str | None,
) -> None:
    admission = check(doc, **fields)
    assert admission.verdict is verdict, [f.message for f in admission.findings]
    deciding = admission.deciding
    assert (deciding and deciding.rule) == rule
    if term is not None:
        assert deciding is not None
        assert f"raised {term} by" in deciding.message
        assert term in str(deciding.evidence["raised_gib"])
        assert admission.finding(f"{term}_floor") is not None


def test_a_dequantized_working_copy_is_held_beside_its_quantized_source() -> None:
    kept = check(variant(MOE_4BIT))
    # the loading's aggregation (by default with dequantize) is its own term, left out here
    unassembled = variant({**MOE_4BIT, "model.moe.load_aggregation": "none"})
    experts = check(unassembled, **DEQUANTIZE_EXPERTS)
    whole = check(variant(MOE_4BIT), training={"dequantize": Dequantize.ALL})

    assert component(kept, "dequantized_copy").floor_gib == 0
    # 225B expert params x 2 bytes over 4 shards, on top of the unchanged 4-bit weights
    copy = component(experts, "dequantized_copy")
    assert copy.floor_gib == pytest.approx(225e9 * 2 / 4 / GIB)
    assert copy.floor_gib == pytest.approx(104.77, abs=0.01)
    assert "2 bytes x 225B quantized expert params" in copy.basis
    assert component(experts, "weights").floor_gib == component(kept, "weights").floor_gib
    assert experts.assessment.memory.ratio == pytest.approx(1.87, abs=0.01)
    assert kept.assessment.memory.ratio == pytest.approx(0.55, abs=0.01)
    # all: every quantized param, dense ones too
    assert component(whole, "dequantized_copy").floor_gib == pytest.approx(230e9 * 2 / 4 / GIB)


def test_experts_that_loading_left_in_bf16_have_nothing_to_dequantize() -> None:
    bnb = variant({**MOE_4BIT, "model.moe.expert_quantizer": "bnb_linear4bit"})
    assert component(check(bnb, **DEQUANTIZE_EXPERTS), "dequantized_copy").floor_gib == 0
    # only the 5B dense params are still quantized
    whole = check(bnb, training={"dequantize": Dequantize.ALL})
    assert component(whole, "dequantized_copy").floor_gib == pytest.approx(5e9 * 2 / 4 / GIB)


@pytest.mark.parametrize(
    ("kernel_format", "per_weight"),
    [
        (KernelFormat.FP8, 1.0),  # one FP32 scale per tensor
        (KernelFormat.MXFP8, 1.03125),  # + one 8-bit scale per 32
        (KernelFormat.MXFP4, 0.53125),  # 4 bits + one 8-bit scale per 32
        (KernelFormat.NVFP4, 0.5625),  # 4 bits + one FP8 scale per 16
    ],
)
def test_each_kernel_layout_is_a_full_copy_with_its_scales(
    kernel_format: KernelFormat, per_weight: float
) -> None:
    bf16_master = check(variant(NVFP4_70B), training={"kernel_format": kernel_format})
    layouts = component(bf16_master, "kernel_layouts")
    # row-wise and column-wise by default, beside the stored weights
    assert layouts.floor_gib == pytest.approx(2 * per_weight * GEMM_WEIGHTS / GIB)
    assert f"2 {kernel_format} layout(s)" in layouts.basis


def test_the_nvfp4_base_in_two_layouts_shows_its_arithmetic() -> None:
    admission = check(variant(NVFP4_70B), **TWO_LAYOUTS)
    layouts = component(admission, "kernel_layouts")
    assert layouts.floor_gib == pytest.approx(36.43, abs=0.01)  # 0.5625 B x 69.55B
    assert "0.5625 bytes with scales x 69.5B GEMM weights" in layouts.basis
    assert admission.assessment.memory.modeled_gib == pytest.approx(97.3, abs=0.1)
    assert admission.assessment.memory.ratio == pytest.approx(1.23, abs=0.01)  # over 1.2
    on_h200 = check(variant(NVFP4_ON_H200), **TWO_LAYOUTS).assessment.memory
    assert on_h200.ratio == pytest.approx(0.72, abs=0.01)


def test_on_gpus_of_two_sizes_the_smaller_ones_decide_and_are_named() -> None:
    unsharded = check(variant(NVFP4_MIXED), **TWO_LAYOUTS)
    deciding = unsharded.deciding
    assert deciding is not None and (deciding.gpu_type, deciding.usable_gib) == ("H100", 79.1)
    assert "Modeled peak 98.3 GiB per GPU is 124% of the 79.1 GiB usable on the 4 x H100" in (
        deciding.message
    )
    h200 = next(f for f in unsharded.findings if f.rule == "memory_fit" and f.gpu_type == "H200")
    assert h200.verdict is GO and "it fits by 38.4 GiB" in h200.message

    sharded = check(variant(NVFP4_MIXED_FSDP), **TWO_LAYOUTS)
    tightest = sharded.finding("memory_fit")  # the tightest model's comes first
    assert tightest is not None and tightest.gpu_type == "H100"
    assert "85% of the 79.1 GiB usable on the 4 x H100 (go up to 90%): it fits by 12.2 GiB" in (
        tightest.message
    )


def test_a_softcapped_head_saves_one_more_logits_tensor_unless_the_loss_is_fused() -> None:
    naive = check(variant(ADA_48GB), **SOFTCAPPED)
    softcap = component(naive, "softcap_logits")
    assert softcap.floor_gib == 4.0  # 2 bytes x 8,192 tokens x 262,144 vocab
    assert "tanh" in softcap.basis
    logits = component(naive, "logits_peak")  # the naive loss, as before: its plan says 28
    assert (logits.floor_gib, logits.used_gib) == (24.0, 28.0)  # 12 bytes per logit, counted
    assert naive.assessment.memory.modeled_gib == pytest.approx(60.0, abs=0.1)
    assert naive.assessment.memory.ratio == pytest.approx(1.27, abs=0.01)
    unsoftcapped = check(variant(ADA_48GB)).assessment.memory
    assert unsoftcapped.ratio == pytest.approx(1.18, abs=0.01)  # under 1.2: evidence counts

    chunked = check(variant({**ADA_48GB, "training.ce_impl": "chunked_upcast"}), **SOFTCAPPED)
    assert component(chunked, "softcap_logits").floor_gib == 4.0
    for loss in (CrossEntropy.LIGER_FLCE, CrossEntropy.CCE):
        fused = check(variant({**ADA_48GB, "training.ce_impl": loss.value}), **SOFTCAPPED)
        assert component(fused, "softcap_logits").floor_gib == 0
    fused = check(variant({**ADA_48GB, **FUSED}), **SOFTCAPPED).assessment.memory
    assert fused.modeled_gib == pytest.approx(28.5, abs=0.1)


@pytest.mark.parametrize(("ep", "local"), [(1, 128), (2, 64), (6, 22), (8, 16)])
def test_expert_parallelism_places_whole_experts_on_each_gpu(ep: int, local: int) -> None:
    admission = check(variant(MOE_EP), **expert_parallel(ep))
    weights = component(admission, "weights")
    assert weights.floor_gib == pytest.approx((MOE_DENSE + MOE_EXPERTS * local / 128) / GIB)
    if ep > 1:
        assert f"ceil(128 / {ep}) = {local} of 128 per GPU" in weights.basis


def test_expert_parallelism_with_fsdp_shards_each_expert_over_the_rest() -> None:
    # 8 shards, experts over 4 GPUs: 32 experts per GPU, each over 8 // 4 = 2 shards
    doc = variant(
        {**MOE_4BIT, "hardware.gpu_count": 8, "training.sharding": {"kind": "fsdp", "shards": 8}}
    )
    weights = component(check(doc, **expert_parallel(4)), "weights")
    assert weights.floor_gib == pytest.approx((MOE_DENSE / 8 + MOE_EXPERTS * 32 / 128 / 2) / GIB)
    assert "each over 2 shards" in weights.basis


@pytest.mark.parametrize("doc", [variant(MOE_EP), variant(MOE_4BIT)], ids=["ddp", "fsdp"])
def test_expert_parallelism_without_an_expert_count_is_credited_nothing(
    doc: dict[str, Any],
) -> None:
    unnamed = check(doc, moe={"expert_parallel": 4, "num_experts": 1})  # the domain's default
    without = check(doc, **expert_parallel(1))
    assert component(unnamed, "weights").floor_gib == component(without, "weights").floor_gib


def gather(doc: dict[str, Any], **fields: dict[str, Any]) -> Component:
    return component(check(doc, **fields), GATHER)


def test_the_gather_buffers_follow_the_prefetch_depth_and_the_largest_unit() -> None:
    zero3 = variant(
        {
            "training.sharding": {"kind": "zero3", "shards": 2, "forward_prefetch": True},
            "hardware.gpu_count": 2,
        }
    )
    layer = (2e9 * 2 + 25e9 * 0.52) / 62 / GIB  # the example's 15.83 GiB over 62 layers
    assert gather(zero3).floor_gib == pytest.approx(2 * layer)  # one ahead: as before
    deeper = gather(zero3, training={"prefetch_depth": 3})
    assert deeper.floor_gib == pytest.approx(4 * layer)
    assert deeper.basis.startswith("4 layer(s)")
    # the root unit: embedding and head of a 262k vocabulary, larger than any layer
    root = gather(zero3, training={"largest_unit_params": 2 * 262_144 * 5376})
    assert root.floor_gib == pytest.approx(2 * 2 * 262_144 * 5376 * 2 / GIB)
    assert "the largest unit" in root.basis


def test_a_strategy_that_keeps_units_gathered_holds_every_one() -> None:
    fsdp = variant({"training.sharding": {"kind": "fsdp", "shards": 2}, "hardware.gpu_count": 2})
    held = gather(fsdp, training={"reshard_after_forward": False})
    assert held.floor_gib == pytest.approx((2e9 * 2 + 25e9 * 0.52) / GIB)
    assert "reshard_after_forward is false" in held.basis


def test_experts_kept_gathered_are_only_this_gpus_own_under_expert_parallelism() -> None:
    doc = variant(
        {
            **MOE_4BIT,
            "hardware.gpu_count": 8,
            "training.sharding": {"kind": "fsdp", "shards": 8},
            "model.moe.reshard_after_forward": False,
        }
    )
    layer = (MOE_DENSE + MOE_EXPERTS) / 94 / GIB
    assert gather(doc).floor_gib == pytest.approx(layer + MOE_EXPERTS / GIB)
    placed = gather(doc, **expert_parallel(8))
    assert placed.floor_gib == pytest.approx(layer + MOE_EXPERTS * 16 / 128 / GIB)


def test_the_new_terms_are_zero_and_say_why_for_a_plan_that_uses_none_of_them() -> None:
    admission = check(variant())
    for name, why in (
        ("dequantized_copy", "as held"),
        ("kernel_layouts", "no low-precision"),
        ("softcap_logits", "not softcapped"),
    ):
        term = component(admission, name)
        assert (term.declared_gib, term.floor_gib) == (0, 0)
        assert why in term.basis
    # a plan may declare a term itself, as a transient of the same name
    declared = variant({"memory_per_gpu_gib.transients": [{"name": "softcap_logits", "gib": 5.0}]})
    softcap = component(check(declared, **SOFTCAPPED), "softcap_logits")
    assert (softcap.declared_gib, softcap.used_gib) == (5.0, 5.0)
    assert component(check(declared), "other_transients").declared_gib == 0
