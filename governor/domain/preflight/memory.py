"""The per-GPU memory model with the governor's floors.

For every component the larger of what the plan declares and what the governor can
recompute from the plan's own shapes wins; the modeled peak M is the sum. Byte constants
are per value unless stated; results are GiB per GPU. docs/preflight.md gives every term's
formula and its source.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from governor.domain.preflight.plan import (
    Aggregation,
    Attention,
    Checkpointing,
    CrossEntropy,
    Dequantize,
    KbitMatmul,
    KernelFormat,
    Mlp,
    NoSyncGrads,
    OptimizerImpl,
    OptimizerStates,
    Plan,
    Precision,
    Sharding,
)
from governor.domain.telemetry import GIB

RUNTIME_FLOOR_GIB = 1.5  # CUDA context and kernels: 0.3-2 GiB seen, 1.3 GB measured
NCCL_FLOOR_GIB = 1.0  # communicator buffers, invisible to PyTorch's profiler
FRAGMENTATION_SHARE = 0.05  # of usable memory: reserved-but-unallocated slack
UNQUANTIZED_BYTES = 2  # BF16: embeddings, norms, lm_head, and experts 4-bit loading skips
VALUE_BYTES = {Precision.FP32: 4, Precision.BF16: 2}
STATE_BYTES = {OptimizerStates.FP32: 4, OptimizerStates.BF16: 2, OptimizerStates.EIGHT_BIT: 1}
MASTER_BYTES = 4  # the fp32 master copy of a bf16 trained weight
# State-sized temporaries per trained value at an Adam or AdamW step, counted in
# tests/unit/domain/preflight/test_optimizer_step_bytes.py: torch.optim's foreach AdamW
# computes sqrt(v) for every tensor at once before it updates the params; fused kernels none.
STEP_TEMPORARIES = {OptimizerImpl.FOREACH: 1, OptimizerImpl.FUSED: 0}
ADAM_STATES = 2  # m and v: the optimizers the temporaries were counted for
FULL_SHARE = 0.5  # trainable over half the params: the model's own weights are trained
CHECKPOINT_BYTES = 2  # per s·b·h and layer: the layer's input kept by full checkpointing
# The same input in fp32, where k-bit preparation cast the embedding and norms to fp32 and the
# residual stream with them: fms-acceleration's QLoRA of Mistral 7B on one A100 holds 4.00
# GiB more with PEFT's preparation than without it at batch 4 and 8.00 at batch 8, 2 bytes x
# 32 layers x 4,096 x the tokens (docs/preflight.md, "Weights, activations and sequences").
FP32_CHECKPOINT_BYTES = 4
LAYER_BYTES = 34  # per s·b·h: one layer's activations (Korthikanti et al.)
# A gated MLP against the standard one of 4 x hidden in those 34, per token, in values of the
# inner width I and the hidden size h (2 bytes each): with frozen MLP weights the gated one
# keeps the gate's output, its activation and the up-projection's output (3 I) where the
# standard one keeps the GELU's input (4 h); with trained weights both keep their input and
# the down-projection's input too (the gated h + 4 I against the standard 9 h).
GATED_KEPT = {False: (3, 4), True: (4, 8)}  # by trained: values of I kept, of h no longer
GATED_VALUE_BYTES = 2  # per value kept (BF16; fp32 activations double the whole term)
SCORES_BYTES = 5  # per a·s²·b and layer: eager attention scores, softmax and dropout mask
# Per logit, at the loss's peak (its backward: the log-softmax output it saved, the gradient
# coming into it and the gradient it hands back, each the size of the logits), counted in
# tests/unit/domain/preflight/test_loss_bytes.py: upcast to fp32, 3 x 4 bytes; in the logits'
# own 16-bit dtype, 3 x 2 bytes.
NAIVE_CE_BYTES = 12
SAME_DTYPE_CE_BYTES = 6
CHUNKED_CE_BYTES, CHUNKED_CE_CHUNK_BYTES, CHUNKED_CE_CHUNKS = 2, 10, 8  # torchtune default
FLCE_CHUNK_BYTES = 8  # per logit of one Liger chunk (conservative)
CCE_BYTES = 0.6  # per logit: 1,164 MB measured for 2.097e9 logits, forward and backward
FUSED_LOSSES = (CrossEntropy.LIGER_FLCE, CrossEntropy.CCE)  # never hold the whole logits
SOFTCAP_BYTES = 2  # per logit: the BF16 tanh output a softcapped head saves for backward
DEQUANTIZED_BYTES = 2  # per param: the BF16 working copy of a quantized weight
KEPT_INPUT_BYTES = 2  # per value: the BF16 input a k-bit matmul keeps for backward
MLP_WIDTH = 4  # the MLP's inner width in hidden sizes where the plan does not give it
KERNEL_BYTES = {  # per weight and layout, scales included
    KernelFormat.FP8: 1.0,  # E4M3/E5M2, one FP32 scale per tensor
    KernelFormat.MXFP8: 1 + 1 / 32,  # E4M3, one 8-bit E8M0 scale per 32 values
    KernelFormat.MXFP4: 0.5 + 1 / 32,  # E2M1, one 8-bit E8M0 scale per 32 values
    KernelFormat.NVFP4: 0.5 + 1 / 16,  # E2M1, one FP8 E4M3 scale per 16 values
}
# Components whose declared figure is the plan's transient of the same name.
GATHER = "fsdp_or_moe_gather"
DEQUANTIZED = "dequantized_copy"
LAYOUTS = "kernel_layouts"
SOFTCAP = "softcap_logits"
AGGREGATION = "expert_aggregation"
STEP = "optimizer_step"
NAMED_TRANSIENTS = (GATHER, DEQUANTIZED, LAYOUTS, SOFTCAP, AGGREGATION, STEP)
# What each published metric leaves out of the modeled peak. The allocator's allocated peak
# sees neither the CUDA context and NCCL (outside the allocator) nor the slack the
# fragmentation margin stands for (reserved but unallocated); its reserved peak includes that
# slack; the device's used memory (nvidia-smi, NVML) includes the context, NCCL and
# everything the allocator reserved.
LEFT_OUT = {
    "allocated": ("runtime_overhead", "nccl", "fragmentation_margin"),
    "reserved": ("runtime_overhead", "nccl"),
    "device": (),
}


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

    def predicted_gib(self, metric: str) -> float:
        """The model's figure for what a measurement of `metric` sees: `allocated` (the
        PyTorch allocator's allocated peak), `reserved` (its reserved peak) or `device` (the
        used memory nvidia-smi and NVML report)."""
        return sum(c.used_gib for c in self.components if c.name not in LEFT_OUT[metric])


def model_memory(plan: Plan, usable_gib: float) -> MemoryFigures:
    m, gpus = plan.memory, plan.hardware.gpus
    weights, place = held(plan), placement(plan)
    others = [(name, gib) for name, gib in m.transients if name not in NAMED_TRANSIENTS]
    passing = (
        _activations(plan),
        _logits(plan),
        _softcap(plan),
        _gather(plan, weights, place),
    )
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
        _weights(plan, weights, place),
        _dequantized(plan, weights, place),
        _layouts(plan, weights, place),
        _adapters(plan),
        *passing,
        _optimizer_step(plan, passing),
        _aggregation(plan, weights, place),
        Component(
            "other_transients",
            sum(gib for _, gib in others),
            0.0,
            "as declared: " + (", ".join(name for name, _ in others) or "none"),
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


@dataclass(frozen=True)
class Held:
    """One whole copy of the model's weights as loading leaves them: params and bytes."""

    unquantized: float
    quantized: float
    unquantized_bytes: float  # per param
    quantized_bytes: float
    experts: float  # expert params; 0 without experts
    quantized_experts: float  # of those, the ones held quantized
    basis: str

    @property
    def total(self) -> float:
        return self.unquantized_bytes * self.unquantized + self.quantized_bytes * self.quantized

    @property
    def expert_bytes(self) -> float:
        unquantized = self.experts - self.quantized_experts
        return self.quantized_bytes * self.quantized_experts + self.unquantized_bytes * unquantized


def held(plan: Plan) -> Held:
    """The weights as held. 4-bit loading skips fused 3-D experts: a plan that counted them
    quantized has them moved to the unquantized share."""
    b, moe = plan.memory.weights_breakdown, plan.model.moe
    unquantized, quantized = b.unquantized_params, b.quantized_params
    note = ""
    if plan.training.kbit_prep_fp32:
        note += "; k-bit preparation casts the unquantized params to fp32"
    if moe is not None and moe.experts_stay_bf16 and unquantized < moe.expert_params:
        moved = min(moe.expert_params, quantized)
        unquantized, quantized = unquantized + moved, quantized - moved
        note += (
            f"; the {count(moe.expert_params)} expert params are fused 3-D parameters that "
            f"{moe.expert_quantizer!r} does not quantize, so they stay BF16"
        )
    floor_bytes = 4 if plan.training.kbit_prep_fp32 else UNQUANTIZED_BYTES
    per_unquantized = max(floor_bytes, b.bytes_per_unquantized)
    experts = 0.0 if moe is None else moe.expert_params
    quantized_experts = 0.0 if moe is None or moe.experts_stay_bf16 else min(experts, quantized)
    basis = (
        f"{per_unquantized:g} bytes x {count(unquantized)} unquantized + "
        f"{b.bytes_per_quantized:g} bytes x {count(quantized)} quantized params{note}"
    )
    return Held(
        unquantized,
        quantized,
        per_unquantized,
        b.bytes_per_quantized,
        experts,
        quantized_experts,
        basis,
    )


@dataclass(frozen=True)
class Placement:
    """How one GPU's share of the model is cut: dense params over the shards; experts by
    expert parallelism, ceil(E / EP) whole experts per GPU, each over shards // EP GPUs."""

    shards: int
    expert_parallel: int
    experts: int
    local_experts: int
    expert_shards: int

    @property
    def local_share(self) -> float:
        return self.local_experts / self.experts

    def per_gpu(self, dense: float, experts: float) -> float:
        """One GPU's part of something split into dense and expert parts."""
        return dense / self.shards + experts * self.local_share / self.expert_shards

    def gathered(self, dense: float, experts: float) -> float:
        """The same with every unit all-gathered: dense whole, this GPU's experts whole."""
        return dense + experts * self.local_share

    @property
    def note(self) -> str:
        if self.local_experts == self.experts:
            return ""
        spread = f", each over {self.expert_shards} shards" if self.expert_shards > 1 else ""
        return (
            f"; experts placed ceil({self.experts} / {self.expert_parallel}) = "
            f"{self.local_experts} of {self.experts} per GPU{spread}"
        )


def placement(plan: Plan) -> Placement:
    shards, moe = _shards(plan), plan.model.moe
    if moe is not None:
        ep, experts = moe.expert_parallel, moe.num_experts
        local = math.ceil(experts / ep)
        if local < experts:
            return Placement(shards, ep, experts, local, max(1, shards // ep))
    return Placement(shards, 1, 1, 1, shards)  # experts sharded as the dense params are


def _weights(plan: Plan, weights: Held, place: Placement) -> Component:
    if plan.training.offload_params:
        return Component(
            "weights", plan.memory.weights, 0.0, "sharded params offloaded to the host"
        )
    dense = weights.total - weights.expert_bytes
    floor = place.per_gpu(dense, weights.expert_bytes)
    basis = _per_gpu(plan, weights.basis) + place.note
    return Component("weights", plan.memory.weights, floor / GIB, basis)


def _dequantized(plan: Plan, weights: Held, place: Placement) -> Component:
    declared = plan.memory.transient(DEQUANTIZED)
    match plan.training.dequantize:
        case Dequantize.NONE if kbit_matmul(plan):
            largest, what = largest_quantized(plan)
            basis = (
                f"each k-bit matmul dequantizes its weight to a BF16 copy, freed after it: "
                f"2 bytes x the largest quantized matrix, {what}"
            )
            return Component(DEQUANTIZED, declared, DEQUANTIZED_BYTES * largest / GIB, basis)
        case Dequantize.NONE:
            return Component(DEQUANTIZED, declared, 0.0, "the recipe trains on the weights as held")
        case Dequantize.EXPERTS:
            dense, experts, what = 0.0, weights.quantized_experts, "quantized expert"
        case Dequantize.ALL:
            dense = weights.quantized - weights.quantized_experts
            experts, what = weights.quantized_experts, "quantized"
    floor = DEQUANTIZED_BYTES * place.per_gpu(dense, experts)
    basis = (
        f"a BF16 working copy held beside its quantized source: 2 bytes x "
        f"{count(dense + experts)} {what} params"
    )
    return Component(DEQUANTIZED, declared, floor / GIB, _per_gpu(plan, basis) + place.note)


def _layouts(plan: Plan, weights: Held, place: Placement) -> Component:
    t, model = plan.training, plan.model
    declared = plan.memory.transient(LAYOUTS)
    if t.kernel_format is KernelFormat.NONE:
        return Component(LAYOUTS, declared, 0.0, "no low-precision training kernels")
    per_weight = KERNEL_BYTES[t.kernel_format]
    gemm = max(0.0, model.params_total - model.vocab_size * model.hidden_size)
    here = place.per_gpu(max(0.0, gemm - weights.experts), weights.experts)
    floor = t.kernel_layouts * per_weight * here
    basis = (
        f"{t.kernel_layouts} {t.kernel_format} layout(s) beside the stored weights x "
        f"{per_weight:g} bytes with scales x {count(gemm)} GEMM weights (all but the "
        f"{model.vocab_size} x {model.hidden_size} embedding)"
    )
    return Component(LAYOUTS, declared, floor / GIB, _per_gpu(plan, basis) + place.note)


def _adapters(plan: Plan) -> Component:
    """Trained weights, their gradients, master copies and optimizer state, per param.
    At the defaults: fp32 adapter 4 + fp32 gradient 4 + AdamW m, v 8 = 16 (10 with 8-bit
    states). A full fine-tune's trained weights are the model's own, counted in `weights`."""
    t = plan.training
    declared = plan.memory.adapters_grads_optimizer
    unsharded, unsharded_basis = _no_sync_grads(plan)
    if t.offload_params:
        basis = "params, gradients and the optimizer step offloaded to the host"
        return Component(
            "adapters_grads_optimizer", declared, unsharded / GIB, basis + unsharded_basis
        )
    value = VALUE_BYTES[t.trainable_dtype]
    full = full_fine_tune(plan)
    parts: list[tuple[float, str]] = (
        [] if full else [(value, f"{t.trainable_dtype} trained weight")]
    )
    if not t.optimizer_in_backward and not gradients_per_step(plan):
        parts.append((value, f"{t.trainable_dtype} gradient"))
    on_host = t.offload_optimizer or t.paged_optimizer
    if t.master_weights and not on_host:
        parts.append((MASTER_BYTES, "fp32 master weight"))
    states = t.state_count * STATE_BYTES[t.states]
    if states and not on_host:
        parts.append((states, f"{t.states} optimizer state x {t.state_count:g}"))
    per_param = sum(b for b, _ in parts)
    what = " + ".join(f"{b:g} {w}" for b, w in parts) or "nothing held"
    notes = []
    if full:
        notes.append("the trained weights are the model's own, in weights")
    if t.optimizer_in_backward:
        notes.append("gradients applied and freed in backward")
    elif gradients_per_step(plan):
        notes.append(f"gradients only from backward to the step, in {STEP}")
    if t.offload_optimizer:
        notes.append("optimizer state on the host")
    elif t.paged_optimizer:
        notes.append("paged optimizer state, evicted to the host")
    note = f"; {'; '.join(notes)}" if notes else ""
    basis = f"{count(t.trainable_params)} trainable params x {per_param:g} bytes ({what}){note}"
    floor = (t.trainable_params * per_param / _shards(plan) + unsharded) / GIB
    return Component(
        "adapters_grads_optimizer", declared, floor, _per_gpu(plan, basis) + unsharded_basis
    )


def gradients_per_step(plan: Plan) -> bool:
    """One micro-batch per step: the gradients are made in backward and freed after the step
    (zero_grad's set_to_none, PyTorch's default), so the pass's forward holds none."""
    t = plan.training
    off_the_gpu = t.optimizer_in_backward or t.offload_params  # no gradient kept there
    return t.gradient_accumulation_steps == 1 and not off_the_gpu


def _step_temporaries(plan: Plan) -> tuple[float, str]:
    """Bytes per trained value the step's own temporaries hold, and what they are (or why
    there are none): state-sized ones where an Adam or AdamW step (the one counted) runs on
    the GPU over fp32 or 16-bit states (bitsandbytes' 8-bit and paged steps are its own
    kernels; an offloaded step runs on the host)."""
    t = plan.training
    if t.optimizer_impl is None:
        return 0.0, "the step's implementation not given: no temporaries counted"
    if t.state_count != ADAM_STATES:
        return 0.0, f"temporaries counted for Adam and AdamW only, not {t.optimizer}"
    elsewhere = t.offload_optimizer or t.offload_params or t.paged_optimizer
    if elsewhere or t.optimizer_in_backward or t.states is OptimizerStates.EIGHT_BIT:
        return 0.0, "no state-sized temporaries on the GPU"
    per = STEP_TEMPORARIES[t.optimizer_impl] * STATE_BYTES[t.states]
    return per, f"{t.optimizer_impl} temporaries"


def _optimizer_step(plan: Plan, passing: tuple[Component, ...]) -> Component:
    """What the optimizer step holds beyond the training pass's peak. By the step the
    activations, logits and gathered units are freed; the step holds the gradients where they
    live only from backward to the step, and its own temporaries. It adds the part of those
    over what the pass held (nothing where the pass held more)."""
    t, declared = plan.training, plan.memory.transient(STEP)
    temporaries, what = _step_temporaries(plan)
    parts = [(temporaries, what)] if temporaries else []
    if gradients_per_step(plan):
        parts.insert(0, (VALUE_BYTES[t.trainable_dtype], f"{t.trainable_dtype} gradient"))
    if not parts:
        return Component(STEP, declared, 0.0, f"{what}; gradients counted as held")
    per, shards = sum(b for b, _ in parts), _shards(plan)
    step = t.trainable_params * per / shards / GIB
    held = sum(c.used_gib for c in passing)
    basis = (
        f"the step holds {count(t.trainable_params)} trainable params x {per:g} bytes ("
        + " + ".join(f"{b:g} {w}" for b, w in parts)
        + (f") / {shards} shards" if shards > 1 else ")")
        + f" = {step:.2f} GiB where the pass held {held:.2f} GiB (activations, logits, "
        "gathered units): the excess"
    )
    return Component(STEP, declared, max(0.0, step - held), basis)


def full_fine_tune(plan: Plan) -> bool:
    """Over half the params trained: the model's own weights, not adapters beside them."""
    return plan.training.trainable_params > FULL_SHARE * plan.model.params_total


def _no_sync_grads(plan: Plan) -> tuple[float, str]:
    """Gradients accumulated under FSDP's no_sync(): every micro-batch but the last keeps the
    full, unsharded gradients on each GPU until the synchronizing one. With use_orig_params
    and frozen and trained params in one unit, the frozen ones get gradients too: every
    param but the embedding lookup (the head counted, the conservative side). Bytes per
    value: the trained weights' dtype."""
    t, model = plan.training, plan.model
    if t.no_sync_grads is NoSyncGrads.NONE or _shards(plan) == 1 or t.optimizer_in_backward:
        return 0.0, ""
    value = VALUE_BYTES[t.trainable_dtype]
    if t.no_sync_grads is NoSyncGrads.UNITS:
        params = max(t.trainable_params, model.params_total - model.vocab_size * model.hidden_size)
        what = "every param of the units holding a trained one (all but the embedding)"
    else:
        params, what = t.trainable_params, "the trained params"
    basis = (
        f"; + {value} bytes x {count(params)} params, {what}: gradients accumulated "
        f"unsharded under no_sync()"
    )
    return value * params, basis


def _activations(plan: Plan) -> Component:
    t, model = plan.training, plan.model
    h, layers, tokens = model.hidden_size, model.num_layers, t.tokens
    s = tokens // t.micro_batch
    sbh = tokens * h
    eager = t.attention_impl is Attention.EAGER
    scores = SCORES_BYTES * model.num_heads * s * tokens if eager else 0
    scores_note = " + 5·a·s²·b eager attention scores" if eager else ""
    if t.grad_checkpointing is Checkpointing.FULL:
        fp32_stream = t.kbit_prep_fp32 and t.activation_dtype is not Precision.FP32
        per = FP32_CHECKPOINT_BYTES if fp32_stream else CHECKPOINT_BYTES
        kept = 0 if t.offload_activations else layers * per * sbh
        floor = kept + LAYER_BYTES * sbh + scores
        held = "offloaded to the host" if t.offload_activations else "checkpointed"
        stream = " (fp32: the k-bit preparation's residual stream)" if fp32_stream else ""
        basis = f"{layers} layers x {per}·s·b·h {held}{stream} + one layer's 34·s·b·h"
        basis += scores_note
    else:
        floor = layers * (LAYER_BYTES * sbh + scores)
        basis = f"{layers} layers x (34·s·b·h{scores_note}), no checkpointing"
    if model.mlp is Mlp.GATED:
        gated, gated_basis = _gated_mlp(plan)
        floor, basis = floor + gated, basis + gated_basis
    if kbit_matmul(plan) and t.kbit_matmul is KbitMatmul.DEQUANTIZE_KEEP_INPUT:
        inputs, inputs_basis = _kept_inputs(plan)
        floor, basis = floor + inputs, basis + inputs_basis
    basis += f", s·b = {tokens} tokens ({t.padding})"
    if t.activation_dtype is Precision.FP32:
        floor, basis = 2 * floor, basis + ", fp32 activations: x 2"
    return Component("activations", plan.memory.activations, floor / GIB, basis)


def _gated_mlp(plan: Plan) -> tuple[int, str]:
    """What a gated MLP keeps for backward beyond the standard MLP the 34·s·b·h stands for:
    with frozen weights 3 x I values (gate output, its activation, up output) against the
    GELU's 4 x h input; with trained weights h + 4 x I against 9 x h (their inputs and the
    down-projection's input too). 2 bytes per value, for every stored layer without
    checkpointing, for the one recomputed layer with it."""
    t, m = plan.training, plan.model
    width, width_basis = _mlp_width(plan)
    # Adapters on the MLP's projections keep their inputs as trained weights do: a LoRA plan
    # takes the larger of the two rows (the frozen one wherever I < 4 x h, as in Llama).
    rows = {
        trained: of_width * width - of_hidden * m.hidden_size
        for trained, (of_width, of_hidden) in GATED_KEPT.items()
    }
    trained = full_fine_tune(plan) or rows[True] > rows[False]
    per_token = rows[trained]
    layers = 1 if t.grad_checkpointing is Checkpointing.FULL else m.num_layers
    values = layers * per_token * t.tokens
    kept = "h + 4·I, the projections keeping their inputs" if trained else "3·I, frozen"
    replaced = "9·h" if trained else "4·h"
    basis = (
        f" + gated MLP: 2 bytes x {layers} layer(s) x ({kept} - the standard MLP's "
        f"{replaced}) = {per_token} values per token ({width_basis})"
    )
    return GATED_VALUE_BYTES * values, basis


def kbit_matmul(plan: Plan) -> bool:
    """The plan holds quantized weights and says how their matmuls run."""
    quantized = plan.memory.weights_breakdown.quantized_params > 0
    return quantized and plan.training.kbit_matmul is not KbitMatmul.NONE


def _mlp_width(plan: Plan) -> tuple[int, str]:
    m = plan.model
    if m.intermediate_size is not None:
        return m.intermediate_size, f"intermediate {m.intermediate_size}"
    return MLP_WIDTH * m.hidden_size, f"intermediate {MLP_WIDTH} x hidden (not given)"


def head_quantized(plan: Plan) -> bool:
    """The output head is among the quantized weights unless the unquantized params have room
    for both the embedding and an untied head (vocab x hidden each)."""
    m = plan.model
    return plan.memory.weights_breakdown.unquantized_params < 2 * m.vocab_size * m.hidden_size


def largest_quantized(plan: Plan) -> tuple[float, str]:
    """The largest single quantized matrix: the head where it is quantized, else the larger of
    an MLP projection (hidden x intermediate) and the fused q, k, v projection (3 x hidden²)."""
    m = plan.model
    width, width_basis = _mlp_width(plan)
    largest = float(max(m.hidden_size * width, 3 * m.hidden_size * m.hidden_size))
    what = f"{count(largest)} params ({width_basis})"
    head = float(m.vocab_size * m.hidden_size)
    if head_quantized(plan) and head > largest:
        largest, what = head, f"the {m.vocab_size} x {m.hidden_size} head"
    return largest, what


def _kept_inputs(plan: Plan) -> tuple[int, str]:
    """The inputs a k-bit matmul keeps for backward where a frozen 16-bit one keeps none:
    per layer the attention's input (h), the MLP's input (h, shared by its projections), the
    MLP's down-projection input (the intermediate width) and, with eager attention, the
    output projection's input (h; fused attention kernels keep their output anyway); the
    head's input once where the head is quantized. 2 bytes per value, for every layer
    without checkpointing, for the one recomputed layer with it."""
    t, m = plan.training, plan.model
    width, width_basis = _mlp_width(plan)
    per_token = 2 * m.hidden_size + width
    if t.attention_impl is Attention.EAGER:
        per_token += m.hidden_size
    layers = 1 if t.grad_checkpointing is Checkpointing.FULL else m.num_layers
    values = layers * per_token * t.tokens
    head = " + the head's input" if head_quantized(plan) else ""
    if head:
        values += m.hidden_size * t.tokens
    basis = (
        f" + k-bit matmul inputs kept for backward: 2 bytes x {layers} layer(s) x "
        f"{per_token} values per token ({width_basis}){head}"
    )
    return KEPT_INPUT_BYTES * values, basis


def _logit_count(plan: Plan) -> tuple[int, str]:
    t, vocab = plan.training, plan.model.vocab_size
    return t.tokens * vocab, f"{t.tokens} tokens x {vocab} vocab"


def _logits(plan: Plan) -> Component:
    t, vocab = plan.training, plan.model.vocab_size
    tokens = t.tokens
    logits, what = _logit_count(plan)
    floor: float  # chunked upcast divides by the chunk count: not a whole number of bytes
    match t.ce_impl:
        case CrossEntropy.NAIVE:
            floor = NAIVE_CE_BYTES * logits
            basis = f"naive cross-entropy: {NAIVE_CE_BYTES} bytes per logit, {what}"
        case CrossEntropy.SAME_DTYPE:
            floor = SAME_DTYPE_CE_BYTES * logits
            basis = (
                f"cross-entropy in the logits' 16-bit dtype: {SAME_DTYPE_CE_BYTES} bytes per "
                f"logit, {what}"
            )
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


def _softcap(plan: Plan) -> Component:
    declared = plan.memory.transient(SOFTCAP)
    cap, loss = plan.model.final_logit_softcapping, plan.training.ce_impl
    if cap is None:
        return Component(SOFTCAP, declared, 0.0, "the output head is not softcapped")
    if loss in FUSED_LOSSES:
        return Component(SOFTCAP, declared, 0.0, f"{loss} applies the softcap inside its chunks")
    logits, what = _logit_count(plan)
    basis = f"softcap {cap:g}: the tanh output saved for backward, 2 bytes per logit, {what}"
    return Component(SOFTCAP, declared, SOFTCAP_BYTES * logits / GIB, basis)


def _gather(plan: Plan, weights: Held, place: Placement) -> Component:
    declared = plan.memory.transient(GATHER)
    if place.shards == 1:
        return Component(GATHER, declared, 0.0, "unsharded: nothing to gather")
    t, moe = plan.training, plan.model.moe
    if not t.reshard_after_forward:
        dense = weights.total - weights.expert_bytes
        floor = place.gathered(dense, weights.expert_bytes)
        basis = "every unit stays gathered from its forward to its backward "
        basis += "(reshard_after_forward is false)" + place.note
        return Component(GATHER, declared, floor / GIB, basis)
    buffers = 1 + (t.prefetch_depth if t.forward_prefetch else 0)
    if t.largest_unit_params is None:
        unit, what = weights.total / plan.model.num_layers, "layer(s) of unsharded weights"
    else:
        unit = t.largest_unit_params * weights.unquantized_bytes
        what = (
            f"x the largest unit ({count(t.largest_unit_params)} params at "
            f"{weights.unquantized_bytes:g} bytes)"
        )
    floor, basis = buffers * unit, f"{buffers} {what}"
    if moe is not None and not moe.reshard_after_forward:
        floor += place.gathered(0.0, weights.expert_bytes)
        basis += " + every MoE layer's experts (reshard_after_forward is false)" + place.note
    return Component(GATHER, declared, floor / GIB, basis)


def _aggregation(plan: Plan, weights: Held, place: Placement) -> Component:
    """Loading that assembles per-expert tensors into fused ones holds the pieces beside the
    fused result: one layer's worth, or every expert of this GPU, at the bytes they are
    assembled in (BF16 where the recipe dequantizes the experts)."""
    declared, moe = plan.memory.transient(AGGREGATION), plan.model.moe
    dequantized = plan.training.dequantize is not Dequantize.NONE
    mode = None if moe is None else moe.load_aggregation
    if mode is None:  # dequantizing experts at load holds their BF16 pieces until assembled
        mode = Aggregation.ALL if dequantized else Aggregation.NONE
    if moe is None or mode is Aggregation.NONE:
        return Component(AGGREGATION, declared, 0.0, "no expert tensors assembled at load")
    if not dequantized:
        experts, at = weights.expert_bytes, "as held"
    else:
        experts, at = DEQUANTIZED_BYTES * weights.experts, "in BF16"
    floor = place.per_gpu(0.0, experts)
    what = "every expert of this GPU"
    if mode is Aggregation.PER_LAYER:
        floor, what = floor / plan.model.num_layers, "one layer's experts"
    basis = (
        f"per-expert pieces held beside the fused tensors while {what} are assembled, "
        f"{count(weights.experts)} expert params {at}"
    )
    return Component(AGGREGATION, declared, floor / GIB, _per_gpu(plan, basis) + place.note)


def count(n: float) -> str:
    """A parameter count for people: 110M, 27B."""
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return f"{n:g}"


def _next_pow2(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()
