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

import re
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any

from jsonschema import Draft202012Validator, ValidationError, validators

from tests.contract.conformance import SPECS, Exchange
from tests.contract.openapi import OpenApi, Operation

LAMBDA = OpenApi(SPECS / "lambda" / "openapi.json", "urn:lambda-cloud-openapi", "Lambda's API")
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


def document() -> dict[str, Any]:
    return LAMBDA.document


def operation_of(method: str, path: str) -> Operation | None:
    return LAMBDA.operation_of(method, path)


def operation(name: str) -> Operation:
    return LAMBDA.operation(name)


def resolve(pointer: str) -> Any:
    return LAMBDA.resolve(pointer)


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
    return LAMBDA.request_errors(method, path, query, body, _errors)


def answer_errors(method: str, path: str, status: int, answer: Any) -> list[str]:
    """Where an answer to `method path` with HTTP `status` is not what Lambda documents for
    it (an answer that is not JSON at all is the adapter's to refuse, and not checked)."""
    found = operation_of(method, path)
    if found is None or answer is None:
        return []
    said = f"{method} {path} answered {status}"
    if str(status) in found.responses:
        schema: dict[str, Any] = LAMBDA.ref(found.responses[str(status)])
    elif status == 429 or status >= 500:
        schema = ERROR_ENVELOPE
    else:
        return [f"{said}, which {found.id} does not document"]
    return [f"{said}: {e}" for e in _errors(answer, schema)]


def _errors(value: Any, schema: dict[str, Any]) -> list[str]:
    checked = _Closed(schema, registry=LAMBDA.registry)
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
    for operation in LAMBDA.operations:
        for pointer in operation.responses.values():
            schema = LAMBDA.resolve(pointer)
            for example in schema.get("properties", {}).get("data", {}).get("examples", []):
                data = LAMBDA.ref(f"{pointer}/properties/data")
                for error in exact(data, registry=LAMBDA.registry).iter_errors(example):
                    field = re.fullmatch(r"'(.+)' is not a field of (.+)", error.message)
                    if field:
                        found.setdefault(field[2], set()).add(field[1])
    return found


_Closed = _closing(_shown)
