"""Requests to Compute Engine and its answers checked against Compute Engine's discovery
document (tests/specs/gcp/compute.v1.json): each request against the method whose HTTP
method and path template it matches (its query parameters named by that method, or the
API's standard ones, with values of their type), each answer against the JSON schema that
method responds with: only the schema's fields, of its types, with its enum values."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

from tests.contract.conformance import SPECS, Exchange

DISCOVERY = SPECS / "gcp" / "compute.v1.json"
_INT64 = re.compile(r"-?[0-9]+")


@dataclass(frozen=True)
class Method:
    id: str  # e.g. compute.instances.stop
    http_method: str
    path: re.Pattern[str]
    parameters: dict[str, Any]
    response: str | None  # the schema it answers with

    def request_errors(self, query: dict[str, list[str]]) -> list[str]:
        standard = discovery()["parameters"]
        errors = []
        for name, values in query.items():
            parameter = self.parameters.get(name) or standard.get(name)
            if parameter is None or parameter.get("location") != "query":
                errors.append(f"{self.id} has no query parameter {name!r}")
                continue
            errors += [
                f"{self.id}: {name}={value!r} {error}"
                for value in values
                for error in _parameter_errors(value, parameter)
            ]
        for name, parameter in self.parameters.items():
            if parameter.get("required") and parameter["location"] == "query" and name not in query:
                errors.append(f"{self.id} needs the query parameter {name!r}")
        return errors


@cache
def discovery() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(DISCOVERY.read_text())
    return document


@cache
def methods() -> tuple[Method, ...]:
    document = discovery()
    return tuple(_methods(document["resources"], document["servicePath"]))


def method(name: str) -> Method:
    """The method whose id is `name` (compute.instances.stop)."""
    return next(m for m in methods() if m.id == name)


def method_of(exchange: Exchange) -> Method | None:
    """The method `exchange`'s request is a call of, by HTTP method and path template."""
    return next(
        (
            m
            for m in methods()
            if m.http_method == exchange.method and m.path.fullmatch(exchange.path)
        ),
        None,
    )


def off_spec(exchanges: list[Exchange]) -> list[str]:
    """What in `exchanges` Compute Engine does not document: a request no method has, or
    with parameters it does not take; a successful answer outside its schema."""
    errors = []
    for exchange in exchanges:
        if not exchange.path.startswith("/" + discovery()["servicePath"]):
            continue  # not Compute Engine (a token endpoint, BigQuery)
        said = f"{exchange.method} {exchange.path}"
        found = method_of(exchange)
        if found is None:
            errors.append(f"{said}: no method of compute.v1 has this path")
            continue
        errors += [f"{said}: {e}" for e in found.request_errors(exchange.query)]
        if 200 <= exchange.status < 300 and exchange.answer is not None and found.response:
            errors += [
                f"{said} answered {e}"
                for e in schema_errors(exchange.answer, {"$ref": found.response})
            ]
    return errors


def schema_errors(value: Any, schema: dict[str, Any], where: str = "") -> list[str]:
    """Where `value` is not of `schema` (a discovery document JSON schema)."""
    if "$ref" in schema:
        ref = schema["$ref"]
        return schema_errors(value, discovery()["schemas"][ref], where or ref)
    kind = schema.get("type")
    if kind == "object":
        if not isinstance(value, dict):
            return [f"{where}: {value!r:.60} is not an object"]
        properties, extra = schema.get("properties", {}), schema.get("additionalProperties")
        errors = []
        for key, item in value.items():
            field = properties.get(key, extra)
            if field is None:
                errors.append(f"{where}.{key}: not a field of the schema")
            else:
                errors += schema_errors(item, field, f"{where}.{key}")
        return errors
    if kind == "array":
        if not isinstance(value, list):
            return [f"{where}: {value!r:.60} is not an array"]
        return [
            e
            for i, item in enumerate(value)
            for e in schema_errors(item, schema["items"], f"{where}[{i}]")
        ]
    return [f"{where}: {e}" for e in _scalar_errors(value, schema)]


def _scalar_errors(value: Any, schema: dict[str, Any]) -> Iterator[str]:
    kind, shown = schema.get("type"), f"{value!r:.60}"
    if kind == "string":
        if not isinstance(value, str):
            yield f"{shown} is not a string"
        elif schema.get("format") in ("int64", "uint64") and not _INT64.fullmatch(value):
            yield f"{shown} is not an {schema['format']}"
        elif "enum" in schema and value not in schema["enum"]:
            yield f"{shown} is not one of {schema['enum']}"
    elif kind == "integer" and (isinstance(value, bool) or not isinstance(value, int)):
        yield f"{shown} is not an integer"
    elif kind == "number" and (isinstance(value, bool) or not isinstance(value, int | float)):
        yield f"{shown} is not a number"
    elif kind == "boolean" and not isinstance(value, bool):
        yield f"{shown} is not a boolean"


def _parameter_errors(value: str, parameter: dict[str, Any]) -> Iterator[str]:
    kind = parameter.get("type")
    if kind == "boolean" and value not in ("true", "false"):
        yield "is not a boolean"
    elif kind == "integer" and not _INT64.fullmatch(value):
        yield "is not an integer"
    elif "enum" in parameter and value not in parameter["enum"]:
        yield f"is not one of {parameter['enum']}"
    elif "pattern" in parameter and not re.fullmatch(parameter["pattern"], value):
        yield f"does not match {parameter['pattern']!r}"


def _methods(resources: dict[str, Any], service_path: str) -> Iterator[Method]:
    for resource in resources.values():
        for found in resource.get("methods", {}).values():
            parameters = found.get("parameters", {})
            yield Method(
                found["id"],
                found["httpMethod"],
                re.compile(f"/{re.escape(service_path)}{_template(found, parameters)}"),
                parameters,
                found.get("response", {}).get("$ref"),
            )
        yield from _methods(resource.get("resources", {}), service_path)


def _template(found: dict[str, Any], parameters: dict[str, Any]) -> str:
    """The method's path as a pattern, each path parameter matched by its own pattern."""

    def parameter(match: re.Match[str]) -> str:
        return f"(?:{parameters.get(match[1], {}).get('pattern', '[^/]+')})"

    path = re.escape(found.get("flatPath", found["path"])).replace(r"\{", "{").replace(r"\}", "}")
    return re.sub(r"\{(\w+)\}", parameter, path)
