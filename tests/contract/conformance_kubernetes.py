"""Requests to a Kubernetes API server and its answers checked against Kubernetes' own
definitions, both installed packages: the operations of the official client (`kubernetes`,
generated from Kubernetes' OpenAPI document: each operation's HTTP method, path template,
query parameters, the content types of its body and the model it answers with) and the
JSON schemas of Kubernetes' OpenAPI that `kubernetes-validate` bundles, in their strict form
(no field a schema does not name). The custom resources (JobSet, RayJob, PyTorchJob) are
called through the client's custom-object operations, each made particular to one of the
CustomResourceDefinitions vendored in tests/specs/kubernetes/crds/ (its group, version and
plural, the subresources it declares) and held to that definition's openAPIV3Schema, made
strict the same way (the API server prunes a field its structural schema does not name: a
patch of one changes nothing). A request must be a call of one of those operations with a
body of the schema of the object it changes (a merge patch: any part of it), and an answer
that object's schema, or a `Status` where it fails."""

from __future__ import annotations

import ast
import importlib.util
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml
from jsonschema import Draft202012Validator, validators
from referencing import Registry, Resource

from tests.contract.conformance import SPECS, Exchange

VERSION = "1.37.0"  # the Kubernetes release whose schemas are held to (the client's, 37)
# The client's API modules for the groups the adapter calls
MODULES = ("batch_v1_api", "apps_v1_api")
STATUS = "V1Status"  # what every refusal is, by Kubernetes' API conventions
CRDS = SPECS / "kubernetes" / "crds"
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's, where built: 4x faster
CUSTOM = "custom_objects_api"  # the client's operations on any custom resource
# Those the adapter may call on a namespaced custom resource, and what each answers: the
# object, its list, or (the scale subresource) a Scale; a subresource op only where the
# definition declares that subresource.
CUSTOM_OPERATIONS = {
    "get_namespaced_custom_object": "object",
    "patch_namespaced_custom_object": "object",
    "list_custom_object_for_all_namespaces": "list",
    "get_namespaced_custom_object_status": "object",
    "patch_namespaced_custom_object_status": "object",
    "get_namespaced_custom_object_scale": "V1Scale",
    "patch_namespaced_custom_object_scale": "V1Scale",
}


@dataclass(frozen=True)
class Definition:
    """One vendored CustomResourceDefinition, at its storage version."""

    group: str
    version: str
    plural: str
    kind: str
    list_kind: str
    schema: dict[str, Any]  # its openAPIV3Schema
    subresources: frozenset[str]


@cache
def definitions() -> dict[str, Definition]:
    """The vendored definitions by plural (jobsets, rayjobs, pytorchjobs)."""
    found = {}
    for path in sorted(CRDS.glob("*.yaml")):
        crd = yaml.load(path.read_text(), Loader=LOADER)
        spec = crd["spec"]
        version = next(v for v in spec["versions"] if v.get("storage"))
        names = spec["names"]
        found[names["plural"]] = Definition(
            spec["group"],
            version["name"],
            names["plural"],
            names["kind"],
            names["listKind"],
            version["schema"]["openAPIV3Schema"],
            frozenset(version.get("subresources", {})),
        )
    return found


@dataclass(frozen=True)
class Operation:
    name: str  # the client's method, e.g. patch_namespaced_job
    method: str
    template: str
    path: re.Pattern[str]
    query: frozenset[str]
    content_types: frozenset[str]  # what its body may be sent as; empty: it takes none
    answers: dict[int, str]  # HTTP status -> the model answered


@cache
def operations() -> tuple[Operation, ...]:
    spec = importlib.util.find_spec("kubernetes.client.api")
    assert spec is not None and spec.submodule_search_locations
    folder = Path(next(iter(spec.submodule_search_locations)))
    builtin = tuple(
        operation
        for module in MODULES
        for operation in _operations(ast.parse((folder / f"{module}.py").read_text()))
    )
    custom = [
        operation
        for operation in _operations(ast.parse((folder / f"{CUSTOM}.py").read_text()))
        if operation.name in CUSTOM_OPERATIONS
    ]
    return builtin + tuple(
        _particular(operation, definition)
        for definition in definitions().values()
        for operation in custom
        if _declared(operation.name, definition)
    )


def _declared(name: str, definition: Definition) -> bool:
    """Whether the definition has what the operation is on (its status or scale)."""
    for subresource in ("status", "scale"):
        if name.endswith(f"_{subresource}"):
            return subresource in definition.subresources
    return True


def _particular(operation: Operation, definition: Definition) -> Operation:
    """A custom-object operation on one definition's resource: its path with the group,
    version and plural filled in, its answers that resource's (the model `crd:<plural>`,
    `crd:<plural>:list`) or a Scale."""
    template = operation.template
    for name, value in (
        ("group", definition.group),
        ("version", definition.version),
        ("plural", definition.plural),
        ("resource_plural", definition.plural),
    ):
        template = template.replace(f"{{{name}}}", value)
    answered = CUSTOM_OPERATIONS[operation.name]
    model = (
        answered
        if answered.startswith("V1")
        else f"crd:{definition.plural}" + (":list" if answered == "list" else "")
    )
    return Operation(
        f"{operation.name}:{definition.plural}",
        operation.method,
        template,
        re.compile(re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(template))),
        operation.query,
        operation.content_types,
        {status: model for status in operation.answers},
    )


def operation_of(method: str, path: str) -> Operation | None:
    """The operation a request is a call of; where several paths match, the one with the
    fewest parameters (a literal segment wins over {name})."""
    matching = [o for o in operations() if o.method == method and o.path.fullmatch(path)]
    return min(matching, key=lambda o: o.template.count("{"), default=None)


def operation(name: str) -> Operation:
    return next(o for o in operations() if o.name == name)


def off_spec(exchanges: list[Exchange]) -> list[str]:
    errors = []
    for exchange in exchanges:
        errors += request_errors(
            exchange.method, exchange.path, exchange.query, exchange.content_type, exchange.body
        )
        errors += answer_errors(exchange.method, exchange.path, exchange.status, exchange.answer)
    return errors


def request_errors(
    method: str, path: str, query: dict[str, list[str]], content_type: str, body: Any
) -> list[str]:
    said = f"{method} {path}"
    found = operation_of(method, path)
    if found is None:
        return [f"{said}: the Kubernetes client has no operation with this method and path"]
    errors = [
        f"{said}: {found.name} takes no {name!r}" for name in query if name not in found.query
    ]
    if body is None:
        return errors
    if not found.content_types:
        return [*errors, f"{said}: {found.name} takes no body"]
    kind = content_type.split(";")[0].strip()
    if kind not in found.content_types:
        errors.append(f"{said}: {found.name} takes no {kind!r} body")
    model = found.answers.get(200)
    if model is None:
        return [*errors, f"{said}: {found.name} answers no object to patch"]
    if kind == "application/merge-patch+json":  # any part of the object (RFC 7386)
        errors += [f"{said}: body {e}" for e in schema_errors(body, model, partial=True)]
    return errors


def answer_errors(method: str, path: str, status: int, answer: Any) -> list[str]:
    """Where an answer is not the model the operation answers with (a Status where it
    failed); an answer that is not JSON at all is the adapter's to refuse."""
    found = operation_of(method, path)
    if found is None or answer is None:
        return []
    model = found.answers.get(status) if status < 400 else STATUS
    if model is None:
        return [f"{method} {path} answered {status}, which {found.name} does not"]
    return [f"{method} {path} answered {status}: {e}" for e in schema_errors(answer, model)]


def schema_errors(value: Any, model: str, *, partial: bool = False) -> list[str]:
    """Where `value` is not an object of the client's `model` (V1Job), by the strict JSON
    schema of its kind; `partial`: its required fields may be left out."""
    schema = _custom_schema(model) if model.startswith("crd:") else _schema(model)
    checker = (_Partial if partial else Draft202012Validator)(schema, registry=_registry())
    return [
        f"{'.'.join(map(str, error.absolute_path)) or '(whole)'}: {error.message}"
        for error in sorted(checker.iter_errors(value), key=lambda e: list(e.absolute_path))
    ]


def schema_file(model: str) -> Path:
    """The strict schema of the client's `model`: V1Job -> job-batch-v1.json."""
    kind = re.sub(r"^V\d+(?:(?:alpha|beta)\d+)?", "", model).lower()
    found = sorted(_schemas().glob(f"{kind}-*v1.json"))
    found = [f for f in found if re.fullmatch(rf"{kind}-(?:[a-z]+-)?v1\.json", f.name)]
    assert len(found) == 1, f"{model}: {found}"
    return found[0]


@cache
def _custom_schema(model: str) -> dict[str, Any]:
    """A vendored definition's schema, strict, for `crd:<plural>` (its object, apiVersion
    and kind its own) or `crd:<plural>:list` (a list of them, as a list answer has them)."""
    _, plural, *listed = model.split(":")
    definition = definitions()[plural]
    obj = _strict(definition.schema)
    if not listed:
        properties = obj["properties"] | {
            "apiVersion": {"enum": [f"{definition.group}/{definition.version}"]},
            "kind": {"enum": [definition.kind]},
        }
        return obj | {"properties": properties}
    return {
        "type": "object",
        "properties": {
            "apiVersion": {"enum": [f"{definition.group}/{definition.version}"]},
            "kind": {"enum": [definition.list_kind]},
            "metadata": {"type": "object"},
            "items": {"type": "array", "items": obj},
        },
        "required": ["apiVersion", "kind", "items"],
        "additionalProperties": False,
    }


def _strict(schema: Any) -> Any:
    """An OpenAPI v3 schema of a definition that allows no field it does not name: an
    object with properties and no word on others (additionalProperties, or
    x-kubernetes-preserve-unknown-fields) gets additionalProperties false."""
    if isinstance(schema, list):
        return [_strict(each) for each in schema]
    if not isinstance(schema, dict):
        return schema
    strict = {key: _strict(value) for key, value in schema.items()}
    if (
        "properties" in schema
        and "additionalProperties" not in schema
        and not schema.get("x-kubernetes-preserve-unknown-fields")
    ):
        strict["additionalProperties"] = False
    return strict


@cache
def _schema(model: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(schema_file(model).read_text())
    return loaded


def _schemas() -> Path:
    return (
        Path(kubernetes_validate.__file__).parent
        / "kubernetes-json-schema"
        / (f"v{VERSION}-local-strict")
    )


@cache
def _registry() -> Registry:  # type: ignore[type-arg]
    definitions = json.loads((_schemas() / "_definitions.json").read_text())
    return Resource.from_contents(definitions) @ Registry()  # type: ignore[no-any-return]


def _optional(*_: Any) -> Iterator[Any]:
    return iter(())


_Partial = validators.extend(Draft202012Validator, {"required": _optional})


def _operations(module: ast.Module) -> Iterator[Operation]:
    answers = {
        function.name: _answers(function)
        for function in ast.walk(module)
        if isinstance(function, ast.FunctionDef)
    }
    for function in ast.walk(module):
        if not (isinstance(function, ast.FunctionDef) and function.name.endswith("_serialize")):
            continue
        name = function.name.removeprefix("_").removesuffix("_serialize")
        call = next(
            node
            for node in ast.walk(function)
            if isinstance(node, ast.Call) and any(k.arg == "resource_path" for k in node.keywords)
        )
        keywords = {k.arg: k.value for k in call.keywords}
        template = ast.literal_eval(keywords["resource_path"])
        yield Operation(
            name,
            ast.literal_eval(keywords["method"]),
            template,
            re.compile(re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(template))),
            frozenset(_query(function)),
            frozenset(_content_types(function)),
            answers.get(name, {}),
        )


def _query(function: ast.FunctionDef) -> Iterator[str]:
    """The names of `_query_params.append((name, value))`."""
    for node in ast.walk(function):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "append"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "_query_params"
            and isinstance(node.args[0], ast.Tuple)
        ):
            yield ast.literal_eval(node.args[0].elts[0])


def _content_types(function: ast.FunctionDef) -> Iterator[str]:
    """The content types `select_header_content_type([...])` is offered."""
    for node in ast.walk(function):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "select_header_content_type"
        ):
            yield from ast.literal_eval(node.args[0])


def _answers(function: ast.FunctionDef) -> dict[int, str]:
    """`_response_types_map` of the client's method: the model by HTTP status."""
    for node in ast.walk(function):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id == "_response_types_map"
            and node.value is not None
        ):
            mapped = ast.literal_eval(node.value)
            return {int(status): model for status, model in mapped.items() if model}
    return {}
