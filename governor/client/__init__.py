"""The training job's client: check in, obey `checkpoint` and `stop`, report failures.

Needs only httpx. The framework callbacks live in governor.client.hf (transformers Trainer,
`pip install gpu-governor[hf]`) and governor.client.lightning (`gpu-governor[lightning]`).

    with GovernorLoop.from_env() as gov:  # GOVERNOR_URL, GOVERNOR_RUN_ID, GOVERNOR_JOB_TOKEN
        for n in range(steps):
            train_step(); gov.step(n)
            if gov.should_stop(): gov.stopped(save(n)); break
"""

from governor.client.core import (
    UNREACHABLE,
    BudgetFigures,
    Checkpoint,
    Directive,
    Governor,
    GovernorError,
)
from governor.client.loop import GovernorLoop, classify_failure

__all__ = [
    "UNREACHABLE",
    "BudgetFigures",
    "Checkpoint",
    "Directive",
    "Governor",
    "GovernorError",
    "GovernorLoop",
    "classify_failure",
]
