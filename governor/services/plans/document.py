"""The preflight plan document: what a job says it will need before any GPU is rented, read
into the domain's `Plan`, and read back for a re-check from the copy kept with its verdict.

The document follows the "preflight-plan/0.1" schema, or "preflight-plan/0.2" for several
GPU models in one plan (docs/api.md, Preflight plans); the two differ only in `hardware`.
Fields marked "for the record" are stored with the verdict but decide nothing.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any, Final, Literal

from pydantic import (
    Field,
    PlainSerializer,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)

from governor.domain.money import format_usd
from governor.domain.preflight.gpus import gpu_class, same_model
from governor.domain.preflight.plan import (
    Aggregation,
    Attention,
    Checkpointing,
    CrossEntropy,
    Dequantize,
    Evidence,
    ExpertStorage,
    GpuGroup,
    Hardware,
    KbitMatmul,
    KernelFormat,
    MemoryModel,
    Mlp,
    Model,
    Moe,
    NoSyncGrads,
    OptimizerImpl,
    OptimizerStates,
    Padding,
    Plan,
    PlanPhase,
    Precision,
    Sharding,
    Storage,
    Training,
    WeightsBreakdown,
)
from governor.services.security.safe_input import (
    ClientDate,
    Name,
    Note,
    PositiveUsd,
    Step,
    Strict,
    Usd,
    line,
)

Gib = Annotated[float, Field(ge=0, le=1_000_000, allow_inf_nan=False)]
Params = Annotated[float, Field(ge=0, le=1e15, allow_inf_nan=False)]
Hours = Annotated[Decimal, Field(ge=0, le=8760)]
Count = Annotated[int, Field(ge=1, le=10_000_000)]
Label = Annotated[str, line(100, min_length=1)]
_AS_TEXT = PlainSerializer(format_usd, when_used="json")  # stored as "4.59", not "4.590000"
PlanUsd = Annotated[Usd, _AS_TEXT]
PlanRate = Annotated[PositiveUsd, _AS_TEXT]


PLAN_V1: Final = "preflight-plan/0.1"
PLAN_V2: Final = "preflight-plan/0.2"
GpuCount = Annotated[int, Field(ge=1, le=1024)]


class PlanHostIn(Strict):
    """What every GPU of the plan shares: where it runs, and how its rates were read."""

    provider: Label | None = None  # for the record
    cloud_tier: Label | None = None  # for the record
    nodes: GpuCount = 1
    rate_source: Note | None = None  # for the record
    rate_quoted_at: ClientDate = Field(description="the day the rate was read (YYYY-MM-DD)")
    billing_increment_s: Annotated[int, Field(ge=1, le=86_400)]
    interruptible: bool = Field(False, description="spot: exempt from the low-rate check")


class PlanGpusIn(Strict):
    """0.2: the plan's GPUs of one model."""

    gpu_type: Label
    gpu_count: GpuCount = Field(description="GPUs of this model per node")
    usable_mib_per_gpu: Count | None = Field(
        None,
        description="MiB per GPU the driver reports (nvidia-smi's total; the driver's reserve "
        "is taken off it); unset: the GPU table's figure (a model not in the table needs it)",
    )
    rate_usd_per_gpu_hour: PlanRate

    @model_validator(mode="after")
    def _memory_known(self) -> PlanGpusIn:
        if self.usable_mib_per_gpu is None and gpu_class(self.gpu_type) is None:
            raise ValueError(
                f"{self.gpu_type!r} is not in the GPU table: give its usable_mib_per_gpu (the "
                "MiB per GPU its driver reports)"
            )
        return self

    def group(self) -> GpuGroup:
        return GpuGroup(
            self.gpu_type, self.gpu_count, self.usable_mib_per_gpu, self.rate_usd_per_gpu_hour
        )


class PlanHardwareIn(PlanHostIn, PlanGpusIn):
    """0.1: one GPU model, its usable memory declared."""

    usable_mib_per_gpu: Count

    def groups(self) -> tuple[GpuGroup, ...]:
        return (self.group(),)


class PlanMixedHardwareIn(PlanHostIn):
    """0.2: one group per GPU model."""

    gpus: Annotated[list[PlanGpusIn], Field(min_length=1, max_length=16)]

    @field_validator("gpus")
    @classmethod
    def _one_group_per_model(cls, gpus: list[PlanGpusIn]) -> list[PlanGpusIn]:
        for i, later in enumerate(gpus):
            for earlier in gpus[:i]:
                if same_model(earlier.gpu_type, later.gpu_type):
                    raise ValueError(
                        f"{earlier.gpu_type!r} and {later.gpu_type!r} are the same GPU model: "
                        "give one group per model, its GPUs counted together"
                    )
        return gpus

    def groups(self) -> tuple[GpuGroup, ...]:
        return tuple(g.group() for g in self.gpus)


class PlanPhaseIn(Strict):
    name: Label = Field(description="canary, train and checkpoint are the names the rules read")
    expected_hours: Hours
    max_hours: Annotated[Decimal, Field(gt=0, le=8760)]
    gpu_held: bool = Field(True, description="billed for GPUs during this phase")
    min_optimizer_steps: Step | None = None

    @model_validator(mode="after")
    def _max_covers_expected(self) -> PlanPhaseIn:
        if self.max_hours < self.expected_hours:
            raise ValueError(f"phase {self.name!r}: max_hours must be at least expected_hours")
        return self


class PlanStorageIn(Strict):
    kind: Label  # for the record
    gb: Annotated[Decimal, Field(ge=0, le=10_000_000)]
    usd_per_gb_month: PlanUsd
    hours_held: Hours


class PlanMoeIn(Strict):
    num_experts: Count  # for the record
    top_k: Count  # for the record
    expert_params: Params
    experts_storage: ExpertStorage
    expert_quantizer: Label = Field(description='"none", "bnb_linear4bit", "experts4bit", ...')
    reshard_after_forward: bool = True
    expert_parallel: Count = Field(1, description="GPUs the experts are spread over (EP degree)")
    load_aggregation: Aggregation | None = Field(
        None,
        description=(
            "loading assembles per-expert tensors into fused ones: none, per_layer or all; "
            "by default all where training.dequantize dequantizes the experts, else none"
        ),
    )

    @model_validator(mode="after")
    def _top_k_of_experts(self) -> PlanMoeIn:
        if self.top_k > self.num_experts:
            raise ValueError("top_k must not exceed num_experts")
        if self.expert_parallel > self.num_experts:
            raise ValueError("expert_parallel must not exceed num_experts")
        return self


class PlanModelIn(Strict):
    params_total: Annotated[float, Field(gt=0, le=1e15, allow_inf_nan=False)]
    vocab_size: Count
    hidden_size: Count
    num_layers: Count
    num_heads: Count
    moe: PlanMoeIn | None = None
    final_logit_softcapping: Annotated[float, Field(gt=0, le=1e6, allow_inf_nan=False)] | None = (
        Field(None, description="the output head's tanh cap (e.g. 30.0), if the model has one")
    )
    id: Label | None = Field(
        None, description="the model's name (e.g. a hub repository): its measured floors are kept"
    )
    revision: Label | None = Field(None, description="the checkpoint's revision (commit or tag)")
    intermediate_size: Count | None = Field(
        None, description="the MLP's inner width (e.g. 11008); unset: 4 x hidden_size"
    )
    mlp: Mlp = Field(
        Mlp.STANDARD,
        description="standard (up, GELU, down) or gated (gate and up multiplied: SwiGLU)",
    )

    @model_validator(mode="after")
    def _experts_within_total(self) -> PlanModelIn:
        if self.moe is not None and self.moe.expert_params > self.params_total:
            raise ValueError("moe.expert_params must not exceed params_total")
        return self


class PlanShardingIn(Strict):
    kind: Sharding = Sharding.NONE
    shards: Count = Field(1, description="GPUs the model state is split over")
    forward_prefetch: bool = False
    prefetch_depth: Annotated[int, Field(ge=1, le=16)] = Field(
        1, description="units gathered ahead when forward_prefetch is on"
    )
    reshard_after_forward: bool = Field(
        True, description="false keeps every gathered unit until its backward (SHARD_GRAD_OP)"
    )
    largest_unit_params: Params | None = Field(
        None, description="params of the largest wrapped unit; unset: an average layer"
    )
    no_sync_grads: NoSyncGrads = Field(
        NoSyncGrads.NONE,
        description="gradient accumulation under no_sync(): none, trainable, or units "
        "(every param of a unit holding a trained one, use_orig_params=True)",
    )

    @model_validator(mode="after")
    def _shards_fit_kind(self) -> PlanShardingIn:
        if (self.kind is Sharding.NONE) != (self.shards == 1):
            raise ValueError('kind "none" means shards 1; fsdp and zero3 need at least 2 shards')
        return self


class PlanOffloadIn(Strict):
    """What the recipe keeps in host memory instead of on the GPU."""

    optimizer: bool = Field(False, description="optimizer states and master weights")
    params: bool = Field(False, description="sharded params, gradients and the step (FSDP)")
    activations: bool = Field(False, description="checkpointed layer inputs")


class PlanTrainingIn(Strict):
    seq_len: Count
    micro_batch: Count
    lora_rank: Count | None = None  # for the record
    trainable_params: Params
    adapter_dtype: Label | None = None  # for the record: PEFT keeps adapters in fp32
    optimizer: Label = Field(description='a name with "8bit" in it counts 10 B per param')
    grad_checkpointing: Checkpointing
    attention_impl: Attention
    ce_impl: CrossEntropy
    sharding: PlanShardingIn = PlanShardingIn()
    dequantize: Dequantize = Field(
        Dequantize.NONE, description="what the recipe dequantizes to BF16 beside the source"
    )
    kernel_format: KernelFormat = Field(
        KernelFormat.NONE, description="the low-precision format the training GEMMs consume"
    )
    kernel_layouts: Annotated[int, Field(ge=1, le=4)] = Field(
        2, description="weight copies kept beside the stored ones for the kernels (row/column)"
    )
    trainable_dtype: Precision = Field(
        Precision.FP32, description="the trained weights and their gradients (fp32 or bf16)"
    )
    optimizer_states: OptimizerStates | None = Field(
        None, description='fp32, bf16 or 8bit; unset: 8bit when the name has "8bit", else fp32'
    )
    master_weights: bool = Field(False, description="an fp32 master copy of bf16 weights")
    optimizer_in_backward: bool = Field(
        False, description="the step fused into backward: each gradient freed when applied"
    )
    paged_optimizer: bool = Field(False, description="paged optimizer states (host-evicted)")
    optimizer_impl: OptimizerImpl | None = Field(
        None,
        description="foreach (torch.optim's default on GPU: a state-sized temporary in the "
        "step) or fused (none); unset: no step temporaries counted",
    )
    gradient_accumulation_steps: Annotated[int, Field(ge=1, le=1_000_000)] | None = Field(
        None,
        description="micro-batches per optimizer step; 1: gradients exist only from the "
        "backward pass to the step; unset: counted as held throughout",
    )
    offload: PlanOffloadIn = PlanOffloadIn()
    activation_dtype: Precision = Precision.BF16
    padding: Padding = Field(
        Padding.MAX_LENGTH, description="max_length, packed, or longest (padded per batch)"
    )
    longest_sample: Count | None = Field(
        None, description="tokens in the data's longest sample (with padding: longest)"
    )
    kbit_prep_fp32: bool = Field(
        False, description="k-bit preparation casts the unquantized params to fp32"
    )
    kbit_matmul: KbitMatmul = Field(
        KbitMatmul.NONE,
        description="none, dequantize (a BF16 copy per matmul) or dequantize_keep_input "
        "(and its input kept for backward, as bitsandbytes before July 2024)",
    )

    @model_validator(mode="after")
    def _accumulation_agrees(self) -> PlanTrainingIn:
        accumulated = self.sharding.no_sync_grads is not NoSyncGrads.NONE
        if self.gradient_accumulation_steps == 1 and accumulated:
            raise ValueError(
                "sharding.no_sync_grads says gradients are accumulated over micro-batches, "
                "but gradient_accumulation_steps is 1: set one of them to what the recipe does"
            )
        return self


class PlanWeightsIn(Strict):
    quantized_params: Params
    bytes_per_quantized: Annotated[float, Field(ge=0, le=8, allow_inf_nan=False)]
    unquantized_params: Params
    bytes_per_unquantized: Annotated[float, Field(ge=0, le=8, allow_inf_nan=False)]


class PlanTransientIn(Strict):
    name: Label
    gib: Gib


class PlanMemoryIn(Strict):
    """GiB per GPU at the plan's peak phase, component by component."""

    runtime_overhead: Gib
    nccl: Gib
    weights: Gib
    weights_breakdown: PlanWeightsIn
    adapters_grads_optimizer: Gib
    activations: Gib
    logits_peak: Gib
    transients: Annotated[list[PlanTransientIn], Field(max_length=50)] = []  # noqa: RUF012 (pydantic copies it)
    fragmentation_margin: Gib
    modeled_total: Gib
    peak_phase: Label | None = None  # for the record


class PlanEvidenceIn(Strict):
    measured_peak_mib: Annotated[int, Field(ge=0, le=10_000_000)] | None = None
    measured_on: ClientDate | None = None
    same_config: bool = Field(False, description="same model, recipe and GPU type")
    oom: bool = Field(False, description="the measured run ran out of memory")


class PlanIn(Strict):
    schema_: Literal["preflight-plan/0.1", "preflight-plan/0.2"] = Field(PLAN_V1, alias="schema")
    job_id: Name
    hardware: PlanHardwareIn | PlanMixedHardwareIn = Field(
        description="0.1: one GPU model (gpu_type, gpu_count, usable_mib_per_gpu, "
        "rate_usd_per_gpu_hour); 0.2: `gpus`, one group per GPU model"
    )
    phases: Annotated[list[PlanPhaseIn], Field(min_length=1, max_length=50)]
    storage: Annotated[list[PlanStorageIn], Field(max_length=50)] = []  # noqa: RUF012 (pydantic copies it)
    other_costs_usd: PlanUsd = Decimal(0)
    model: PlanModelIn
    training: PlanTrainingIn
    memory_per_gpu_gib: PlanMemoryIn
    evidence: PlanEvidenceIn = PlanEvidenceIn()

    @field_validator("hardware", mode="wrap")
    @classmethod
    def _hardware_of_its_schema(
        cls, value: Any, _: ValidatorFunctionWrapHandler, info: ValidationInfo
    ) -> PlanHardwareIn | PlanMixedHardwareIn:
        """The hardware is read as the document's schema version writes it (0.1 by default)."""
        shape = PlanMixedHardwareIn if info.data.get("schema_") == PLAN_V2 else PlanHardwareIn
        return value if isinstance(value, shape) else shape.model_validate(value)

    @model_validator(mode="after")
    def _shards_within_gpus(self) -> PlanIn:
        gpus = self.hardware.nodes * sum(g.gpu_count for g in self.hardware.groups())
        if self.training.sharding.shards > gpus:
            raise ValueError(f"training.sharding.shards must not exceed the plan's {gpus} GPUs")
        moe = self.model.moe
        if moe is not None and moe.expert_parallel > gpus:
            raise ValueError(f"model.moe.expert_parallel must not exceed the plan's {gpus} GPUs")
        unit = self.training.sharding.largest_unit_params
        if unit is not None and unit > self.model.params_total:
            raise ValueError("training.sharding.largest_unit_params must not exceed params_total")
        return self

    def document(self) -> dict[str, Any]:
        """The plan as JSON, as it is stored with its verdict."""
        return self.model_dump(mode="json", by_alias=True)

    def to_plan(self) -> Plan:
        hw, t, m, mem = self.hardware, self.training, self.model, self.memory_per_gpu_gib
        return Plan(
            job_id=self.job_id,
            hardware=Hardware(
                groups=hw.groups(),
                nodes=hw.nodes,
                rate_quoted_at=hw.rate_quoted_at,
                billing_increment_s=hw.billing_increment_s,
                interruptible=hw.interruptible,
            ),
            phases=tuple(PlanPhase(**p.model_dump()) for p in self.phases),
            storage=tuple(Storage(**s.model_dump(exclude={"kind"})) for s in self.storage),
            other_costs_usd=self.other_costs_usd,
            model=Model(
                **m.model_dump(exclude={"moe"}),
                moe=None if m.moe is None else Moe(**m.moe.model_dump(exclude={"top_k"})),
            ),
            training=Training(
                **t.model_dump(exclude={"lora_rank", "adapter_dtype", "sharding", "offload"}),
                offload_optimizer=t.offload.optimizer,
                offload_params=t.offload.params,
                offload_activations=t.offload.activations,
                sharding=t.sharding.kind,
                shards=t.sharding.shards,
                forward_prefetch=t.sharding.forward_prefetch,
                prefetch_depth=t.sharding.prefetch_depth,
                reshard_after_forward=t.sharding.reshard_after_forward,
                largest_unit_params=t.sharding.largest_unit_params,
                no_sync_grads=t.sharding.no_sync_grads,
            ),
            memory=MemoryModel(
                **mem.model_dump(exclude={"weights_breakdown", "transients", "peak_phase"}),
                weights_breakdown=WeightsBreakdown(**mem.weights_breakdown.model_dump()),
                transients=tuple((x.name, x.gib) for x in mem.transients),
            ),
            evidence=Evidence(**self.evidence.model_dump()),
        )


def read_plan(document: dict[str, Any]) -> Plan:
    """A plan document as it was stored with its verdict, read back for a re-check."""
    return PlanIn.model_validate(document).to_plan()
