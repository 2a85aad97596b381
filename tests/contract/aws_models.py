"""The AWS adapters' exchanges held to AWS's own definitions: botocore's service models for
EC2 (2016-11-15) and Cost Explorer (2017-10-25), as installed with boto3.

`watch(session)` makes every client built from `session` check, before it is sent, each
request against its operation's input shape with botocore's own ParamValidator, and, before
it is parsed, each answer of HTTP 200 against its operation's output shape with `problems`:
the raw answer, not what botocore's parser keeps of it (the parser drops what it does not
know), so a fake cloud's answer holding a member, a type or an enum value that the model
lacks is caught. A broken request or answer raises AssertionError, which no adapter
catches: the test that sent it fails. Bodies that are not XML or JSON at all are left to
the adapters, which take them for unreadable answers, as is XML of another root. The rules
a model states only in words (Cost Explorer's window and its RESOURCE_ID filter) are in
governor.fakes.cost_explorer.RULES, which the fake enforces.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Mapping
from typing import Any

import boto3
from botocore.model import ListShape, MapShape, OperationModel, Shape, StringShape, StructureShape
from botocore.validate import ParamValidator

SERVICES = ("ec2", "ce")
CHECKED: Counter[str] = Counter()  # operations whose request and answer were checked
NUMBERS = {"integer": int, "long": int, "double": float, "float": float}


def watch(session: boto3.session.Session) -> boto3.session.Session:
    """`session`, every client it builds from now on checking what it sends and receives."""
    for service in SERVICES:
        session.events.register(f"provide-client-params.{service}", _check_request)
        session.events.register(f"before-parse.{service}", _check_answer)
    return session


def request_problems(operation: OperationModel, params: Mapping[str, Any]) -> str:
    """What botocore's ParamValidator finds wrong with `params` ("" if nothing)."""
    report = ParamValidator().validate(params, operation.input_shape)
    return report.generate_report() if report.has_errors() else ""


def answer_problems(operation: OperationModel, body: bytes) -> list[str] | None:
    """What is outside the operation's output shape in a 200 answer's `body`; None if the
    body is no answer of the operation at all (not JSON, nor XML rooted in its Response)."""
    shape = operation.output_shape
    assert shape is not None
    if operation.metadata["protocol"] == "ec2":
        try:
            root = ET.fromstring(body)
        except ET.ParseError:
            return None
        if _local(root.tag) != f"{operation.name}Response":
            return None
        return xml_problems(root, shape, operation.name, top=True)
    try:
        answer = json.loads(body)
    except ValueError:
        return None
    return json_problems(answer, shape, operation.name)


def xml_problems(element: ET.Element, shape: Shape, path: str, top: bool = False) -> list[str]:
    """EC2's XML against `shape`: structures by their members' XML names, lists as <item>s."""
    if isinstance(shape, StructureShape):
        names = {m.serialization.get("name", n): m for n, m in shape.members.items()}
        found: list[str] = []
        for child in element:
            tag = _local(child.tag)
            if top and tag == "requestId":  # the answer's metadata, outside every shape
                continue
            if tag not in names:
                found.append(f"{path}: {tag} is no member of {shape.name}")
            else:
                found += xml_problems(child, names[tag], f"{path}.{tag}")
        return found
    if isinstance(shape, ListShape):
        items = list(element)
        tags = [_local(i.tag) for i in items]
        found = [f"{path}: <{tag}> where a list has <item>" for tag in tags if tag != "item"]
        for n, item in enumerate(items):
            found += xml_problems(item, shape.member, f"{path}[{n}]")
        return found
    if len(element):
        return [f"{path}: elements where {shape.name} is a {shape.type_name}"]
    return _scalar_problems(element.text or "", shape, path, text=True)


def json_problems(value: Any, shape: Shape, path: str) -> list[str]:
    """A JSON protocol's answer against `shape`."""
    if isinstance(shape, StructureShape):
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__} where {shape.name} is a structure"]
        members = shape.members
        found = [f"{path}: {k} is no member of {shape.name}" for k in value if k not in members]
        for name, child in value.items():
            if name in members:
                found += json_problems(child, members[name], f"{path}.{name}")
        return found
    if isinstance(shape, ListShape):
        if not isinstance(value, list):
            return [f"{path}: {type(value).__name__} where {shape.name} is a list"]
        member = shape.member
        return [p for n, v in enumerate(value) for p in json_problems(v, member, f"{path}[{n}]")]
    if isinstance(shape, MapShape):
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__} where {shape.name} is a map"]
        values = shape.value
        return [p for k, v in value.items() for p in json_problems(v, values, f"{path}[{k}]")]
    return _scalar_problems(value, shape, path, text=False)


def _scalar_problems(value: Any, shape: Shape, path: str, *, text: bool) -> list[str]:
    """A string, number, boolean or timestamp: its type, and an enum's value."""
    kind = shape.type_name
    if kind == "boolean":
        ok = value in ("true", "false") if text else isinstance(value, bool)
    elif kind in NUMBERS:
        ok = _number(value, NUMBERS[kind]) if text else _is_number(value, NUMBERS[kind])
    elif kind == "timestamp":
        ok = isinstance(value, str | int | float) and not isinstance(value, bool)
    else:
        ok = isinstance(value, str)
    if not ok:
        return [f"{path}: {value!r} is no {kind} ({shape.name})"]
    if isinstance(shape, StringShape) and shape.enum and value not in shape.enum:
        return [f"{path}: {value!r} is not one of {shape.name}'s values {shape.enum}"]
    return []


def _number(text: str, kind: type) -> bool:
    try:
        kind(text)
    except ValueError:
        return False
    return True


def _is_number(value: Any, kind: type) -> bool:
    allowed = (int,) if kind is int else (int, float)
    return isinstance(value, allowed) and not isinstance(value, bool)


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


def _check_request(params: dict[str, Any], model: OperationModel, **_: Any) -> None:
    if said := request_problems(model, params):
        raise AssertionError(f"{model.name} sent outside its model: {said}")


def _check_answer(operation_model: OperationModel, response_dict: dict[str, Any], **_: Any) -> None:
    if response_dict.get("status_code") != 200:
        return
    found = answer_problems(operation_model, response_dict.get("body") or b"")
    if found:
        raise AssertionError(f"{operation_model.name} answered outside its model: {found}")
    if found is not None:
        CHECKED[operation_model.name] += 1
