"""The optimizer step's temporaries, counted: the most memory an AdamW step adds to what its
params, gradients and states already hold, per trained value.

The count is PyTorch's own, as for the loss (test_loss_bytes.py): its profiler records every
allocation and free the step makes, on the CPU here, where torch.optim's foreach and fused
implementations make the same tensors they make on a GPU. The step counted is a second one,
its states already created by the first. Each figure the memory model uses
(`memory.STEP_TEMPORARIES`, state values per trained value) must be the counted one.
"""

from __future__ import annotations

import pytest
import torch

from governor.domain.preflight.memory import STATE_BYTES, STEP_TEMPORARIES
from governor.domain.preflight.plan import OptimizerImpl, OptimizerStates
from tests.allocations import peak_bytes

TENSORS, SIDE = 8, 512  # a model of several tensors: foreach works on all of them at once
DTYPES = {OptimizerStates.FP32: torch.float32, OptimizerStates.BF16: torch.bfloat16}


def step_bytes_per_value(impl: OptimizerImpl, dtype: torch.dtype) -> float:
    """The most memory one AdamW step held at once beyond the params, gradients and states,
    per trained value."""
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(SIDE, SIDE, dtype=dtype)) for _ in range(TENSORS)]
    optimizer = torch.optim.AdamW(params, **{impl.value: True})
    peak = 0
    for _ in range(2):  # the first step creates the states; the second is counted
        for p in params:
            p.grad = torch.randn_like(p)
        peak = peak_bytes(optimizer.step)
    return peak / (TENSORS * SIDE * SIDE)


@pytest.mark.parametrize("states", list(DTYPES))
@pytest.mark.parametrize("impl", list(OptimizerImpl))
def test_the_modeled_step_temporaries_are_the_counted_ones(
    impl: OptimizerImpl, states: OptimizerStates
) -> None:
    counted = step_bytes_per_value(impl, DTYPES[states])
    modeled = STEP_TEMPORARIES[impl] * STATE_BYTES[states]
    assert counted == pytest.approx(modeled, abs=0.01), counted
