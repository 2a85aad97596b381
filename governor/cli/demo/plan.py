"""The plan `governor demo` checks before it rents: a 7B-class LoRA on the demo's one H100.

Its rate is the demo pod's, and its hours are seconds, so its worst case fits the demo's
ceiling with the preflight reserve to spare; the job then runs past the plan, and the ceiling,
not the plan, is what stops it. Its memory terms add up to a quarter of the card: a `go`.
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

PHASES = (
    ("load_model", 0.0005),
    ("canary", 0.0005),
    ("train", 0.0015),
    ("checkpoint", 0.0005),
)  # max hours


def plan(job_id: str, rate_usd_per_hour: Decimal, quoted: date) -> dict[str, Any]:
    """A preflight-plan/0.1 document, quoted `quoted` at the demo pod's rate."""
    return {
        "schema": "preflight-plan/0.1",
        "job_id": job_id,
        "hardware": {
            "provider": "fake",
            "gpu_type": "H100",
            "gpu_count": 1,
            "usable_mib_per_gpu": 81559,
            "rate_usd_per_gpu_hour": str(rate_usd_per_hour),
            "rate_source": "the demo's fake provider",
            "rate_quoted_at": quoted.isoformat(),
            "billing_increment_s": 1,
        },
        "phases": [
            {
                "name": name,
                "expected_hours": hours / 2,
                "max_hours": hours,
                "gpu_held": True,
                **({"min_optimizer_steps": 2} if name == "canary" else {}),
            }
            for name, hours in PHASES
        ],
        "model": {
            "params_total": 7.0e9,
            "vocab_size": 32000,
            "hidden_size": 4096,
            "num_layers": 32,
            "num_heads": 32,
        },
        "training": {
            "seq_len": 2048,
            "micro_batch": 1,
            "lora_rank": 16,
            "trainable_params": 4.0e7,
            "adapter_dtype": "fp32",
            "optimizer": "adamw_torch",
            "grad_checkpointing": "full",
            "attention_impl": "flash",
            "ce_impl": "liger_flce",
            "sharding": {"kind": "none", "shards": 1},
        },
        "memory_per_gpu_gib": {
            "runtime_overhead": 1.5,
            "nccl": 0,
            "weights": 13.5,
            "weights_breakdown": {
                "quantized_params": 0,
                "bytes_per_quantized": 0,
                "unquantized_params": 7.0e9,
                "bytes_per_unquantized": 2,
            },
            "adapters_grads_optimizer": 0.6,
            "activations": 1.5,
            "logits_peak": 0.5,
            "transients": [],
            "fragmentation_margin": 4.0,
            "modeled_total": 21.6,
            "peak_phase": "train",
        },
    }
