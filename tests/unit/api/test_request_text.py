"""Every string a request schema takes goes through the shared text rules (or lies inside a
JSON document checked as a whole): a new field cannot skip them by being a bare `str`."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from governor.api import schemas
from governor.services.plans import document
from governor.services.security import safe_input

REQUESTS = (schemas, document)  # the API's request schemas, and the plan document's


def _requests(cls: type[BaseModel] = safe_input.Strict) -> list[type[BaseModel]]:
    return [m for sub in cls.__subclasses__() for m in (sub, *_requests(sub))]


def _is_rule(node: dict[str, Any]) -> bool:
    """A validator from the shared rules: whatever it wraps is checked."""
    function = node.get("function")
    if isinstance(function, dict):
        function = function.get("function")
    return getattr(function, "__module__", None) == safe_input.__name__


def _bare_strings(node: Any, where: str, guarded: bool = False) -> list[str]:
    """Where a core schema validates a `str` no rule wraps."""
    if isinstance(node, list):
        return [s for item in node for s in _bare_strings(item, where, guarded)]
    if not isinstance(node, dict):
        return []
    guarded = guarded or _is_rule(node)
    if node.get("type") == "str" and not guarded:
        return [where]
    found = []
    for key, value in node.items():
        if key == "fields" and isinstance(value, dict):
            for name, field in value.items():
                found += _bare_strings(field, f"{where}.{name}", guarded)
        elif key != "serialization":
            found += _bare_strings(value, where, guarded)
    return found


@pytest.mark.parametrize("model", _requests(), ids=lambda m: m.__name__)
def test_no_request_field_takes_a_bare_string(model: type[BaseModel]) -> None:
    assert _bare_strings(model.__pydantic_core_schema__, model.__name__) == []


def test_a_bare_string_is_seen() -> None:
    class Careless(BaseModel):
        name: str
        note: str | None = None
        checked: Annotated[str, safe_input.line(10)]

    found = _bare_strings(Careless.__pydantic_core_schema__, "Careless")
    assert found == ["Careless.name", "Careless.note"]
