"""The API's model of a read model follows its dataclasses: names, money, nesting; GET
/v1/status's is the dashboard's own; and every response the API builds is a read model's."""

import dataclasses
import typing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from pydantic import BaseModel

from governor.api import routers
from governor.api.read_models import Out, api_model, api_name
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


@dataclass(frozen=True)
class Tally:
    """A count, as a reader last saw it."""

    count: int
    seen: bool = field(default=False, metadata={"required": False})


def test_a_model_may_be_named_described_and_leave_a_default_unrequired() -> None:
    model = api_model(Tally, name="TallyKept", described=True)
    assert api_model(Tally) is model
    schema = model.model_json_schema(mode="serialization")
    assert (schema["title"], schema["description"]) == (
        "TallyKept",
        "A count, as a reader last saw it.",
    )
    assert schema["required"] == ["count"]
    assert schema["properties"]["seen"]["default"] is False
    with pytest.raises(TypeError, match="TallyKept, not Tally2"):
        api_model(Tally, name="Tally2")


def test_a_model_and_those_built_on_its_way_are_of_the_module_that_asked_first() -> None:
    """Two models of one name are told apart by their module in the OpenAPI document."""
    assert api_model(Sheet).__module__ == __name__
    assert api_model(Line).__module__ == __name__


def test_every_response_model_is_a_read_models_or_a_page_of_them() -> None:
    for router in routers():
        for route in router.routes:
            model = getattr(route, "response_model", None)
            if not isinstance(model, type) or not issubclass(model, BaseModel):
                continue  # plain JSON (/healthz) or none (/readyz, /metrics)
            items = model.__pydantic_generic_metadata__["args"]
            assert issubclass(items[0] if items else model, Out), route.path


def _dataclasses_in(hint: object) -> list[type]:
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return [hint]
    return [c for arg in typing.get_args(hint) for c in _dataclasses_in(arg)]
