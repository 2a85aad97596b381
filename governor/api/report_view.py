"""The run report's JSON shape: the report's read model (services.view.report), field for
field."""

from __future__ import annotations

# the parts the report shares with other responses (BudgetOut, RunOut, EventOut and more)
# are the schemas' own models: built there first
from governor.api import schemas  # noqa: F401
from governor.api.read_models import api_model
from governor.services.view import report

api_model(report.PlanVerdict, name="VerdictOut")
ReportOut = api_model(report.Report)
