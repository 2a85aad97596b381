"""What the report's HTML and its Markdown write alike: the names of its spend lines, what an
event is about, and a decision's evidence written out."""

from __future__ import annotations

import json
from typing import Any

from governor.domain.attribution import STOPPED_STORAGE, UNPHASED
from governor.domain.model import EntryKind
from governor.services.events import Event

SPEND_LINES = {
    STOPPED_STORAGE: "stopped storage",
    UNPHASED: "no phase reported",
    EntryKind.TRUE_UP.value: "provider true-up",
    EntryKind.ADJUSTMENT.value: "operator adjustment",
}


def spend_line(line: str) -> str:
    """A spend line as people read it: a phase by its own name, the others in words."""
    return SPEND_LINES.get(line, line)


def evidence(found: dict[str, Any]) -> str:
    """A decision's evidence as JSON, its keys in order."""
    return json.dumps(found, sort_keys=True, default=str)


def about(e: Event) -> str:
    """The run and pod an event is about, by name: "run sft on pod gpu-a", "pod gpu-a", or
    nothing."""
    if e.run_name is not None:
        return f"run {e.run_name} on pod {e.pod_name}"
    return "" if e.pod_name is None else f"pod {e.pod_name}"
