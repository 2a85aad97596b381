"""What an adapter sent and what it was answered, as the contract suite records it, to be
checked against the provider's own published definitions (tests/specs/)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import httpx

SPECS = Path(__file__).parent.parent / "specs"


@dataclass(frozen=True)
class Exchange:
    """One request an adapter sent and the answer it got (`answer` None: not JSON)."""

    method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    status: int
    answer: Any
    content_type: str = ""  # the request's

    @classmethod
    def of(cls, response: httpx.Response) -> Exchange:
        request = response.request
        response.read()
        return cls(
            request.method,
            request.url.path,
            parse_qs(request.url.query.decode(), keep_blank_values=True),
            _json(request.content),
            response.status_code,
            _json(response.content),
            request.headers.get("content-type", ""),
        )


def recorder(into: list[Exchange]) -> Callable[[httpx.Response], None]:
    """An httpx response hook that records every exchange `into` the list."""

    def record(response: httpx.Response) -> None:
        into.append(Exchange.of(response))

    return record


def _json(content: bytes) -> Any:
    try:
        return json.loads(content) if content else None
    except ValueError:
        return None
