"""A loss an operator accepted in writing: what a pod's stop (or terminate) loses, as its
provider said, and why it was registered all the same, by whom."""

from __future__ import annotations

from dataclasses import dataclass, field

from governor.db.tables import PodRow


@dataclass(frozen=True)
class AcknowledgedLoss:
    lost: str = field(metadata={"doc": "what a stop (or terminate) loses, as the provider said"})
    why: str = field(metadata={"doc": "the operator's written acknowledgement (acknowledge_loss)"})
    by: str | None = field(metadata={"doc": "who wrote it"})


def acknowledged_loss(pod: PodRow) -> AcknowledgedLoss | None:
    """The pod's acknowledged loss; None when it was registered without one."""
    if pod.loss_acknowledged is None:
        return None
    lost = pod.cannot_preserve or "its workspace"
    return AcknowledgedLoss(lost, pod.loss_acknowledged, pod.loss_acknowledged_by)
