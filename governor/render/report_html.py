"""The run report as HTML: the same record as the JSON and the Markdown, for a browser.

One rendering serves both readers: GET /v1/budgets/{id}/report?format=html answers the whole
document, and the dashboard's budget page shows the same body inside its own page.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import jinja2
from markupsafe import Markup

from governor.domain.money import ZERO
from governor.render import templating
from governor.render.format import in_gib, instant, per_hour, share, usd
from governor.render.report_text import about, evidence, spend_line
from governor.services.view.report import Report

TEMPLATES = Path(__file__).parent / "templates"


@cache
def _environment() -> jinja2.Environment:
    env = templating.environment(TEMPLATES)
    env.filters.update(
        usd=usd, per_hour=per_hour, time=instant, share=share, gib=in_gib, evidence=evidence
    )
    env.globals.update(line_label=spend_line, about=about, ZERO=ZERO)
    return env


def body(report: Report) -> Markup:
    """The report's sections, to stand inside a page."""
    return Markup(_environment().get_template("report.html").render(r=report, pods=report.pods))


def document(report: Report) -> str:
    """The report as a page of its own."""
    return _environment().get_template("report_page.html").render(r=report, body=body(report))
