"""The run report from a real server: JSON, Markdown and HTML of a pilot with a stop, an approved
extension and a harness failure the job reported, each with its figures."""

from __future__ import annotations

from decimal import Decimal

import pytest

from governor.domain.money import dollars
from tests.e2e.conftest import GovernorServer, assert_error, get_budget, ok
from tests.e2e.pilot import CEILING_USD, EXTENSION_USD, FAILURE, pilot

pytestmark = pytest.mark.e2e


def test_the_report_keeps_the_stop_the_extension_and_the_failure(server: GovernorServer) -> None:
    with server.client() as operator:
        p = pilot(server, operator).start()
        p.finish(operator)
        budget = get_budget(operator, p.budget_id)  # nothing bills any more: figures hold
        report = ok(operator.get(f"/v1/budgets/{p.budget_id}/report"))
        md = operator.get(f"/v1/budgets/{p.budget_id}/report", params={"format": "md"})
        html = operator.get(f"/v1/budgets/{p.budget_id}/report", params={"format": "html"})
        assert_error(operator.get("/v1/budgets/bud_nope/report"), 404)

    spent = Decimal(budget["spent_usd"])
    phases = {line["phase"]: Decimal(line["spent_usd"]) for line in report["spend"]["by_phase"]}
    assert Decimal(report["spend"]["spent_usd"]) == spent > 0
    assert sum(phases.values()) == spent
    assert phases["training"] > 0  # the job said "training" from its first heartbeat
    [pod] = report["spend"]["by_pod"]
    assert (pod["pod_id"], Decimal(pod["spent_usd"]), pod["state"]) == (p.pod_id, spent, "stopped")

    [stop] = report["stops"]
    assert (stop["pod_id"], stop["reason"], stop["state"]) == (p.pod_id, "manual", "stopped")
    assert stop["why"].startswith("Stop ordered (manual)")
    assert stop["acked_at"] is not None and stop["confirmed_at"] is not None
    failures = {f["category"]: f for f in report["failures"]}
    assert failures["harness"]["count"] == 1
    assert failures["harness"]["events"][0]["message"] == FAILURE
    assert (failures["model"]["count"], failures["provider"]["count"]) == (0, 0)
    [ext] = report["extensions"]
    assert (ext["id"], ext["state"], ext["amount_usd"]) == (p.extension_id, "approved", "250.00")

    assert md.status_code == 200 and md.headers["content-type"].startswith("text/markdown")
    text = md.text
    effective = Decimal(CEILING_USD) + Decimal(EXTENSION_USD)
    for row in (
        f"| Spent | {dollars(spent)} |",
        f"| Approved extensions | {dollars(Decimal(EXTENSION_USD))} |",
        f"| Effective ceiling | {dollars(effective)} |",
        f"| training | {dollars(phases['training'])} |",
        f"| **total** | **{dollars(spent)}** | 100.0% |",
        f"| pod-1 | {p.pod_id} | fake pod-1 | — | stopped | $3,600.00/h | {dollars(spent)} |",
        "| $250.00 | operator | one more evaluation pass | approved |",
    ):
        assert row in text, row
    stops = text[text.index("## Stops") : text.index("## Failures")]
    assert f"**pod-1** (fake pod-1, {p.pod_id}): `manual`" in stops  # by name, as people do
    assert "stop confirmed" in stops and "job acknowledged" in stops
    failures_md = text[text.index("## Failures") : text.index("## Extensions")]
    assert "- harness: 1" in failures_md and FAILURE in failures_md
    assert "approved for the eval" in text  # the operator's note on the extension

    assert html.status_code == 200, html.text[:300]
    assert html.headers["content-type"].startswith("text/html")
    assert "script-src" not in html.headers["content-security-policy"]  # none may run
    page = html.text
    assert page.startswith("<!doctype html>") and '<link rel="stylesheet"' in page
    for cell in (
        f'<td class="num" data-field="spent">{dollars(spent)}</td>',
        f'<td class="num">{dollars(phases["training"])}</td>',
        "<td>one more evaluation pass</td>",
        "approved for the eval",
        FAILURE,
    ):
        assert cell in page, cell
