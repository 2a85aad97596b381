"""The run report as HTML: the same record as the JSON and the Markdown, for a browser.

One rendering serves both readers: GET /v1/budgets/{id}/report?format=html answers the whole
document, and the dashboard's budget page shows the same body inside its own page.
"""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from governor.domain.attribution import STOPPED_STORAGE, UNPHASED
from governor.domain.model import EntryKind
from governor.domain.money import ZERO, dollars
from governor.render import templating
from governor.services.view.report import Report

TEMPLATES = Path(__file__).parent / "templates"
GIB = 1024**3
LINE_LABELS = {
    STOPPED_STORAGE: "stopped storage",
    UNPHASED: "no phase reported",
    EntryKind.TRUE_UP.value: "provider true-up",
    EntryKind.ADJUSTMENT.value: "operator adjustment",
}


def _time(at: datetime | None) -> str:
    return "—" if at is None else at.strftime("%Y-%m-%d %H:%M:%S UTC")


def _share(amount: Decimal, total: Decimal) -> str:
    return f"{amount / total:.1%}" if total else "—"


def _gib(value: int | None) -> str:
    return "—" if value is None else f"{value / GIB:.1f}"


def _evidence(evidence: dict[str, Any]) -> str:
    return json.dumps(evidence, sort_keys=True, default=str)


@cache
def _environment() -> jinja2.Environment:
    env = templating.environment(TEMPLATES)
    env.filters.update(usd=dollars, time=_time, share=_share, gib=_gib, evidence=_evidence)
    env.globals.update(line_label=lambda line: LINE_LABELS.get(line, line), ZERO=ZERO)
    return env


def body(report: Report) -> Markup:
    """The report's sections, to stand inside a page."""
    pods = {pod.id: pod for pod in report.book.pods}  # runs and stops name their pod
    return Markup(_environment().get_template("report.html").render(r=report, pods=pods))


def document(report: Report) -> str:
    """The report as a page of its own."""
    return _environment().get_template("report_page.html").render(r=report, body=body(report))
