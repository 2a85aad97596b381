"""Preflight plan documents for tests: the reference plan and variants of it.

EXAMPLE is the worked example plan: a dense 27B-class QLoRA at
8,192 tokens with a 262,144 vocabulary on one H200. `variant` changes it by dotted paths
("hardware.gpu_type", "phases.1.min_optimizer_steps") and, unless told otherwise, sets
modeled_total to the sum of the declared components so that only the change is judged.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

GATHER = "fsdp_or_moe_gather"

EXAMPLE: dict[str, Any] = {
    "schema": "preflight-plan/0.1",
    "job_id": "pilot-gemma3-lora-001",
    "hardware": {
        "provider": "runpod",
        "cloud_tier": "secure",
        "gpu_type": "H200",
        "gpu_count": 1,
        "nodes": 1,
        "usable_mib_per_gpu": 143771,
        "rate_usd_per_gpu_hour": 4.59,
        "rate_source": "https://www.runpod.io/pricing",
        "rate_quoted_at": "2026-10-07",
        "billing_increment_s": 1,
        "interruptible": False,
    },
    "phases": [
        {"name": "load_model", "expected_hours": 0.25, "max_hours": 0.5, "gpu_held": True},
        {
            "name": "canary",
            "expected_hours": 0.2,
            "max_hours": 0.4,
            "gpu_held": True,
            "min_optimizer_steps": 2,
        },
        {"name": "train", "expected_hours": 6.0, "max_hours": 8.0, "gpu_held": True},
        {"name": "checkpoint", "expected_hours": 0.2, "max_hours": 0.4, "gpu_held": True},
        {"name": "reload_test", "expected_hours": 0.2, "max_hours": 0.4, "gpu_held": True},
        {"name": "eval", "expected_hours": 0.5, "max_hours": 1.0, "gpu_held": True},
        {"name": "export", "expected_hours": 0.3, "max_hours": 0.6, "gpu_held": True},
    ],
    "storage": [{"kind": "network_volume", "gb": 300, "usd_per_gb_month": 0.07, "hours_held": 168}],
    "other_costs_usd": 0,
    "model": {
        "params_total": 27.0e9,
        "vocab_size": 262144,
        "hidden_size": 5376,
        "num_layers": 62,
        "num_heads": 32,
        "moe": None,
    },
    "training": {
        "seq_len": 8192,
        "micro_batch": 1,
        "lora_rank": 16,
        "trainable_params": 1.1e8,
        "adapter_dtype": "fp32",
        "optimizer": "adamw_torch",
        "grad_checkpointing": "full",
        "attention_impl": "flash",
        "ce_impl": "naive",
        "sharding": {"kind": "none", "shards": 1},
    },
    "memory_per_gpu_gib": {
        "runtime_overhead": 1.5,
        "nccl": 0,
        "weights": 16.0,
        "weights_breakdown": {
            "quantized_params": 2.5e10,
            "bytes_per_quantized": 0.52,
            "unquantized_params": 2.0e9,
            "bytes_per_unquantized": 2,
        },
        "adapters_grads_optimizer": 1.6,
        "activations": 6.5,
        "logits_peak": 28.0,
        "transients": [
            {"name": GATHER, "gib": 0},
            {"name": "dequant_scratch", "gib": 0},
            {"name": "eval_logits_accum", "gib": 0},
            {"name": "ckpt_or_merge", "gib": 0},
        ],
        "fragmentation_margin": 7.0,
        "modeled_total": 60.6,
        "peak_phase": "train",
    },
    "evidence": {"measured_peak_mib": None, "measured_on": None, "same_config": False},
}

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


def write(doc: dict[str, Any], path: Path) -> Path:
    path.write_text(json.dumps(doc, indent=2))
    return path
