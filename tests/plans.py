"""Preflight plan documents for tests: the reference plan and variants of it.

EXAMPLE is the worked example plan, docs/examples/plan.json: a dense 27B-class QLoRA at
8,192 tokens with a 262,144 vocabulary on one H200. `variant` changes it by dotted paths
("hardware.gpu_type", "phases.1.min_optimizer_steps") and, unless told otherwise, sets
modeled_total to the sum of the declared components so that only the change is judged.
`gpu_groups` makes the changes that turn a plan into a preflight-plan/0.2 one of several
GPU models. MOE_4BIT is the changes that make it a 4-bit MoE on 4 x H100.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

GATHER = "fsdp_or_moe_gather"

# The worked example readers are pointed at (README: "Checking a plan before renting").
EXAMPLE_FILE = Path(__file__).resolve().parents[1] / "docs" / "examples" / "plan.json"
EXAMPLE: dict[str, Any] = json.loads(EXAMPLE_FILE.read_text())

COMPONENTS = (
    "runtime_overhead",
    "nccl",
    "weights",
    "adapters_grads_optimizer",
    "activations",
    "logits_peak",
    "fragmentation_margin",
)


def declared_sum(doc: dict[str, Any]) -> float:
    memory = doc["memory_per_gpu_gib"]
    return sum(memory[c] for c in COMPONENTS) + sum(t["gib"] for t in memory["transients"])


def variant(
    changes: dict[str, Any] | None = None, *, base: dict[str, Any] = EXAMPLE, total: bool = True
) -> dict[str, Any]:
    """A copy of `base` with `changes` applied by dotted path; modeled_total re-added."""
    doc = copy.deepcopy(base)
    for path, value in (changes or {}).items():
        *parents, last = path.split(".")
        node: Any = doc
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if isinstance(node, list):
            node[int(last)] = copy.deepcopy(value)
        else:
            node[last] = copy.deepcopy(value)
    if total:
        doc["memory_per_gpu_gib"]["modeled_total"] = round(declared_sum(doc), 2)
    return doc


def gpu_groups(*gpus: dict[str, Any], base: dict[str, Any] = EXAMPLE) -> dict[str, Any]:
    """Changes for `variant`: the plan as preflight-plan/0.2, its hardware these groups of
    GPUs ({"gpu_type", "gpu_count", "rate_usd_per_gpu_hour", "usable_mib_per_gpu"?}), quoted
    and billed as `base` is."""
    shared = ("rate_quoted_at", "billing_increment_s", "interruptible")
    hardware = {key: base["hardware"][key] for key in shared}
    return {"schema": "preflight-plan/0.2", "hardware": {**hardware, "gpus": list(gpus)}}


def write(doc: dict[str, Any], path: Path) -> Path:
    path.write_text(json.dumps(doc, indent=2))
    return path


# A 235B MoE (225B of it in 128 fused 3-D experts) for LoRA on 4 x H100 with FSDP, its
# experts 4-bit through an expert-aware quantizer: 0.52 bytes per quantized param.
MOE_4BIT = {
    "hardware.gpu_type": "H100",
    "hardware.gpu_count": 4,
    "hardware.usable_mib_per_gpu": 81_559,
    "hardware.rate_usd_per_gpu_hour": 2.69,
    "model": {
        "params_total": 235e9,
        "vocab_size": 151_936,
        "hidden_size": 4096,
        "num_layers": 94,
        "num_heads": 64,
        "moe": {
            "num_experts": 128,
            "top_k": 8,
            "expert_params": 225e9,
            "experts_storage": "fused_3d_parameter",
            "expert_quantizer": "experts4bit",
            "reshard_after_forward": True,
        },
    },
    "training.seq_len": 4096,
    "training.trainable_params": 2e8,
    "training.ce_impl": "liger_flce",
    "training.sharding": {"kind": "fsdp", "shards": 4},
    "memory_per_gpu_gib.nccl": 1.0,
    "memory_per_gpu_gib.weights": 30.2,
    "memory_per_gpu_gib.weights_breakdown": {
        "quantized_params": 230e9,
        "bytes_per_quantized": 0.52,
        "unquantized_params": 5e9,
        "bytes_per_unquantized": 2,
    },
    "memory_per_gpu_gib.adapters_grads_optimizer": 0.75,
    "memory_per_gpu_gib.activations": 3.5,
    "memory_per_gpu_gib.logits_peak": 0.2,
    "memory_per_gpu_gib.transients": [{"name": GATHER, "gib": 2.0}],
    "memory_per_gpu_gib.fragmentation_margin": 4.0,
}
