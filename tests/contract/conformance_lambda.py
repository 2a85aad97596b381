"""Requests to Lambda Cloud and its answers checked against Lambda's published OpenAPI
document (tests/specs/lambda/openapi.json): each request against the operation whose HTTP
method and path template it matches (only the query parameters it declares, a body of its
request schema), each answer against the schema the operation documents for its HTTP
status: only the schema's fields (where the schema leaves `additionalProperties` unsaid),
and those Lambda's own examples in the document show beside them (terminateInstance's example
instance carries `is_reserved`, which the Instance schema does not name), of their types,
with their enum values. Lambda describes its rate limit (429) and the errors of
its upstream providers only in the document's prose, with the error envelope every error
has: such an answer must still be that envelope."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any
from urllib.parse import unquote

from jsonschema import Draft202012Validator, ValidationError, validators
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from tests.contract.conformance import SPECS, Exchange

DOCUMENT = SPECS / "lambda" / "openapi.json"
URI = "urn:lambda-cloud-openapi"
JSON = "application/json"
# "Error responses" in the document's description: {"error": {code, message, suggestion?}}
ERROR_ENVELOPE = {
    "type": "object",
    "required": ["error"],
    "additionalProperties": False,
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "additionalProperties": False,
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "suggestion": {"type": "string"},
            },
        }
    },
}


@dataclass(frozen=True)
class Operation:
    id: str  # Lambda's operationId, e.g. terminateInstance
    method: str
    path: re.Pattern[str]
    query: dict[str, Any]  # the query parameters it declares, by name
    body: str | None  # a JSON pointer to its request body's schema
    responses: dict[int, str]  # HTTP status -> a JSON pointer to the answer's schema


@cache
def document() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DOCUMENT.read_text())
    return loaded


@cache
def operations() -> tuple[Operation, ...]:
    found = []
    for path, methods in document()["paths"].items():
        for method, operation in methods.items():
            at = f"/paths/{_escape(path)}/{method}"
            template = re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(path))
            responses = {
                int(status): f"{at}/responses/{status}/content/{_escape(JSON)}/schema"
                for status, answer in operation.get("responses", {}).items()
                if JSON in answer.get("content", {})
            }
            body = operation.get("requestBody", {}).get("content", {})
            found.append(
                Operation(
                    operation["operationId"],
                    method.upper(),
                    re.compile(template),
                    {p["name"]: p for p in operation.get("parameters", []) if p["in"] == "query"},
                    f"{at}/requestBody/content/{_escape(JSON)}/schema" if JSON in body else None,
                    responses,
                )
            )
    return tuple(found)


def operation_of(method: str, path: str) -> Operation | None:
    return next(
        (o for o in operations() if o.method == method and o.path.fullmatch(path)),
        None,
    )


def operation(name: str) -> Operation:
    return next(o for o in operations() if o.id == name)


def statuses() -> list[str]:
    """The instance statuses Lambda documents (its InstanceStatus enum)."""
    enum: list[str] = document()["components"]["schemas"]["InstanceStatus"]["enum"]
    return enum


def off_spec(exchanges: list[Exchange]) -> list[str]:
    """What in `exchanges` Lambda's document does not allow: a request no operation has, or
    with parameters or a body it does not take; an answer outside its documented schema."""
    errors = []
    for exchange in exchanges:
        errors += request_errors(exchange.method, exchange.path, exchange.query, exchange.body)
        errors += answer_errors(exchange.method, exchange.path, exchange.status, exchange.answer)
    return errors


def request_errors(method: str, path: str, query: dict[str, list[str]], body: Any) -> list[str]:
    said = f"{method} {path}"
    found = operation_of(method, path)
    if found is None:
        return [f"{said}: no operation of Lambda's API has this method and path"]
    errors = [
        f"{said}: {found.id} has no query parameter {name!r}"
        for name in query
        if name not in found.query
    ]
    for name, values in query.items():
        if name in found.query:
            schema = found.query[name].get("schema", {})
            errors += [f"{said}: {name}={v!r} {e}" for v in values for e in _errors(v, schema)]
    if found.body is None:
        if body is not None:
            errors.append(f"{said}: {found.id} takes no body")
    else:
        errors += [f"{said}: body {e}" for e in _errors(body, {"$ref": URI + "#" + found.body})]
    return errors


def answer_errors(method: str, path: str, status: int, answer: Any) -> list[str]:
    """Where an answer to `method path` with HTTP `status` is not what Lambda documents for
    it (an answer that is not JSON at all is the adapter's to refuse, and not checked)."""
    found = operation_of(method, path)
    if found is None or answer is None:
        return []
    said = f"{method} {path} answered {status}"
    if status in found.responses:
        schema: dict[str, Any] = {"$ref": URI + "#" + found.responses[status]}
    elif status == 429 or status >= 500:
        schema = ERROR_ENVELOPE
    else:
        return [f"{said}, which {found.id} does not document"]
    return [f"{said}: {e}" for e in _errors(answer, schema)]


def _errors(value: Any, schema: dict[str, Any]) -> list[str]:
    checked = _Closed(schema, registry=_registry())
    return [
        f"{'.'.join(map(str, error.absolute_path)) or '(whole)'}: {error.message}"
        for error in sorted(checked.iter_errors(value), key=lambda e: list(e.absolute_path))
    ]


def _closing(shown: Callable[[], dict[str, set[str]]]) -> Any:
    """A JSON Schema validator whose objects have no field besides their schema's
    `properties` (and, by the schema's title, the ones `shown` names), unless the schema
    says what others may be (`additionalProperties`)."""

    def properties(
        validator: Any, named: dict[str, Any], instance: Any, schema: dict[str, Any]
    ) -> Iterator[ValidationError]:
        yield from Draft202012Validator.VALIDATORS["properties"](validator, named, instance, schema)
        if isinstance(instance, dict) and "additionalProperties" not in schema:
            title = schema.get("title", "the schema")
            allowed = shown().get(title, set())
            for key in instance:
                if key not in named and key not in allowed:
                    yield ValidationError(f"{key!r} is not a field of {title}")

    return validators.extend(Draft202012Validator, {"properties": properties})


@cache
def _shown() -> dict[str, set[str]]:
    """The fields Lambda's own examples of its answers show beyond their schemas', by the
    schema's title."""
    exact = _closing(dict)
    found: dict[str, set[str]] = {}
    for operation in operations():
        for pointer in operation.responses.values():
            schema = resolve(pointer)
            for example in schema.get("properties", {}).get("data", {}).get("examples", []):
                data = {"$ref": f"{URI}#{pointer}/properties/data"}
                for error in exact(data, registry=_registry()).iter_errors(example):
                    field = re.fullmatch(r"'(.+)' is not a field of (.+)", error.message)
                    if field:
                        found.setdefault(field[2], set()).add(field[1])
    return found


_Closed = _closing(_shown)


def resolve(pointer: str) -> Any:
    node: Any = document()
    for step in pointer.strip("/").split("/"):
        node = node[unquote(step).replace("~1", "/").replace("~0", "~")]
    return node


@cache
def _registry() -> Registry:  # type: ignore[type-arg]
    return Registry().with_resource(URI, Resource(document(), DRAFT202012))  # type: ignore[call-arg]


def _escape(token: str) -> str:
    """`token` as one step of a JSON pointer in a URI fragment."""
    return token.replace("~", "~0").replace("/", "~1").replace("{", "%7B").replace("}", "%7D")
