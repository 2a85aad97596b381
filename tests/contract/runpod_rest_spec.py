"""RunPod's REST v2 requests and answers checked against RunPod's own REST v2 OpenAPI
document (tests/specs/runpod/rest-v2-openapi.json): the operations the adapter reads a pod's
network volumes with, `getPod` and `getNetworkVolume`. A request must be one of the
document's operations (method and path template), with only the query parameters it
declares and no body for a GET; an answer must be of the schema the operation documents for
its HTTP status (an error: the `ErrorResponse` of the status's response, or of `default`),
with no field the schema does not name."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from tests.contract.conformance import SPECS

DOCUMENT = SPECS / "runpod" / "rest-v2-openapi.json"
URI = "urn:runpod-rest-v2-openapi"
CHECKED = frozenset({"getPod", "getNetworkVolume"})  # the adapter's network-volume reads


@dataclass(frozen=True)
class Operation:
    id: str
    method: str
    path: re.Pattern[str]
    query: frozenset[str]  # the query parameters it declares
    responses: dict[str, Any]  # HTTP status (or "default") -> the answer's schema


@cache
def document() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DOCUMENT.read_text())
    return loaded


@cache
def operations() -> tuple[Operation, ...]:
    found = []
    for path, methods in document()["paths"].items():
        template = re.compile(re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(path)))
        for method, operation in methods.items():
            if not isinstance(operation, dict) or "operationId" not in operation:
                continue
            query = frozenset(
                p["name"] for p in operation.get("parameters", []) if p.get("in") == "query"
            )
            responses = {}
            for status, answer in operation.get("responses", {}).items():
                content = _resolved(answer).get("content", {})
                schemas = [c["schema"] for c in content.values() if "schema" in c]
                if schemas:
                    responses[status] = schemas[0]
            found.append(
                Operation(operation["operationId"], method.upper(), template, query, responses)
            )
    return tuple(found)


def operation_of(method: str, path: str) -> Operation | None:
    """The document's operation for `method path` (a literal path before a templated one)."""
    matching = [o for o in operations() if o.method == method and o.path.fullmatch(path)]
    return min(matching, key=lambda o: o.path.pattern.count("[^/]+"), default=None)


def request_errors(method: str, path: str, query: dict[str, list[str]], body: Any) -> list[str]:
    said = f"{method} {path}"
    found = operation_of(method, path)
    if found is None:
        return [f"{said}: no operation of RunPod's REST v2 has this method and path"]
    errors = [
        f"{said}: {found.id} has no query parameter {name!r}"
        for name in query
        if name not in found.query
    ]
    if method == "GET" and body is not None:
        errors.append(f"{said}: a GET takes no body")
    return errors


def answer_errors(method: str, path: str, status: int, answer: Any) -> list[str]:
    """Where an answer to `method path` with HTTP `status` is not what the document says of
    it (one that is not JSON at all is the adapter's to refuse, and not checked)."""
    found = operation_of(method, path)
    if found is None or answer is None:
        return []
    schema = found.responses.get(str(status), found.responses.get("default"))
    said = f"{method} {path} answered {status}"
    if schema is None:
        return [f"{said}, which {found.id} does not document"]
    closed = {"$ref": URI + schema["$ref"], "unevaluatedProperties": False}
    validator = Draft202012Validator(closed, registry=_registry())
    return [
        f"{said}: {'.'.join(map(str, e.absolute_path)) or '(whole)'}: {e.message}"
        for e in sorted(validator.iter_errors(answer), key=lambda e: list(e.absolute_path))
    ]


def checked(method: str, path: str) -> bool:
    """Whether `method path` is one of the operations held to the document here."""
    found = operation_of(method, path)
    return found is not None and found.id in CHECKED


def _resolved(node: dict[str, Any]) -> dict[str, Any]:
    """`node`, or what its local `$ref` points at."""
    ref = node.get("$ref")
    if not isinstance(ref, str):
        return node
    target: Any = document()
    for step in ref.removeprefix("#/").split("/"):
        target = target[step.replace("~1", "/").replace("~0", "~")]
    return dict(target)


@cache
def _registry() -> Registry:  # type: ignore[type-arg]
    resource = Resource(document(), DRAFT202012)  # type: ignore[call-arg]
    return Registry().with_resource(URI, resource)
