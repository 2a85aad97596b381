"""Fake clouds served over real HTTP on a thread, for tests that point adapters at them."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import httpx

from governor.fakes.http_cloud import FakeCloud, FakeServer, serve

C = TypeVar("C", bound=FakeCloud)


@contextmanager
def running(cloud: FakeCloud) -> Iterator[FakeServer]:
    """`cloud` served on 127.0.0.1 for the block; shut down and closed after it."""
    server = serve(cloud)
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Served(Generic[C]):
    """A running fake cloud and the URL it answers on."""

    fake: C
    url: str

    def answer_next(self, *answers: str) -> None:
        """Queue canned answers (see governor.fakes.http_cloud), one per coming provider request."""
        response = self.post(f"{self.url}/_fake/answers", json={"answers": list(answers)})
        assert response.status_code == 204

    def post(self, url: str, **kwargs: Any) -> httpx.Response:
        """The test's own POST to the fake; a subclass may send it on a client it holds."""
        return httpx.post(url, **kwargs)
