"""The recipe's own memory terms, as the plan document declares them: optimizer precision,
fused and paged steps, offload, activation precision, padding, k-bit preparation and the MoE
load aggregation. Each field changes its term by its formula (docs/preflight.md); left out,
the figures are the old ones.
"""

from __future__ import annotations

from datetime import date
from typing import Any

import pytest
from pydantic import ValidationError

from governor.domain.preflight.memory import Component, model_memory
from governor.domain.preflight.rules import admit
from governor.domain.telemetry import GIB
from governor.services.plans.document import PlanIn
from tests.plans import EXAMPLE, variant

pytestmark = pytest.mark.usefixtures("exact_model")

TRAINABLE = EXAMPLE["training"]["trainable_params"]
S, H, L = EXAMPLE["training"]["seq_len"], EXAMPLE["model"]["hidden_size"], 62


def term(name: str, **training: Any) -> float:
    changes = {f"training.{k}": v for k, v in training.items()}
    plan = PlanIn.model_validate(variant(changes)).to_plan()
    return next(c.floor_gib for c in model_memory(plan, 140.4).components if c.name == name)


def test_left_out_the_fields_keep_the_old_figures() -> None:
    assert term("adapters_grads_optimizer") == pytest.approx(TRAINABLE * 16 / GIB)
    assert term("adapters_grads_optimizer", optimizer="adamw_8bit") == pytest.approx(
        TRAINABLE * 10 / GIB
    )
    assert term("activations") == pytest.approx((L * 2 * S * H + 34 * S * H) / GIB)


@pytest.mark.parametrize(
    ("fields", "per_param"),
    [
        ({"trainable_dtype": "bf16"}, 2 + 2 + 8),
        ({"trainable_dtype": "bf16", "optimizer_states": "bf16"}, 2 + 2 + 4),
        ({"trainable_dtype": "bf16", "master_weights": True}, 2 + 2 + 4 + 8),
        ({"optimizer_states": "8bit"}, 4 + 4 + 2),
        ({"optimizer": "sgd"}, 4 + 4 + 4),
        ({"optimizer": "adafactor"}, 4 + 4),
        ({"optimizer_in_backward": True}, 4 + 8),
        ({"paged_optimizer": True}, 4 + 4),
        ({"offload": {"optimizer": True}}, 4 + 4),
        ({"offload": {"params": True}}, 0),
    ],
)
def test_optimizer_bytes_per_trainable_param(fields: dict[str, Any], per_param: int) -> None:
    assert term("adapters_grads_optimizer", **fields) == pytest.approx(TRAINABLE * per_param / GIB)


def test_a_full_fine_tune_counts_its_trained_weights_once() -> None:
    params = EXAMPLE["model"]["params_total"]
    full = term("adapters_grads_optimizer", trainable_params=params, trainable_dtype="bf16")
    assert full == pytest.approx(params * (2 + 8) / GIB)  # gradient and states, not the weight


def test_activation_terms() -> None:
    base = term("activations")
    assert term("activations", activation_dtype="fp32") == pytest.approx(2 * base)
    assert term("activations", offload={"activations": True}) == pytest.approx(34 * S * H / GIB)
    assert term("activations", padding="packed") == pytest.approx(base)
    assert term("activations", padding="max_length", longest_sample=1024) == pytest.approx(base)
    longest = term("activations", padding="longest", longest_sample=1024)
    assert longest == pytest.approx((L * 2 * 1024 * H + 34 * 1024 * H) / GIB)


def test_offloaded_params_leave_no_weights_and_k_bit_preparation_casts_to_fp32() -> None:
    assert term("weights", offload={"params": True}) == 0
    b = EXAMPLE["memory_per_gpu_gib"]["weights_breakdown"]
    prepared = term("weights", kbit_prep_fp32=True)
    expected = 4 * b["unquantized_params"] + b["bytes_per_quantized"] * b["quantized_params"]
    assert prepared == pytest.approx(expected / GIB)


def test_k_bit_preparation_keeps_each_checkpointed_input_in_fp32() -> None:
    """PEFT's preparation casts the embedding and norms to fp32, and the residual stream with
    them: each checkpointed layer's input is 4 bytes a value, not 2. Without checkpointing the
    term is not counted; fp32 activations are doubled already."""
    base = term("activations")
    prepared = term("activations", kbit_prep_fp32=True)
    assert prepared - base == pytest.approx(L * 2 * S * H / GIB)
    none = "none"
    assert term("activations", kbit_prep_fp32=True, grad_checkpointing=none) == pytest.approx(
        term("activations", grad_checkpointing=none)
    )
    fp32 = term("activations", activation_dtype="fp32")
    assert term("activations", activation_dtype="fp32", kbit_prep_fp32=True) == fp32


def test_a_0_1_plan_without_the_new_fields_is_judged_as_before() -> None:
    doc = variant()
    assert doc["schema"] == "preflight-plan/0.1"
    assert "offload" not in doc["training"]
    a = admit(PlanIn.model_validate(doc).to_plan(), date(2026, 10, 8), None)
    assert a.finding("memory_fit") is not None
    assert a.assessment.memory.modeled_gib == pytest.approx(60.64, abs=0.01)


def sharded(no_sync_grads: str, gpus: int = 4) -> float:
    changes = {
        "hardware.gpu_count": gpus,
        "training.sharding": {"kind": "fsdp", "shards": gpus, "no_sync_grads": no_sync_grads},
    }
    plan = PlanIn.model_validate(variant(changes)).to_plan()
    adapters = model_memory(plan, 140.4).components
    return next(c.floor_gib for c in adapters if c.name == "adapters_grads_optimizer")


def test_gradients_accumulated_under_no_sync_are_held_unsharded() -> None:
    """FSDP's no_sync() keeps each GPU's full gradients until the synchronizing micro-batch;
    with use_orig_params a unit's frozen params get gradients too (all but the embedding)."""
    m = EXAMPLE["model"]
    base = sharded("none")
    assert base == pytest.approx(TRAINABLE * 16 / 4 / GIB)
    assert sharded("trainable") - base == pytest.approx(4 * TRAINABLE / GIB)
    everything = m["params_total"] - m["vocab_size"] * m["hidden_size"]
    assert sharded("units") - base == pytest.approx(4 * everything / GIB)
    assert sharded("units", gpus=8) - sharded("none", gpus=8) == pytest.approx(
        4 * everything / GIB
    ), "not divided by the shards"


def test_what_each_metric_sees_of_the_modeled_peak() -> None:
    """The allocator's allocated peak leaves out the context, NCCL and the slack; its reserved
    peak includes the slack; the device's used memory includes everything."""
    plan = PlanIn.model_validate(variant({"hardware.gpu_count": 2})).to_plan()
    memory = model_memory(plan, 140.4)
    used = {c.name: c.used_gib for c in memory.components}
    outside = used["runtime_overhead"] + used["nccl"]
    assert used["nccl"] > 0 and used["fragmentation_margin"] > 0
    assert memory.predicted_gib("device") == pytest.approx(memory.modeled_gib)
    assert memory.predicted_gib("reserved") == pytest.approx(memory.modeled_gib - outside)
    assert memory.predicted_gib("allocated") == pytest.approx(
        memory.modeled_gib - outside - used["fragmentation_margin"]
    )


def floor_of(name: str, changes: dict[str, Any]) -> float:
    plan = PlanIn.model_validate(variant(changes)).to_plan()
    return next(c.floor_gib for c in model_memory(plan, 140.4).components if c.name == name)


VOCAB = EXAMPLE["model"]["vocab_size"]


def test_a_k_bit_matmul_dequantizes_its_largest_weight_to_a_bf16_copy() -> None:
    assert term("dequantized_copy") == 0
    # 2B unquantized params leave no room for an untied head beside the embedding: the
    # vocab x hidden head is quantized, and the largest matrix
    assert term("dequantized_copy", kbit_matmul="dequantize") == pytest.approx(2 * VOCAB * H / GIB)
    untied = {
        "training.kbit_matmul": "dequantize",
        "model.intermediate_size": 21504,
        "memory_per_gpu_gib.weights_breakdown.unquantized_params": 3e9,
        "memory_per_gpu_gib.weights_breakdown.quantized_params": 24e9,
    }
    assert floor_of("dequantized_copy", untied) == pytest.approx(2 * H * 21504 / GIB)
    nothing_quantized = {
        "training.kbit_matmul": "dequantize",
        "memory_per_gpu_gib.weights_breakdown.unquantized_params": 27e9,
        "memory_per_gpu_gib.weights_breakdown.quantized_params": 0,
    }
    assert floor_of("dequantized_copy", nothing_quantized) == 0


def test_a_k_bit_matmul_that_keeps_its_input_adds_the_frozen_layers_inputs() -> None:
    base = term("activations")
    assert term("activations", kbit_matmul="dequantize") == pytest.approx(base)
    # full checkpointing: the one recomputed layer's attention and MLP inputs (h each) and
    # its down-projection input (4 x hidden where the width is not given), and the head's
    kept = term("activations", kbit_matmul="dequantize_keep_input") - base
    assert kept == pytest.approx(2 * ((2 * H + 4 * H) + H) * S / GIB)
    every_layer = {
        "training.kbit_matmul": "dequantize_keep_input",
        "training.grad_checkpointing": "none",
        "model.intermediate_size": 21504,
    }
    unchecked = floor_of("activations", {**every_layer, "training.kbit_matmul": "none"})
    kept = floor_of("activations", every_layer) - unchecked
    assert kept == pytest.approx(2 * (L * (2 * H + 21504) + H) * S / GIB)


def test_a_gated_mlp_keeps_three_inner_width_tensors_where_the_standard_one_keeps_four_h() -> None:
    width = 21504
    gated = {"model.mlp": "gated", "model.intermediate_size": width}
    standard = floor_of("activations", {"model.intermediate_size": width})
    assert standard == pytest.approx(term("activations"))  # the width alone changes nothing
    # LoRA (frozen MLP weights), full checkpointing: the one recomputed layer keeps the gate's
    # output, its activation and the up-projection's output (3 x I) instead of the GELU's 4 x h
    added = floor_of("activations", gated) - standard
    assert added == pytest.approx(2 * (3 * width - 4 * H) * S / GIB)
    unchecked = {"training.grad_checkpointing": "none"}
    added = floor_of("activations", {**gated, **unchecked}) - floor_of("activations", unchecked)
    assert added == pytest.approx(2 * L * (3 * width - 4 * H) * S / GIB)
    # a full fine-tune trains the MLP: its inputs are kept too, h + 4 x I against 9 x h
    full = {"training.trainable_params": EXAMPLE["model"]["params_total"]}
    added = floor_of("activations", {**gated, **full}) - floor_of("activations", full)
    assert added == pytest.approx(2 * (4 * width - 8 * H) * S / GIB)


def test_a_lora_plan_with_a_wide_gated_mlp_takes_the_trained_row() -> None:
    """Adapters on the MLP keep its inputs: where I > 4 x h the trained row is the larger."""
    width = 6 * H
    base = floor_of("activations", {"model.intermediate_size": width})
    added = floor_of("activations", {"model.mlp": "gated", "model.intermediate_size": width}) - base
    assert added == pytest.approx(2 * (4 * width - 8 * H) * S / GIB)


def components(**training: Any) -> dict[str, Component]:
    changes = {f"training.{k}": v for k, v in training.items()}
    plan = PlanIn.model_validate(variant(changes)).to_plan()
    return {c.name: c for c in model_memory(plan, 140.4).components}


def step(**training: Any) -> float:
    return components(**training)["optimizer_step"].floor_gib


def passing(held: dict[str, Component]) -> float:
    """What the training pass holds (at the larger of declared and floor) and the optimizer
    step does not."""
    names = ("activations", "logits_peak", "softcap_logits", "fsdp_or_moe_gather")
    return sum(held[n].used_gib for n in names)


def test_left_out_the_step_adds_nothing_and_gradients_stay_held() -> None:
    assert step() == 0
    assert step(optimizer_impl="fused") == 0


def test_a_foreach_step_adds_its_temporaries_over_what_the_pass_held() -> None:
    """Trained weights in bf16: the foreach step's sqrt(v) for every trained value (2 bytes)
    is more than the pass's activations and logits of an 8k-token micro-batch; the step adds
    the difference. A LoRA plan's step is small: it adds nothing."""
    params = 30e9
    full = {"trainable_params": params, "trainable_dtype": "bf16", "optimizer_states": "bf16"}
    held = components(**full, optimizer_impl="foreach")
    temporaries = 2 * params / GIB
    assert temporaries > passing(held)
    assert held["optimizer_step"].floor_gib == pytest.approx(temporaries - passing(held))
    assert step(**full) == 0
    assert step(optimizer_impl="foreach") == 0


def test_eight_bit_paged_and_offloaded_steps_hold_no_state_sized_temporaries() -> None:
    """Nor one of an optimizer the temporaries were not counted for (SGD, Adafactor)."""
    params = {"trainable_params": 30e9, "optimizer_impl": "foreach"}
    assert step(**params) > 0
    for fields in (
        {"optimizer": "sgd"},
        {"optimizer": "adafactor"},
        {"optimizer_states": "8bit"},
        {"paged_optimizer": True},
        {"offload": {"optimizer": True}},
        {"optimizer_in_backward": True},
    ):
        assert step(**params, **fields) == 0, fields


def test_one_micro_batch_per_step_holds_the_gradients_at_the_step_only() -> None:
    """With one micro-batch per step the gradients are made in backward and freed after the
    step: the pass holds none. They leave the held component and join the step's, which adds
    what it holds over the pass. With accumulation they stay held, as before."""
    params = 30e9
    full = {"trainable_params": params, "trainable_dtype": "bf16", "optimizer_states": "bf16"}
    held = components(**full)["adapters_grads_optimizer"].floor_gib
    once = components(**full, gradient_accumulation_steps=1)
    gradients = 2 * params / GIB
    assert held - once["adapters_grads_optimizer"].floor_gib == pytest.approx(gradients)
    assert once["optimizer_step"].floor_gib == pytest.approx(gradients - passing(once))
    assert components(**full, gradient_accumulation_steps=4) == components(**full)
    both = components(**full, gradient_accumulation_steps=1, optimizer_impl="foreach")
    assert both["optimizer_step"].floor_gib == pytest.approx(2 * gradients - passing(both))


@pytest.mark.parametrize(
    ("field", "value"),
    [("optimizer_impl", "forloop"), ("gradient_accumulation_steps", 0)],
)
def test_a_step_field_out_of_its_range_is_refused_by_name(field: str, value: Any) -> None:
    with pytest.raises(ValidationError) as refused:
        PlanIn.model_validate(variant({f"training.{field}": value}))
    assert [e["loc"] for e in refused.value.errors()] == [("training", field)]


def test_one_micro_batch_per_step_and_no_sync_accumulation_contradict() -> None:
    changes = {
        "hardware.gpu_count": 2,
        "training.sharding": {"kind": "fsdp", "shards": 2, "no_sync_grads": "trainable"},
        "training.gradient_accumulation_steps": 1,
    }
    with pytest.raises(ValidationError, match="set one of them to what the recipe does"):
        PlanIn.model_validate(variant(changes))
    changes["training.gradient_accumulation_steps"] = 8
    assert PlanIn.model_validate(variant(changes)).to_plan().training.no_sync_grads == "trainable"
