"""The API's JSON of a read model, derived from the read model's own dataclasses.

A read model is written once, in the services, as frozen dataclasses; its API schema follows
from it field by field, so the two cannot drift. Money (a `Decimal`) travels as a decimal
string named in dollars: `spent` becomes `spent_usd`, `compute_per_hour` becomes
`compute_usd_per_hour`; a field's `metadata={"api": name}` names it otherwise, and
`metadata={"doc": text}` describes it. A field's default is the model's (a stored read model
written before the field was added still reads). Tuples become lists and nested dataclasses
their own models, named after them with `Out`.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from decimal import Decimal
from functools import cache
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, WithJsonSchema, create_model

from governor.domain.money import format_usd

Money = Annotated[
    Decimal,
    PlainSerializer(format_usd, return_type=str),
    WithJsonSchema({"type": "string", "description": "decimal dollars", "examples": ["12.50"]}),
]
PER_HOUR = "_per_hour"


class Out(BaseModel):
    # every field is in every response, defaults or not
    model_config = ConfigDict(
        from_attributes=True, json_schema_serialization_defaults_required=True
    )


def api_name(field: dataclasses.Field[Any], hint: Any) -> str:
    if "api" in field.metadata:
        return str(field.metadata["api"])
    if _strip_optional(hint) is not Decimal:
        return field.name
    if field.name.endswith(PER_HOUR):
        return field.name.removesuffix(PER_HOUR) + "_usd" + PER_HOUR
    return field.name + "_usd"


@cache
def api_model(cls: type) -> type[BaseModel]:
    """The pydantic model of a read-model dataclass (built once per class)."""
    hints = typing.get_type_hints(cls)
    fields: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        hint = hints[field.name]
        given: dict[str, Any] = {"description": field.metadata.get("doc")}
        if field.default is not dataclasses.MISSING:
            given["default"] = field.default
        elif field.default_factory is not dataclasses.MISSING:
            given["default_factory"] = field.default_factory
        fields[api_name(field, hint)] = (
            _api_type(hint),
            Field(validation_alias=field.name, **given),
        )
    model: type[BaseModel] = create_model(f"{cls.__name__}Out", __base__=Out, **fields)
    return model


def _api_type(hint: Any) -> Any:
    if hint is Decimal:
        return Money
    if dataclasses.is_dataclass(hint):
        return api_model(hint)  # type: ignore[arg-type]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple:
        return list[_api_type(args[0])]  # type: ignore[misc]
    if origin in (types.UnionType, typing.Union):
        return typing.Union[tuple(_api_type(a) for a in args)]  # noqa: UP007
    return hint


def _strip_optional(hint: Any) -> Any:
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return args[0] if len(args) == 1 else hint
