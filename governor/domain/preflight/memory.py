"""The per-GPU memory model with the governor's floors.

For every component the larger of what the plan declares and what the governor can
recompute from the plan's own shapes wins; the modeled peak M is the sum. Byte constants
are per value unless stated; results are GiB per GPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from governor.domain.preflight.plan import (
    Attention,
    Checkpointing,
    CrossEntropy,
    Plan,
    Sharding,
)
from governor.domain.telemetry import GIB

RUNTIME_FLOOR_GIB = 1.5  # CUDA context and kernels: 0.3-2 GiB seen, 1.3 GB measured
NCCL_FLOOR_GIB = 1.0  # communicator buffers, invisible to PyTorch's profiler
FRAGMENTATION_SHARE = 0.05  # of usable memory: reserved-but-unallocated slack
UNQUANTIZED_BYTES = 2  # BF16: embeddings, norms, lm_head, and experts 4-bit loading skips
ADAMW_BYTES = 16  # per trainable param: fp32 adapter 4 + fp32 gradient 4 + AdamW m, v 8
ADAMW_8BIT_BYTES = 10  # fp32 adapter 4 + fp32 gradient 4 + 8-bit m, v 2
CHECKPOINT_BYTES = 2  # per s·b·h and layer: the layer's input kept by full checkpointing
LAYER_BYTES = 34  # per s·b·h: one layer's activations (Korthikanti et al.)
SCORES_BYTES = 5  # per a·s²·b and layer: eager attention scores, softmax and dropout mask
NAIVE_CE_BYTES = 14  # per logit: bf16 logits 2 + fp32 upcast 4 + log-softmax 4 + gradient 4
CHUNKED_CE_BYTES, CHUNKED_CE_CHUNK_BYTES, CHUNKED_CE_CHUNKS = 2, 10, 8  # torchtune default
FLCE_CHUNK_BYTES = 8  # per logit of one Liger chunk (conservative)
CCE_BYTES = 0.6  # per logit: 1,164 MB measured for 2.097e9 logits, forward and backward
GATHER = "fsdp_or_moe_gather"  # the transient the sharding floor applies to


@dataclass(frozen=True)
class Component:
    name: str
    declared_gib: float
    floor_gib: float
    basis: str  # how the floor was computed, in words

    @property
    def used_gib(self) -> float:
        return max(self.declared_gib, self.floor_gib)

    @property
    def raised(self) -> bool:
        """The floor beats the plan's figure by more than rounding (0.01 GiB)."""
        return round(self.floor_gib, 2) > round(self.declared_gib, 2)


@dataclass(frozen=True)
class MemoryFigures:
    usable_gib: float
    components: tuple[Component, ...]

    @property
    def declared_gib(self) -> float:
        return sum(c.declared_gib for c in self.components)

    @property
    def modeled_gib(self) -> float:
        """M: every component at the larger of declared and floor."""
        return sum(c.used_gib for c in self.components)

    @property
    def ratio(self) -> float:
        return self.modeled_gib / self.usable_gib


def model_memory(plan: Plan, usable_gib: float) -> MemoryFigures:
    m, gpus = plan.memory, plan.hardware.gpus
    components = (
        Component(
            "runtime_overhead", m.runtime_overhead, RUNTIME_FLOOR_GIB, "CUDA context and kernels"
        ),
        Component(
            "nccl",
            m.nccl,
            NCCL_FLOOR_GIB if gpus > 1 else 0.0,
            f"NCCL buffers for {gpus} GPUs" if gpus > 1 else "one GPU: no NCCL",
        ),
        _weights(plan),
        _adapters(plan),
        _activations(plan),
        _logits(plan),
        _gather(plan),
        Component(
            "other_transients",
            sum(gib for name, gib in m.transients if name != GATHER),
            0.0,
            "as declared: " + (", ".join(n for n, _ in m.transients if n != GATHER) or "none"),
        ),
        Component(
            "fragmentation_margin",
            m.fragmentation_margin,
            FRAGMENTATION_SHARE * usable_gib,
            f"{FRAGMENTATION_SHARE:.0%} of {usable_gib:.1f} GiB usable",
        ),
    )
    return MemoryFigures(usable_gib, components)


def _shards(plan: Plan) -> int:
    return 1 if plan.training.sharding is Sharding.NONE else plan.training.shards


def _per_gpu(plan: Plan, basis: str) -> str:
    shards = _shards(plan)
    return basis if shards == 1 else f"({basis}) / {shards} shards"


def weights_bytes(plan: Plan) -> tuple[float, str]:
    """The whole model's resident weights, unsharded, and how they were counted."""
    b, moe = plan.memory.weights_breakdown, plan.model.moe
    unquantized, quantized = b.unquantized_params, b.quantized_params
    note = ""
    if moe is not None and moe.experts_stay_bf16 and unquantized < moe.expert_params:
        # The plan counted the experts as quantized, but 4-bit loading skips them.
        moved = min(moe.expert_params, quantized)
        unquantized, quantized = unquantized + moved, quantized - moved
        note = (
            f"; the {count(moe.expert_params)} expert params are fused 3-D parameters that "
            f"{moe.expert_quantizer!r} does not quantize, so they stay BF16"
        )
    per_unquantized = max(UNQUANTIZED_BYTES, b.bytes_per_unquantized)
    total = per_unquantized * unquantized + b.bytes_per_quantized * quantized
    basis = (
        f"{per_unquantized:g} bytes x {count(unquantized)} unquantized + "
        f"{b.bytes_per_quantized:g} bytes x {count(quantized)} quantized params{note}"
    )
    return total, basis


def _weights(plan: Plan) -> Component:
    total, basis = weights_bytes(plan)
    return Component(
        "weights", plan.memory.weights, total / _shards(plan) / GIB, _per_gpu(plan, basis)
    )


def _adapters(plan: Plan) -> Component:
    t = plan.training
    per_param, what = (
        (ADAMW_8BIT_BYTES, "fp32 adapter, gradient and 8-bit optimizer state")
        if t.eight_bit_optimizer
        else (ADAMW_BYTES, "fp32 adapter, gradient and AdamW state")
    )
    basis = f"{count(t.trainable_params)} trainable params x {per_param} bytes ({what})"
    floor = t.trainable_params * per_param / _shards(plan) / GIB
    return Component(
        "adapters_grads_optimizer",
        plan.memory.adapters_grads_optimizer,
        floor,
        _per_gpu(plan, basis),
    )


def _activations(plan: Plan) -> Component:
    t, model = plan.training, plan.model
    s, b, h, layers = t.seq_len, t.micro_batch, model.hidden_size, model.num_layers
    sbh = s * b * h
    eager = t.attention_impl is Attention.EAGER
    scores = SCORES_BYTES * model.num_heads * s * s * b if eager else 0
    scores_note = " + 5·a·s²·b eager attention scores" if eager else ""
    if t.grad_checkpointing is Checkpointing.FULL:
        floor = layers * CHECKPOINT_BYTES * sbh + LAYER_BYTES * sbh + scores
        basis = f"{layers} layers x 2·s·b·h checkpointed + one layer's 34·s·b·h{scores_note}"
    else:
        floor = layers * (LAYER_BYTES * sbh + scores)
        basis = f"{layers} layers x (34·s·b·h{scores_note}), no checkpointing"
    return Component("activations", plan.memory.activations, floor / GIB, basis)


def _logits(plan: Plan) -> Component:
    t, vocab = plan.training, plan.model.vocab_size
    tokens = t.micro_batch * t.seq_len
    logits = tokens * vocab
    what = f"{t.micro_batch} x {t.seq_len} tokens x {vocab} vocab"
    match t.ce_impl:
        case CrossEntropy.NAIVE:
            floor = NAIVE_CE_BYTES * logits
            basis = f"naive cross-entropy: 14 bytes per logit, {what}"
        case CrossEntropy.CHUNKED_UPCAST:
            floor = CHUNKED_CE_BYTES * logits + CHUNKED_CE_CHUNK_BYTES * logits / CHUNKED_CE_CHUNKS
            basis = (
                f"chunked upcast: 2 bytes per bf16 logit + 10 bytes per logit of 1/8 chunk, {what}"
            )
        case CrossEntropy.LIGER_FLCE:
            chunk = _next_pow2(math.ceil(tokens / math.ceil(vocab / plan.model.hidden_size)))
            floor = FLCE_CHUNK_BYTES * chunk * vocab
            basis = f"fused linear cross-entropy: 8 bytes x {chunk}-token chunk x {vocab} vocab"
        case CrossEntropy.CCE:
            floor = CCE_BYTES * logits
            basis = f"cut cross-entropy: 0.6 bytes per logit, {what}"
    return Component("logits_peak", plan.memory.logits_peak, floor / GIB, basis)


def _gather(plan: Plan) -> Component:
    declared = plan.memory.transient(GATHER)
    shards = _shards(plan)
    if shards == 1:
        return Component(GATHER, declared, 0.0, "unsharded: nothing to gather")
    total, _ = weights_bytes(plan)
    copies = 2 if plan.training.forward_prefetch else 1
    floor = copies * total / plan.model.num_layers
    basis = f"{copies} layer(s) of unsharded weights"
    moe = plan.model.moe
    if moe is not None and not moe.reshard_after_forward:
        per_expert_param = (
            UNQUANTIZED_BYTES
            if moe.experts_stay_bf16
            else plan.memory.weights_breakdown.bytes_per_quantized
        )
        floor += per_expert_param * moe.expert_params
        basis += " + every MoE layer's experts (reshard_after_forward is false)"
    return Component(GATHER, declared, floor / GIB, basis)


def count(n: float) -> str:
    """A parameter count for people: 110M, 27B."""
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return f"{n:g}"


def _next_pow2(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()
