"""Requests to Vast.ai checked against the endpoints Vast's own SDK calls, as extracted into
tests/specs/vast/vastai.json: each request's method and path one of theirs, its query
parameters and body keys ones the SDK sends there, a body value the SDK sends; every
instance status in an answer one the SDK names, and the fields a listing reads (label, GPUs)
ones its instance table names."""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any

from tests.contract.conformance import SPECS, Exchange

DEFINITIONS = SPECS / "vast" / "vastai.json"
STATUS_FIELDS = ("actual_status", "intended_status")


@cache
def definitions() -> dict[str, Any]:
    extracted: dict[str, Any] = json.loads(DEFINITIONS.read_text())
    return extracted


def statuses() -> frozenset[str | None]:
    """Every instance status the SDK names: its status table ("null": none yet) and the
    statuses its commands test for."""
    spec = definitions()
    named = [*spec["actual_status"]["values"], *spec["status_mentions"]]
    return frozenset(None if status == "null" else status for status in named)


def off_spec(exchanges: list[Exchange]) -> list[str]:
    errors = []
    for exchange in exchanges:
        errors += request_errors(exchange.method, exchange.path, exchange.query, exchange.body)
        if 200 <= exchange.status < 300:
            errors += [
                f"{exchange.method} {exchange.path} answered {e}"
                for e in answer_errors(exchange.answer)
            ]
    return errors


def request_errors(method: str, path: str, query: dict[str, list[str]], body: Any) -> list[str]:
    said = f"{method} {path}"
    endpoints = [
        e
        for e in definitions()["endpoints"]
        if e["method"] == method and re.fullmatch(e["path"].replace("{id}", "[0-9]+"), path)
    ]
    if not endpoints:
        return [f"{said}: the SDK calls no such endpoint"]
    known_query = {name for e in endpoints for name in e["query"]}
    errors = [
        f"{said}: the SDK sends no {name!r} there" for name in query if name not in known_query
    ]
    sent = body if isinstance(body, dict) else {}
    for key, value in sent.items():
        values = {v for e in endpoints for v in e["body"].get(key, [])}
        if not any(key in e["body"] for e in endpoints):
            errors.append(f"{said}: the SDK sends no body key {key!r} there")
        elif values and value not in values:
            errors.append(f"{said}: the SDK sends {key}={value!r} as one of {sorted(values)}")
    return errors


# What a listing reads of an instance besides its state and money: each a field the SDK's
# instance table names (`label`: its one free-text label, read as its name)
LISTING_FIELDS = {"label": (str, type(None)), "gpu_name": (str,), "num_gpus": (int,)}


def answer_errors(answer: Any) -> list[str]:
    """An instance status in `answer` (one instance, or a page of them) the SDK does not name;
    a field the listing reads that the SDK's instance table does not name, or of a type it
    does not have."""
    instances = answer.get("instances") if isinstance(answer, dict) else None
    listed = instances if isinstance(instances, list) else [instances]
    named = set(definitions()["instance_fields"]["names"])
    errors = [
        f"{field}={instance[field]!r}, a status the SDK does not name"
        for instance in listed
        if isinstance(instance, dict)
        for field in STATUS_FIELDS
        if field in instance and instance[field] not in statuses()
    ]
    for instance in listed:
        for field, types in LISTING_FIELDS.items():
            if not isinstance(instance, dict) or field not in instance:
                continue
            if field not in named:
                errors.append(f"{field}: a field the SDK's instance table does not name")
            elif not isinstance(instance[field], types) or isinstance(instance[field], bool):
                errors.append(f"{field}={instance[field]!r}: not a {types[0].__name__}")
    return errors
