"""The plan a job submits before renting: what the admission rules read, nothing more.

Field names follow the preflight plan schema ("preflight-plan/0.1", or "preflight-plan/0.2" for
several GPU models in one plan). Memory figures are GiB per GPU at the plan's peak phase;
parameter counts are plain numbers; money is Decimal.
The API and the CLI validate a plan document at the edge and build these values from it.
Fields with defaults are optional: at their defaults they add nothing to the memory model.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from enum import StrEnum

CANARY, TRAIN, CHECKPOINT = "canary", "train", "checkpoint"  # phase names the rules read


class Checkpointing(StrEnum):
    FULL = "full"  # every layer's input kept, one layer recomputed at a time
    NONE = "none"


class Attention(StrEnum):
    FLASH = "flash"
    SDPA = "sdpa"
    EAGER = "eager"  # stores the s x s attention scores


class CrossEntropy(StrEnum):
    NAIVE = "naive"  # HF ForCausalLMLoss: logits upcast to fp32
    SAME_DTYPE = "same_dtype"  # the whole logits' loss in their 16-bit dtype, never upcast
    CHUNKED_UPCAST = "chunked_upcast"  # torchtune CEWithChunkedOutputLoss
    LIGER_FLCE = "liger_flce"  # Liger FusedLinearCrossEntropy
    CCE = "cce"  # Apple Cut Cross-Entropy


class Sharding(StrEnum):
    NONE = "none"  # every GPU holds the whole model (one GPU, or plain data parallel)
    FSDP = "fsdp"
    ZERO3 = "zero3"


class NoSyncGrads(StrEnum):
    """Gradients accumulated under FSDP's no_sync(): held unsharded until the synchronizing
    micro-batch instead of as shards."""

    NONE = "none"  # every micro-batch reduce-scatters its gradients (or no sharding)
    TRAINABLE = "trainable"  # the trained params' full gradients (units all-frozen or all-trained)
    UNITS = "units"  # every param of a unit holding a trained one (use_orig_params=True)


class Dequantize(StrEnum):
    """What the recipe dequantizes to BF16 for training, keeping the quantized source too."""

    NONE = "none"
    EXPERTS = "experts"  # e.g. grouped-GEMM MoE kernels that need BF16 experts
    ALL = "all"  # every quantized tensor


class KbitMatmul(StrEnum):
    """How a frozen k-bit weight enters its matmul during training."""

    NONE = "none"  # not modeled: the weights' bytes as held, nothing transient
    DEQUANTIZE = "dequantize"  # dequantized to a BF16 copy for each matmul, then freed
    DEQUANTIZE_KEEP_INPUT = "dequantize_keep_input"  # and the matmul's input kept for backward


class KernelFormat(StrEnum):
    """The low-precision format the training GEMMs consume."""

    NONE = "none"
    FP8 = "fp8"  # per-tensor scaled (delayed or current scaling)
    MXFP8 = "mxfp8"
    MXFP4 = "mxfp4"
    NVFP4 = "nvfp4"


class Mlp(StrEnum):
    """The shape of each layer's MLP, which sets the activations it keeps for backward."""

    STANDARD = "standard"  # up-projection, GELU, down-projection (GPT, Falcon, Phi)
    GATED = "gated"  # gate and up projections multiplied (SwiGLU: Llama, Mistral, Qwen)


class Precision(StrEnum):
    """Bytes of a value as the recipe holds it."""

    FP32 = "fp32"
    BF16 = "bf16"


class OptimizerStates(StrEnum):
    """The precision of the optimizer's state tensors."""

    FP32 = "fp32"
    BF16 = "bf16"  # states created in the parameters' bf16 dtype (pure-bf16 recipes)
    EIGHT_BIT = "8bit"  # block-wise 8-bit states (bitsandbytes)


class OptimizerImpl(StrEnum):
    """How the optimizer's step runs over the trained tensors."""

    FUSED = "fused"  # no temporaries: torch's fused=True, DeepSpeed's and apex's FusedAdam
    FOREACH = "foreach"  # torch.optim's default on GPU: one state-sized temporary for the step


class Padding(StrEnum):
    """How a batch's sequences are laid out: what length the activations are for."""

    MAX_LENGTH = "max_length"  # every sample padded to seq_len
    PACKED = "packed"  # samples concatenated to fill seq_len
    LONGEST = "longest"  # padded to the longest sample of the batch


class Aggregation(StrEnum):
    """How loading assembles per-expert checkpoint tensors into fused expert tensors."""

    NONE = "none"  # experts stored fused, nothing assembled
    PER_LAYER = "per_layer"  # one layer's pieces and its fused tensor at a time
    ALL = "all"  # every expert of this GPU assembled before the pieces are freed


class ExpertStorage(StrEnum):
    FUSED_3D = "fused_3d_parameter"  # one nn.Parameter per projection (transformers v5)
    MODULE_LIST = "module_list_linear"  # one nn.Linear per expert


LINEAR_ONLY_QUANTIZERS = ("none", "bnb_linear4bit")  # these leave fused 3-D experts alone


@dataclass(frozen=True)
class GpuGroup:
    """The plan's GPUs of one model: a 0.1 plan has one group, a 0.2 plan one per model."""

    gpu_type: str
    gpu_count: int  # per node
    usable_mib_per_gpu: int | None  # None: the GPU table's figure for the model
    rate_usd_per_gpu_hour: Decimal


@dataclass(frozen=True)
class Hardware:
    groups: tuple[GpuGroup, ...]
    nodes: int
    rate_quoted_at: date
    billing_increment_s: int
    interruptible: bool

    @property
    def gpus(self) -> int:
        return self.nodes * sum(g.gpu_count for g in self.groups)

    def gpus_of(self, group: GpuGroup) -> int:
        return self.nodes * group.gpu_count


@dataclass(frozen=True)
class PlanPhase:
    name: str
    expected_hours: Decimal
    max_hours: Decimal
    gpu_held: bool
    min_optimizer_steps: int | None


@dataclass(frozen=True)
class Storage:
    gb: Decimal
    usd_per_gb_month: Decimal
    hours_held: Decimal


@dataclass(frozen=True)
class Moe:
    expert_params: float
    experts_storage: ExpertStorage
    expert_quantizer: str
    reshard_after_forward: bool
    num_experts: int = 1  # with no count, expert parallelism is credited nothing
    expert_parallel: int = 1  # GPUs the experts are spread over (EP degree)
    load_aggregation: Aggregation | None = None  # None: all where the experts are dequantized

    @property
    def experts_stay_bf16(self) -> bool:
        """4-bit loading replaces nn.Linear only: fused experts stay BF16 unless an
        expert-aware quantizer is named."""
        return (
            self.experts_storage is ExpertStorage.FUSED_3D
            and self.expert_quantizer in LINEAR_ONLY_QUANTIZERS
        )


@dataclass(frozen=True)
class Model:
    params_total: float
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    moe: Moe | None
    final_logit_softcapping: float | None = None  # the output head's tanh cap, if any
    id: str | None = None  # e.g. a hub repository; with it, measured floors are kept and cited
    revision: str | None = None  # the checkpoint's revision (a commit or tag)
    intermediate_size: int | None = None  # the MLP's inner width; None: 4 x hidden_size
    mlp: Mlp = Mlp.STANDARD  # gated MLPs keep three tensors of the inner width


@dataclass(frozen=True)
class Training:
    seq_len: int
    micro_batch: int
    trainable_params: float
    optimizer: str
    grad_checkpointing: Checkpointing
    attention_impl: Attention
    ce_impl: CrossEntropy
    sharding: Sharding
    shards: int
    forward_prefetch: bool
    prefetch_depth: int = 1  # units gathered ahead when forward_prefetch is on
    reshard_after_forward: bool = True  # False: gathered units stay until their backward
    largest_unit_params: float | None = None  # None: an average layer
    no_sync_grads: NoSyncGrads = NoSyncGrads.NONE  # gradients accumulated unsharded
    dequantize: Dequantize = Dequantize.NONE
    kernel_format: KernelFormat = KernelFormat.NONE
    kernel_layouts: int = 2  # copies beside the stored weights: row-wise, column-wise
    trainable_dtype: Precision = Precision.FP32  # the trained weights and their gradients
    optimizer_states: OptimizerStates | None = None  # None: from the optimizer's name
    master_weights: bool = False  # an fp32 copy of bf16 trained weights (mixed precision)
    optimizer_in_backward: bool = False  # each gradient applied and freed during backward
    paged_optimizer: bool = False  # states in managed memory, evicted to the host
    offload_optimizer: bool = False  # optimizer states (and master weights) on the host
    optimizer_impl: OptimizerImpl | None = None  # None: no step temporaries counted
    gradient_accumulation_steps: int | None = None  # None: gradients held through the pass
    offload_params: bool = False  # sharded params, gradients and step on the host
    offload_activations: bool = False  # checkpointed layer inputs kept in host memory
    activation_dtype: Precision = Precision.BF16
    padding: Padding = Padding.MAX_LENGTH
    longest_sample: int | None = None  # tokens in the data's longest sample
    kbit_prep_fp32: bool = False  # k-bit preparation casts unquantized params to fp32
    kbit_matmul: KbitMatmul = KbitMatmul.NONE  # what a frozen k-bit weight's matmul holds

    @property
    def eight_bit_optimizer(self) -> bool:
        return "8bit" in self.optimizer

    @property
    def states(self) -> OptimizerStates:
        if self.optimizer_states is not None:
            return self.optimizer_states
        return OptimizerStates.EIGHT_BIT if self.eight_bit_optimizer else OptimizerStates.FP32

    @property
    def state_count(self) -> float:
        """State tensors per trained value: AdamW 2 (m, v), SGD with momentum 1, Adafactor's
        factored second moment about 0."""
        name = self.optimizer.lower()
        if "sgd" in name:
            return 1.0
        if "adafactor" in name:
            return 0.0
        return 2.0

    @property
    def tokens(self) -> int:
        """Tokens per micro-batch the activations are held for."""
        s = self.seq_len
        if self.padding is Padding.LONGEST and self.longest_sample is not None:
            s = min(s, self.longest_sample)
        return s * self.micro_batch


@dataclass(frozen=True)
class WeightsBreakdown:
    quantized_params: float
    bytes_per_quantized: float
    unquantized_params: float
    bytes_per_unquantized: float


@dataclass(frozen=True)
class MemoryModel:
    """The plan's own per-GPU memory model, in GiB, component by component."""

    runtime_overhead: float
    nccl: float
    weights: float
    weights_breakdown: WeightsBreakdown
    adapters_grads_optimizer: float
    activations: float
    logits_peak: float
    transients: tuple[tuple[str, float], ...]
    fragmentation_margin: float
    modeled_total: float

    def transient(self, name: str) -> float:
        return sum(gib for n, gib in self.transients if n == name)


@dataclass(frozen=True)
class Evidence:
    """A measured peak of the same configuration (same model, recipe and GPU type)."""

    measured_peak_mib: int | None
    measured_on: date | None
    same_config: bool
    oom: bool = False  # the measured run ran out of memory


@dataclass(frozen=True)
class Plan:
    job_id: str
    hardware: Hardware
    phases: tuple[PlanPhase, ...]
    storage: tuple[Storage, ...]
    other_costs_usd: Decimal
    model: Model
    training: Training
    memory: MemoryModel
    evidence: Evidence

    def index(self, name: str, after: int = -1) -> int | None:
        """The position of the first phase called `name` after position `after`."""
        return next((i for i, p in enumerate(self.phases) if i > after and p.name == name), None)
