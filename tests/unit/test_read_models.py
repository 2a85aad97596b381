"""The API's model of a read model follows its dataclasses: names, money, nesting; and
GET /v1/status's is the dashboard's own."""

import dataclasses
import typing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal

from governor.api.read_models import api_model, api_name
from governor.api.routes import status as status_route
from governor.services.view import status


@dataclass(frozen=True)
class Line:
    at: datetime
    spent: Decimal


@dataclass(frozen=True)
class Sheet:
    name: str
    compute_per_hour: Decimal
    burn_per_hour: Decimal = field(metadata={"api": "burn_rate_usd_per_hour"})
    cap: Decimal | None = None
    lines: tuple[Line, ...] = ()
    latest: Line | None = None


def test_money_is_named_in_dollars_and_travels_as_a_decimal_string() -> None:
    at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    sheet = Sheet("a", Decimal("3.6"), Decimal("4.996"), None, (Line(at, Decimal(12)),))
    assert api_model(Sheet).model_validate(sheet).model_dump(mode="json") == {
        "name": "a",
        "compute_usd_per_hour": "3.60",
        "burn_rate_usd_per_hour": "4.996",
        "cap_usd": None,
        "lines": [{"at": "2026-01-02T03:04:05Z", "spent_usd": "12.00"}],
        "latest": None,
    }


def test_each_dataclass_is_one_model_named_after_it() -> None:
    assert api_model(Sheet) is api_model(Sheet)
    assert api_model(Sheet).__name__ == "SheetOut"
    schema = api_model(Sheet).model_json_schema(mode="serialization")
    assert set(schema["$defs"]) == {"LineOut"}
    assert schema["properties"]["compute_usd_per_hour"]["type"] == "string"


def test_get_v1_status_is_the_dashboards_read_model_field_for_field() -> None:
    """Every field of every dataclass the status page renders is in the API's schema, named as
    api_name names it, and nothing else is: the schema has no second list to keep in step."""
    seen: set[type] = set()

    def check(cls: type) -> None:
        if cls in seen:
            return
        seen.add(cls)
        hints = typing.get_type_hints(cls)
        fields = dataclasses.fields(cls)
        model = api_model(cls)
        assert set(model.model_fields) == {api_name(f, hints[f.name]) for f in fields}, cls
        for f in fields:
            for inner in _dataclasses_in(hints[f.name]):
                check(inner)

    assert status_route.StatusOut is api_model(status.Dashboard)  # the route serves it
    check(status.Dashboard)
    assert {c.__name__ for c in seen} >= {"BudgetStatus", "NextStep", "Problem", "RunLine"}


def _dataclasses_in(hint: object) -> list[type]:
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return [hint]
    return [c for arg in typing.get_args(hint) for c in _dataclasses_in(arg)]
