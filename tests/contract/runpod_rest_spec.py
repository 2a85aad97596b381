"""RunPod's REST v2 requests and answers checked against RunPod's own REST v2 OpenAPI
document (tests/specs/runpod/rest-v2-openapi.json): the operations the adapter reads a pod's
network volumes with, `getPod` and `getNetworkVolume`, and its billing, `listPodBilling`. A
request must be one of the document's operations (method and path template), with only the
query parameters it declares, each of its schema (a number or a boolean read from the query
string's text), and no body for a GET; an answer must be of the schema the operation
documents for its HTTP status (an error: the `ErrorResponse` of the status's response, or of
`default`), with no field the schema does not name."""

from __future__ import annotations

import json
from typing import Any

from jsonschema import Draft202012Validator

from tests.contract.conformance import SPECS
from tests.contract.openapi import OpenApi

REST_V2 = OpenApi(
    SPECS / "runpod" / "rest-v2-openapi.json", "urn:runpod-rest-v2-openapi", "RunPod's REST v2"
)
# the adapter's network-volume reads and its billing
CHECKED = frozenset({"getPod", "getNetworkVolume", "listPodBilling"})


def document() -> dict[str, Any]:
    return REST_V2.document


def request_errors(method: str, path: str, query: dict[str, list[str]], body: Any) -> list[str]:
    return REST_V2.request_errors(method, path, query, body, _query_errors)


def answer_errors(method: str, path: str, status: int, answer: Any) -> list[str]:
    """Where an answer to `method path` with HTTP `status` is not what the document says of
    it (one that is not JSON at all is the adapter's to refuse, and not checked)."""
    found = REST_V2.operation_of(method, path)
    if found is None or answer is None:
        return []
    pointer = found.responses.get(str(status), found.responses.get("default"))
    said = f"{method} {path} answered {status}"
    if pointer is None:
        return [f"{said}, which {found.id} does not document"]
    return [f"{said}: {e}" for e in _errors(answer, REST_V2.ref(pointer), closed=True)]


def checked(method: str, path: str) -> bool:
    """Whether `method path` is one of the operations held to the document here."""
    found = REST_V2.operation_of(method, path)
    return found is not None and found.id in CHECKED


def _query_errors(text: str, schema: dict[str, Any]) -> list[str]:
    """A query parameter's text against its schema: read as JSON where it is a number or a
    boolean (`lastN=30`), else as the string it is."""
    try:
        value = json.loads(text)
    except ValueError:
        value = text
    return _errors(value if isinstance(value, int | float | bool) else text, schema)


def _errors(value: Any, schema: dict[str, Any], *, closed: bool = False) -> list[str]:
    if closed:
        schema = {**schema, "unevaluatedProperties": False}
    validator = Draft202012Validator(
        schema, registry=REST_V2.registry, format_checker=Draft202012Validator.FORMAT_CHECKER
    )
    return [
        f"{'.'.join(map(str, e.absolute_path)) or '(whole)'}: {e.message}"
        for e in sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    ]
