"""Requests to Google Cloud and its answers checked against the APIs' discovery documents
(tests/specs/gcp/): Compute Engine's (compute.v1.json) and BigQuery's (bigquery.v2.json, the
billing export's queries). Each request against the method whose HTTP method and path
template it matches (its query parameters named by that method, or the API's standard ones,
with values of their type; its JSON body of the method's request schema, none where it has
none), each successful answer against the JSON schema that method responds with: only the
schema's fields, of its types, with its enum values, and a `kind` of the resource's own."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from tests.contract.conformance import SPECS, Exchange

_INT64 = re.compile(r"-?[0-9]+")


@dataclass(frozen=True)
class Method:
    id: str  # e.g. compute.instances.stop
    http_method: str
    path: re.Pattern[str]
    parameters: dict[str, Any]
    request: str | None  # the schema of its body; None: it takes none
    response: str | None  # the schema it answers with


class Discovery:
    """One API's discovery document, read from `path`."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @cached_property
    def document(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(self.path.read_text())
        return loaded

    @cached_property
    def name(self) -> str:
        return f"{self.document['name']}.{self.document['version']}"

    @cached_property
    def methods(self) -> tuple[Method, ...]:
        return tuple(_methods(self.document["resources"], self.document["servicePath"]))

    def method(self, name: str) -> Method:
        """The method whose id is `name` (compute.instances.stop)."""
        return next(m for m in self.methods if m.id == name)

    def serves(self, exchange: Exchange) -> bool:
        return exchange.path.startswith("/" + self.document["servicePath"])

    def method_of(self, exchange: Exchange) -> Method | None:
        """The method `exchange`'s request is a call of, by HTTP method and path template."""
        return next(
            (
                m
                for m in self.methods
                if m.http_method == exchange.method and m.path.fullmatch(exchange.path)
            ),
            None,
        )

    def errors(self, exchange: Exchange) -> list[str]:
        """What in `exchange` the document does not allow."""
        said = f"{exchange.method} {exchange.path}"
        found = self.method_of(exchange)
        if found is None:
            return [f"{said}: no method of {self.name} has this path"]
        errors = [f"{said}: {e}" for e in self._query_errors(found, exchange.query)]
        if found.request is None:
            if exchange.body is not None:
                errors.append(f"{said}: {found.id} takes no body")
        else:
            body = self.schema_errors(exchange.body, {"$ref": found.request})
            errors += [f"{said} body {e}" for e in body]
        if 200 <= exchange.status < 300 and exchange.answer is not None and found.response:
            answer = self.schema_errors(exchange.answer, {"$ref": found.response})
            errors += [f"{said} answered {e}" for e in answer]
        return errors

    def schema_errors(self, value: Any, schema: dict[str, Any], where: str = "") -> list[str]:
        """Where `value` is not of `schema` (a JSON schema of this discovery document)."""
        return _schema_errors(self.document["schemas"], value, schema, where)

    def _query_errors(self, method: Method, query: dict[str, list[str]]) -> list[str]:
        standard = self.document["parameters"]
        errors = []
        for name, values in query.items():
            parameter = method.parameters.get(name) or standard.get(name)
            if parameter is None or parameter.get("location") != "query":
                errors.append(f"{method.id} has no query parameter {name!r}")
                continue
            errors += [
                f"{method.id}: {name}={value!r} {error}"
                for value in values
                for error in _parameter_errors(value, parameter)
            ]
        for name, parameter in method.parameters.items():
            if parameter.get("required") and parameter["location"] == "query" and name not in query:
                errors.append(f"{method.id} needs the query parameter {name!r}")
        return errors


COMPUTE = Discovery(SPECS / "gcp" / "compute.v1.json")
BIGQUERY = Discovery(SPECS / "gcp" / "bigquery.v2.json")
DOCUMENTS = (COMPUTE, BIGQUERY)


def method_of(exchange: Exchange) -> Method | None:
    """The method of Compute Engine or BigQuery `exchange`'s request is a call of."""
    return next((m for d in DOCUMENTS if d.serves(exchange) and (m := d.method_of(exchange))), None)


def off_spec(exchanges: list[Exchange]) -> list[str]:
    """What in `exchanges` Compute Engine or BigQuery does not document: a request no method
    has, or with parameters or a body it does not take; a successful answer outside its
    schema. A request to neither (a token endpoint) is not checked."""
    return [
        error
        for exchange in exchanges
        for document in DOCUMENTS
        if document.serves(exchange)
        for error in document.errors(exchange)
    ]


def _schema_errors(
    schemas: dict[str, Any], value: Any, schema: dict[str, Any], where: str = ""
) -> list[str]:
    if "$ref" in schema:
        ref = schema["$ref"]
        return _schema_errors(schemas, value, schemas[ref], where or ref)
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
            elif key == "kind" and "default" in field and item != field["default"]:
                # a resource's kind is fixed: the schema's default names it
                errors.append(f"{where}.kind: {item!r} is not {field['default']!r}")
            else:
                errors += _schema_errors(schemas, item, field, f"{where}.{key}")
        return errors
    if kind == "array":
        if not isinstance(value, list):
            return [f"{where}: {value!r:.60} is not an array"]
        return [
            e
            for i, item in enumerate(value)
            for e in _schema_errors(schemas, item, schema["items"], f"{where}[{i}]")
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
                found.get("request", {}).get("$ref"),
                found.get("response", {}).get("$ref"),
            )
        yield from _methods(resource.get("resources", {}), service_path)


def _template(found: dict[str, Any], parameters: dict[str, Any]) -> str:
    """The method's path as a pattern, each path parameter matched by its own pattern."""

    def parameter(match: re.Match[str]) -> str:
        return f"(?:{parameters.get(match[1], {}).get('pattern', '[^/]+')})"

    path = re.escape(found.get("flatPath", found["path"])).replace(r"\{", "{").replace(r"\}", "}")
    return re.sub(r"\{(\w+)\}", parameter, path)
