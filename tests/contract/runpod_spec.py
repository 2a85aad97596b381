"""RunPod's own definitions of its GraphQL API (vendored in tests/specs/runpod, see its
README), and the checks of a request and of an answer against them.

What the definitions allow is read from RunPod's SDK's and CLI's documents: each root field
(an operation, such as `pod` or `podStop`), the fields of its `input` with their GraphQL
types, and every field ever selected beneath it; a Pod field's JSON type from the type the
CLI decodes it into, and `desiredStatus`'s values from the REST v1 Pod schema's enum. Each
check answers the problems it found, none when the request or answer conforms. The REST v2
reads of a pod's network volumes are held to RunPod's REST v2 document
(`runpod_rest_spec.py`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import httpx
from graphql import (
    BooleanValueNode,
    FieldNode,
    FloatValueNode,
    GraphQLError,
    IntValueNode,
    ObjectValueNode,
    OperationDefinitionNode,
    SelectionSetNode,
    StringValueNode,
    ValueNode,
    VariableNode,
    parse,
    print_ast,
)

from tests.contract import runpod_rest_spec
from tests.contract.conformance import Exchange

SPECS = Path(__file__).parents[1] / "specs" / "runpod"
DOCUMENTS = ("sdk.graphql", "cli.graphql")
# The JSON a Go type of the CLI's Pod decodes from, and a GraphQL scalar's variable value
GO_JSON: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "int": (int,),
    "float32": (int, float),
    "bool": (bool,),
    "[]string": (list,),
}
GRAPHQL_JSON: dict[str, tuple[type, ...]] = {
    "String": (str,),
    "Int": (int,),
    "Float": (int, float),
    "Boolean": (bool,),
}


@dataclass
class Allowed:
    """What RunPod's documents send under one field: its `input` fields' types, what may
    be selected beneath it."""

    inputs: dict[str, set[str]] = field(default_factory=dict)
    selects: dict[str, Allowed] = field(default_factory=dict)

    def merge(self, selection: SelectionSetNode | None) -> None:
        for node in selection.selections if selection else ():
            if isinstance(node, FieldNode):
                self.selects.setdefault(node.name.value, Allowed()).merge(node.selection_set)


@dataclass(frozen=True)
class Definitions:
    roots: dict[tuple[str, str], Allowed]  # (query|mutation, root field) → what it allows
    pod_types: dict[str, str]  # a Pod field → the CLI's Go type for it
    statuses: frozenset[str]  # the documented values of desiredStatus


@cache
def definitions() -> Definitions:
    roots: dict[tuple[str, str], Allowed] = {}
    for name in DOCUMENTS:
        for operation in _operations(parse((SPECS / name).read_text())):
            variables = {
                v.variable.name.value: print_ast(v.type).rstrip("!")
                for v in operation.variable_definitions or ()
            }
            for root in _fields(operation.selection_set):
                allowed = roots.setdefault((operation.operation.value, root.name.value), Allowed())
                for key, value in _inputs(root).items():
                    allowed.inputs.setdefault(key, set()).add(_type_of(value, variables))
                allowed.merge(root.selection_set)
    pod = json.loads((SPECS / "rest-v1-pod.json").read_text())
    return Definitions(
        roots,
        json.loads((SPECS / "cli-pod.json").read_text()),
        frozenset(pod["properties"]["desiredStatus"]["enum"]),
    )


def conforming(client: httpx.Client) -> httpx.Client:
    """`client`, failing (AssertionError) on every GraphQL request it sends, and every JSON
    answer with HTTP 200 it gets, that RunPod's definitions do not allow; and on every
    network-volume read of REST v2, or its answer whatever its status, that RunPod's REST v2
    document does not allow."""
    hooks = client.event_hooks
    client.event_hooks = {**hooks, "response": [*hooks.get("response", []), _conform]}
    return client


def _conform(response: httpx.Response) -> None:
    request = response.request
    if runpod_rest_spec.checked(request.method, request.url.path):
        exchange = Exchange.of(response)
        problems = runpod_rest_spec.request_errors(
            exchange.method, exchange.path, exchange.query, exchange.body
        )
        problems += runpod_rest_spec.answer_errors(
            exchange.method, exchange.path, exchange.status, exchange.answer
        )
        assert not problems, f"outside RunPod's REST v2 document: {problems}"
        return
    if request.method != "POST" or not request.url.path.endswith("/graphql"):
        return
    body = json.loads(request.content)
    problems = check_request(body)
    if response.status_code == 200:
        response.read()
        try:
            answer = response.json()
        except ValueError:  # a body that is not JSON at all: the adapter's to refuse
            answer = None
        if answer is not None:
            problems += check_answer(body, answer)
    assert not problems, f"outside RunPod's definitions: {problems}"


def check_request(body: dict[str, Any]) -> list[str]:
    """Problems of a GraphQL request body ({"query", "variables"}) against the definitions."""
    try:
        operations = _operations(parse(str(body.get("query"))))
    except GraphQLError as exc:
        return [f"not GraphQL: {exc.message}"]
    variables = body.get("variables") or {}
    problems = []
    for operation in operations:
        declared = {
            v.variable.name.value: print_ast(v.type).rstrip("!")
            for v in operation.variable_definitions or ()
        }
        for name, kind in declared.items():
            value = variables.get(name)
            if not isinstance(value, GRAPHQL_JSON.get(kind, ())) or isinstance(value, bool) != (
                kind == "Boolean"
            ):
                problems.append(f"${name}: {kind} sent as {value!r}")
        for root in _fields(operation.selection_set):
            allowed = definitions().roots.get((operation.operation.value, root.name.value))
            if allowed is None:
                problems.append(f"{operation.operation.value} {root.name.value} is not RunPod's")
                continue
            for key, value in _inputs(root).items():
                kind = _type_of(value, declared)
                if kind not in allowed.inputs.get(key, set()):
                    problems.append(f"{root.name.value}(input: {key}: {kind}) is not RunPod's")
            problems += _selection(root.name.value, root.selection_set, allowed)
    return problems


def check_answer(request: dict[str, Any], answer: Any) -> list[str]:
    """Problems of a 200 answer to `request` against the definitions: an `errors` list as
    GraphQL has it, or `data` with only the fields selected, each of its documented type."""
    if not isinstance(answer, dict):
        return [f"answered {answer!r:.80}, not an object"]
    if "errors" in answer:
        return [f"error {e!r:.120} is not GraphQL's" for e in answer["errors"] if not _error(e)]
    data = answer.get("data")
    if not isinstance(data, dict):
        return [f"no data in {answer!r:.120}"]
    [operation] = _operations(parse(str(request["query"])))
    return _values(data, operation.selection_set)


def _values(data: dict[str, Any], selection: SelectionSetNode | None) -> list[str]:
    wanted = {f.name.value: f for f in _fields(selection)}
    problems = [f"{key} answered, not selected" for key in data if key not in wanted]
    for key, node in wanted.items():
        value = data.get(key)
        if node.selection_set is not None:
            items = value if isinstance(value, list) else [value]
            for item in items:
                if item is not None and not isinstance(item, dict):
                    problems.append(f"{key}: {item!r:.60} is not an object")
                elif item is not None:
                    problems += _values(item, node.selection_set)
        elif value is not None:
            problems += _scalar(key, value)
    return problems


def _scalar(key: str, value: Any) -> list[str]:
    spec = definitions()
    go = spec.pod_types.get(key)
    if go is None:
        return [f"{key} has no type in RunPod's definitions"]
    if not isinstance(value, GO_JSON[go]) or (isinstance(value, bool) and go != "bool"):
        return [f"{key}: {value!r} is not a {go}"]
    if key == "desiredStatus" and value not in spec.statuses:
        return [f"desiredStatus {value!r} is not one RunPod documents"]
    return []


def _selection(path: str, selection: SelectionSetNode | None, allowed: Allowed) -> list[str]:
    problems = []
    for node in _fields(selection):
        below = allowed.selects.get(node.name.value)
        if below is None:
            problems.append(f"{path}.{node.name.value} is not selected by RunPod's documents")
        else:
            problems += _selection(f"{path}.{node.name.value}", node.selection_set, below)
    return problems


def _error(error: Any) -> bool:
    """An entry of GraphQL's `errors`: a message, and extensions (a code) if any."""
    return (
        isinstance(error, dict)
        and isinstance(error.get("message"), str)
        and isinstance(error.get("extensions", {}), dict)
    )


def _operations(document: Any) -> list[OperationDefinitionNode]:
    return [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]


def _fields(selection: SelectionSetNode | None) -> list[FieldNode]:
    return [n for n in (selection.selections if selection else ()) if isinstance(n, FieldNode)]


def _inputs(root: FieldNode) -> dict[str, ValueNode]:
    """The fields of a root field's `input: {...}` argument."""
    for argument in root.arguments or ():
        if argument.name.value == "input" and isinstance(argument.value, ObjectValueNode):
            return {f.name.value: f.value for f in argument.value.fields}
    return {}


def _type_of(value: ValueNode, variables: dict[str, str]) -> str:
    """The GraphQL type of an input value: a variable's declared type, a literal's kind."""
    if isinstance(value, VariableNode):
        return variables.get(value.name.value, "undeclared")
    literals = {
        StringValueNode: "String",
        IntValueNode: "Int",
        FloatValueNode: "Float",
        BooleanValueNode: "Boolean",
    }
    return literals.get(type(value), type(value).__name__)
