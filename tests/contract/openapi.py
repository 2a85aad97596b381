"""A provider's published OpenAPI document, read for the conformance checks: its operations
(HTTP method, path template, query parameters, request body and the answer of each HTTP
status), found by the request they would serve, and its schemas, to validate against; and
a request held to its operation.

Schemas are named by JSON pointers into the document (`#/paths/~1v2~1pods~1%7Bid%7D/...`),
resolved through one registry under the document's URI, so a schema's own `$ref`s resolve
as the document wrote them. A parameter or a response given as a `$ref` (to
`components/parameters` or `components/responses`) is followed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

JSON = "application/json"
Check = Callable[[Any, dict[str, Any]], list[str]]  # a value's problems against a schema


@dataclass(frozen=True)
class Operation:
    id: str  # the document's operationId, e.g. getPod
    method: str
    path: re.Pattern[str]
    query: dict[str, str]  # the query parameters it declares: name -> a pointer to its schema
    body: str | None  # a JSON pointer to its JSON request body's schema
    responses: dict[str, str]  # HTTP status (or "default") -> a pointer to the answer's schema


class OpenApi:
    """One OpenAPI document, read from `path`, its schemas known under `uri`; `name` says
    whose it is in a problem found."""

    def __init__(self, path: Path, uri: str, name: str) -> None:
        self.path, self.uri, self.name = path, uri, name

    @cached_property
    def document(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(self.path.read_text())
        return loaded

    @cached_property
    def operations(self) -> tuple[Operation, ...]:
        found = []
        for path, methods in self.document["paths"].items():
            template = re.compile(re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(path)))
            for method, operation in methods.items():
                if not isinstance(operation, dict) or "operationId" not in operation:
                    continue  # a path's shared `parameters`, `summary` ...
                at = f"/paths/{escape(path)}/{method}"
                query = dict(
                    self._query_parameter(f"{at}/parameters/{n}", parameter)
                    for n, parameter in enumerate(operation.get("parameters", []))
                    if self._followed(parameter).get("in") == "query"
                )
                responses = {
                    str(status): pointer
                    for status, answer in operation.get("responses", {}).items()
                    if (pointer := self._schema_of(f"{at}/responses/{status}", answer))
                }
                found.append(
                    Operation(
                        operation["operationId"],
                        method.upper(),
                        template,
                        query,
                        self._schema_of(f"{at}/requestBody", operation.get("requestBody", {})),
                        responses,
                    )
                )
        return tuple(found)

    def operation_of(self, method: str, path: str) -> Operation | None:
        """The operation serving `method path`: a literal path before a templated one."""
        matching = [o for o in self.operations if o.method == method and o.path.fullmatch(path)]
        return min(matching, key=lambda o: o.path.pattern.count("[^/]+"), default=None)

    def operation(self, name: str) -> Operation:
        return next(o for o in self.operations if o.id == name)

    def request_errors(
        self, method: str, path: str, query: dict[str, list[str]], body: Any, check: Check
    ) -> list[str]:
        """Where a request is not one the document has: no operation of its method and path;
        a query parameter the operation does not declare, or a value outside its schema; a
        body where it takes none, or one outside its schema (`check` validates a value)."""
        said = f"{method} {path}"
        found = self.operation_of(method, path)
        if found is None:
            return [f"{said}: no operation of {self.name} has this method and path"]
        errors = [
            f"{said}: {found.id} has no query parameter {name!r}"
            for name in query
            if name not in found.query
        ]
        for name, values in query.items():
            if name in found.query:
                schema = self.ref(found.query[name])
                errors += [f"{said}: {name}={v!r} {e}" for v in values for e in check(v, schema)]
        if found.body is None:
            if body is not None:
                errors.append(f"{said}: {found.id} takes no body")
        else:
            errors += [f"{said}: body {e}" for e in check(body, self.ref(found.body))]
        return errors

    def resolve(self, pointer: str) -> Any:
        """What the JSON pointer `pointer` (escaped as in a URI fragment) names."""
        node: Any = self.document
        for step in pointer.strip("/").split("/"):
            node = node[unquote(step).replace("~1", "/").replace("~0", "~")]
        return node

    def ref(self, pointer: str) -> dict[str, Any]:
        """A schema that is the one at `pointer`."""
        return {"$ref": f"{self.uri}#{pointer}"}

    @cached_property
    def registry(self) -> Registry:  # type: ignore[type-arg]
        resource = Resource(self.document, DRAFT202012)  # type: ignore[call-arg]
        return Registry().with_resource(self.uri, resource)

    def _followed(self, node: dict[str, Any]) -> dict[str, Any]:
        ref = node.get("$ref")
        return dict(self.resolve(ref.removeprefix("#"))) if isinstance(ref, str) else node

    def _query_parameter(self, at: str, node: dict[str, Any]) -> tuple[str, str]:
        """A query parameter's name and a pointer to its schema (followed where the parameter
        is a `$ref`)."""
        ref = node.get("$ref")
        if isinstance(ref, str):
            at = ref.removeprefix("#")
        return self._followed(node)["name"], f"{at}/schema"

    def _schema_of(self, at: str, node: dict[str, Any]) -> str | None:
        """A pointer to the schema of the JSON content of the request body or answer at `at`
        (followed where it is a `$ref`): of `application/json` where it has one, else of its
        first content with a schema (`application/problem+json` ...); None: no such content."""
        ref = node.get("$ref")
        if isinstance(ref, str):
            at, node = ref.removeprefix("#"), self._followed(node)
        content = node.get("content", {})
        kinds = [JSON] if JSON in content else [k for k in content if "schema" in content[k]]
        return f"{at}/content/{escape(kinds[0])}/schema" if kinds else None


def escape(token: str) -> str:
    """`token` as one step of a JSON pointer in a URI fragment."""
    return token.replace("~", "~0").replace("/", "~1").replace("{", "%7B").replace("}", "%7D")
