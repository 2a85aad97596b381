"""The API's JSON of a read model, derived from the read model's own dataclasses.

A read model is written once, in the services, as frozen dataclasses; its API schema follows
from it field by field, so the two cannot drift. Money (a `Decimal`) travels as a decimal
string named in dollars: `spent` becomes `spent_usd`, `compute_per_hour` becomes
`compute_usd_per_hour`; a field's `metadata={"api": name}` names it otherwise, and
`metadata={"doc": text}` describes it. A field's default is the model's (a stored read model
written before the field was added still reads); every response carries every field, so the
schema requires each, defaulted or not, but for one whose `metadata={"required": False}`
keeps it out (as the API's schema has always had it). Tuples become lists and nested
dataclasses their own models, named after them with `Out`.

A model is built once per dataclass, by the first module that asks for it (`api_model`), and
is that module's, as a class written there would be: where two models share a name, the
OpenAPI document tells them apart by it. The module may name it otherwise (`name`), and have
the dataclass's docstring describe it (`described`).
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
import types
import typing
from decimal import Decimal
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, WithJsonSchema, create_model

from governor.domain.money import format_usd

Money = Annotated[
    Decimal,
    PlainSerializer(format_usd, return_type=str),
    WithJsonSchema({"type": "string", "description": "decimal dollars", "examples": ["12.50"]}),
]
PER_HOUR = "_per_hour"
_MODELS: dict[type, type[BaseModel]] = {}
_NEVER_REQUIRED: dict[type[BaseModel], frozenset[str]] = {}


def _leave_out_of_required(schema: dict[str, Any], model: type[BaseModel]) -> None:
    never = _NEVER_REQUIRED.get(model, frozenset())
    required = [name for name in schema.get("required", ()) if name not in never]
    if required:
        schema["required"] = required
    else:
        schema.pop("required", None)


class Out(BaseModel):
    # every field is in every response, defaults or not
    model_config = ConfigDict(
        from_attributes=True,
        json_schema_serialization_defaults_required=True,
        json_schema_extra=_leave_out_of_required,
    )


def api_name(field: dataclasses.Field[Any], hint: Any) -> str:
    if "api" in field.metadata:
        return str(field.metadata["api"])
    if _strip_optional(hint) is not Decimal:
        return field.name
    if field.name.endswith(PER_HOUR):
        return field.name.removesuffix(PER_HOUR) + "_usd" + PER_HOUR
    return field.name + "_usd"


def api_model(cls: type, *, name: str | None = None, described: bool = False) -> type[BaseModel]:
    """The pydantic model of a read-model dataclass (built once per class, by the module that
    calls this first; a later call may not name it otherwise)."""
    module = sys._getframe(1).f_globals["__name__"]
    model = _model(cls, module, name, described)
    if name is not None and model.__name__ != name:
        raise TypeError(f"{cls.__qualname__}'s model is {model.__name__}, not {name}")
    return model


def _model(cls: type, module: str, name: str | None, described: bool) -> type[BaseModel]:
    built = _MODELS.get(cls)
    if built is not None:
        return built
    hints = typing.get_type_hints(cls)
    fields: dict[str, Any] = {}
    never_required: set[str] = set()
    for field in dataclasses.fields(cls):
        hint = hints[field.name]
        given: dict[str, Any] = {"description": field.metadata.get("doc")}
        if field.default is not dataclasses.MISSING:
            given["default"] = field.default
        elif field.default_factory is not dataclasses.MISSING:
            given["default_factory"] = field.default_factory
        if field.metadata.get("required", True) is False:
            never_required.add(api_name(field, hint))
        fields[api_name(field, hint)] = (
            _api_type(hint, module),
            Field(validation_alias=field.name, **given),
        )
    model: type[BaseModel] = create_model(
        name or f"{cls.__name__}Out",
        __base__=Out,
        __module__=module,
        __doc__=inspect.cleandoc(cls.__doc__ or "") if described else None,
        **fields,
    )
    _MODELS[cls] = model
    if never_required:
        _NEVER_REQUIRED[model] = frozenset(never_required)
    return model


def _api_type(hint: Any, module: str) -> Any:
    if hint is Decimal:
        return Money
    if dataclasses.is_dataclass(hint):
        return _model(hint, module, None, False)  # type: ignore[arg-type]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple:
        return list[_api_type(args[0], module)]  # type: ignore[misc]
    if origin in (types.UnionType, typing.Union):
        return typing.Union[tuple(_api_type(a, module) for a in args)]  # noqa: UP007
    return hint


def _strip_optional(hint: Any) -> Any:
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return args[0] if len(args) == 1 else hint
