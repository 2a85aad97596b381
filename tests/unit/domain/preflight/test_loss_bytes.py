"""The loss's bytes per logit, counted: the peak of the memory a causal LM's loss holds, from
the output head's logits through the backward pass, over the logits it is computed on.

The count is PyTorch's own: its profiler records every allocation and free of the tensors the
loss path makes, on the CPU here, where they are the same tensors of the same sizes as on a GPU
(the kernels differ, not what they allocate). The hidden states and the head's weights exist
before; what is counted is what the head's matmul and the loss add at their peak. Each figure
the memory model uses (`memory.NAIVE_CE_BYTES`, `memory.SAME_DTYPE_CE_BYTES`) must be the
counted one.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from transformers.loss.loss_utils import ForCausalLMLoss

from governor.domain.preflight.memory import NAIVE_CE_BYTES, SAME_DTYPE_CE_BYTES
from tests.allocations import peak_bytes

TOKENS, HIDDEN, VOCAB = 1024, 32, 16_000  # the logits dwarf everything else the path holds

Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (bf16 logits, labels) -> loss


def bytes_per_logit(loss: Loss) -> float:
    """The most memory the loss path held at once, forward and backward, per logit."""
    torch.manual_seed(0)
    hidden = torch.randn(1, TOKENS, HIDDEN, dtype=torch.bfloat16, requires_grad=True)
    head = torch.randn(VOCAB, HIDDEN, dtype=torch.bfloat16) / HIDDEN  # frozen, as in LoRA
    labels = torch.randint(0, VOCAB, (1, TOKENS))
    peak = peak_bytes(lambda: loss(hidden @ head.T, labels).backward())
    return peak / (TOKENS * VOCAB)


def transformers_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """What transformers' causal LMs call: logits upcast to fp32 (`naive`)."""
    return ForCausalLMLoss(logits, labels, vocab_size=VOCAB)


def loss_in_the_logits_dtype(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """A model's own shift and CrossEntropyLoss on its bf16 logits, no autocast around it
    (Qwen's remote code under DeepSpeed's fp16 engine: `same_dtype`)."""
    shifted = logits[..., :-1, :].contiguous()
    return F.cross_entropy(shifted.view(-1, VOCAB), labels[..., 1:].reshape(-1))


@pytest.mark.parametrize(
    ("loss", "modeled"),
    [(transformers_loss, NAIVE_CE_BYTES), (loss_in_the_logits_dtype, SAME_DTYPE_CE_BYTES)],
)
def test_the_modeled_bytes_per_logit_are_the_counted_ones(loss: Loss, modeled: int) -> None:
    counted = bytes_per_logit(loss)
    assert counted == pytest.approx(modeled, abs=0.05), counted
