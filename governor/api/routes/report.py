from __future__ import annotations

from typing import Annotated, Literal

from fastapi import Query, Response

from governor.api.deps import Context, Now, PageViewer, Tx
from governor.api.report_view import ReportOut
from governor.api.route import api_router
from governor.render import report_html, report_markdown
from governor.services.view import report as run_report

router = api_router(tags=["report"])
# The page carries the report's own text (names, reasons, notes), escaped; it needs nothing
# but the dashboard's stylesheet.
HTML_POLICY = "default-src 'none'; style-src 'self'; frame-ancestors 'none'; base-uri 'none'"


@router.get(
    "/v1/budgets/{budget_id}/report",
    response_model=ReportOut,
    responses={200: {"content": {"text/markdown": {}, "text/html": {}}}},
)
def get_report(
    budget_id: str,
    _: PageViewer,
    ctx: Context,
    tx: Tx,
    now: Now,
    fmt: Annotated[Literal["json", "md", "html"], Query(alias="format")] = "json",
) -> run_report.Report | Response:
    """The run record: spend by pod and by phase, stops and why, failures by category,
    extensions, measured peaks next to the preflight verdicts, and every decision with its
    evidence. `?format=md` gives it as Markdown, `?format=html` as a page for a browser. A
    browser signed in to the dashboard may open it with its session alone (no bearer token)."""
    with tx.read() as session:
        built = run_report.build(session, ctx.config, budget_id, now)
        if fmt == "md":
            return Response(
                report_markdown.render(built), media_type="text/markdown; charset=utf-8"
            )
        if fmt == "html":
            return Response(
                report_html.document(built),
                media_type="text/html; charset=utf-8",
                headers={"Content-Security-Policy": HTML_POLICY},
            )
        return built
