"""The governor's API as the command line calls it: the HTTP client, and its failures put as
one line that says what to do.

httpx is imported only where a request is made, so that a command that sends none (`--help`,
a usage error, an offline `plan check`) starts without it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, BinaryIO

if TYPE_CHECKING:
    import httpx

DEFAULT_URL = "http://127.0.0.1:8000"
TIMEOUT_S = 30.0
WHOLE_PAGE = 1000  # the server's largest page: what reading a whole list takes per call


OPERATOR_TOKEN = "GOVERNOR_OPERATOR_TOKEN"  # the operator token the verbs send
FORMER_TOKEN = "GOVERNOR_TOKEN"  # its former name on the command line, still read


def operator_token(given: str | None, environ: Mapping[str, str]) -> str | None:
    """The token a verb sends: --token, else GOVERNOR_OPERATOR_TOKEN (the variable 'governor
    serve' prints at its first start), else the former GOVERNOR_TOKEN with a line on stderr
    saying to move to the new name."""
    if given:
        return given
    if environ.get(OPERATOR_TOKEN):
        return environ[OPERATOR_TOKEN]
    former = environ.get(FORMER_TOKEN)
    if former:
        print(
            f"governor: {FORMER_TOKEN} is deprecated for the command line: set "
            f"{OPERATOR_TOKEN} instead (it is also the name 'governor serve' prints)",
            file=sys.stderr,
        )
    return former or None


class OperatorError(Exception):
    """A command could not be carried out; the message says why, for a person."""


def connect(
    url: str,
    token: str | None,
    *,
    timeout_s: float = TIMEOUT_S,
    transport: httpx.BaseTransport | None = None,
) -> httpx.Client:
    """A client for the governor at `url` that sends `token` (if any) as its bearer token;
    over `transport` if one is given, else httpx's own (TLS as httpx verifies it)."""
    import httpx

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=url, headers=headers, timeout=timeout_s, transport=transport)


class Api:
    """The governor's API for one invocation: one client, made by `connect` at the first call
    (a command that sends nothing makes none) and closed with the Api. `url` is the address
    as the operator gave it, for messages."""

    def __init__(self, url: str, connect: Callable[[], httpx.Client]) -> None:
        self.url = url
        self._connect = connect
        self._client: httpx.Client | None = None

    def __enter__(self) -> Api:
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._client is not None:
            self._client.close()

    def call(
        self,
        method: str,
        path: str,
        *,
        body: dict[str, Any] | None = None,
        params: dict[str, Any] | None = None,
    ) -> Any:
        """The response's JSON (its text for a non-JSON answer); OperatorError otherwise."""
        if self._client is None:
            self._client = self._connect()
        with self._talking():
            response = self._client.request(method, path, json=body, params=given(**(params or {})))
        if response.is_success:
            is_json = response.headers.get("content-type", "").startswith("application/json")
            return response.json() if is_json else response.text
        raise OperatorError(_refusal(response))

    def download(
        self,
        path: str,
        params: dict[str, Any],
        sink: BinaryIO,
        progress: Callable[[int], None],
    ) -> int:
        """Write a GET's body to `sink` as it arrives, telling `progress` the bytes so far
        after each chunk; the bytes written. Its failures as `call`'s; no time limit on the
        body as a whole, only on each read."""
        if self._client is None:
            self._client = self._connect()
        written = 0
        with self._talking(), self._client.stream("GET", path, params=given(**params)) as response:
            if not response.is_success:
                response.read()
                raise OperatorError(_refusal(response))
            for chunk in response.iter_bytes(chunk_size=1 << 16):
                sink.write(chunk)
                written += len(chunk)
                progress(written)
        return written

    @contextmanager
    def _talking(self) -> Iterator[None]:
        """The transport's failures, said as what to do about them (OperatorError)."""
        import httpx

        try:
            yield
        except httpx.ConnectError as exc:
            raise OperatorError(
                f"the server is not reachable at {self.url} ({exc}); start it with "
                "'governor serve', or point GOVERNOR_URL (or --url) at it"
            ) from None
        except httpx.TimeoutException:
            raise OperatorError(
                f"the server at {self.url} did not answer within {TIMEOUT_S:g} s"
            ) from None
        except httpx.HTTPError as exc:
            raise OperatorError(f"talking to {self.url} failed: {exc}") from None

    def items(self, path: str, params: dict[str, Any] | None = None) -> list[Any]:
        """Every item of a list, page after page."""
        found: list[Any] = []
        query: dict[str, Any] = {**(params or {}), "limit": WHOLE_PAGE}
        while True:
            page = self.call("GET", path, params=query)
            found.extend(page["items"])
            if page["next_cursor"] is None:
                return found
            query["cursor"] = page["next_cursor"]


# A command over HTTP: what main calls with the parsed arguments and the API; its exit status.
Remote = Callable[[argparse.Namespace, Api], int]


def given(**values: Any) -> dict[str, Any]:
    """The values the operator gave: the server applies its defaults to the rest."""
    return {k: v for k, v in values.items() if v is not None}


def _refusal(response: httpx.Response) -> str:
    try:
        error = json.loads(response.text)["error"]
        message = f"{error['message']} ({error['code']})"
    except (ValueError, KeyError, TypeError):
        message = response.text.strip()[:300] or "no details"
    if response.status_code == 401:
        sent = "authorization" in response.request.headers
        what = f"the token was refused: {message}" if sent else "no token was sent"
        return (
            f"{what}. Set {OPERATOR_TOKEN} (or --token) to an operator token: 'governor serve' "
            f"prints one at first start, or set {OPERATOR_TOKEN} on the server too"
        )
    return f"the server answered {response.status_code}: {message}"
