"""The one HTTP helper every provider adapter uses: timeouts, error classes, no secrets.

Classification: 429 (honouring Retry-After), 5xx, connection errors and timeouts are
retryable; any other 4xx is permanent; a body that is not JSON is retryable. Every message
that leaves here has been through `redact`, so an API key never reaches an error, a log
line or an event.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from email.utils import parsedate_to_datetime
from typing import Any, Self

import httpx

from governor.domain.ports import ProviderError

MASK = "***"
_CREDENTIALS = re.compile(r"(?i)(bearer\s+|api[_-]?key[=:]\s*)[^\s&\"',;]+")


def redact(text: str, *secrets: str) -> str:
    """`text` with every secret, bearer token and api_key=... value masked."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, MASK)
    return _CREDENTIALS.sub(lambda m: m.group(1) + MASK, text)


def retry_after_s(value: str | None, now: datetime | None = None) -> float | None:
    """Retry-After as seconds: either delay-seconds or an HTTP date; None if absent or bad."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def number(value: Any) -> Decimal | None:
    """A number from a provider's answer (a JSON number, or a string: specs show both) as an
    exact Decimal; None stays None. Anything else (a bool, text, NaN, infinity) raises
    InvalidOperation, which the adapter reports as a malformed answer."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise InvalidOperation(f"{value!r} is not a number")
    parsed = Decimal(str(value))
    if not parsed.is_finite():
        raise InvalidOperation(f"{value!r} is not a finite number")
    return parsed


def provider_client(timeout_s: float = 10.0) -> httpx.Client:
    """The client adapters are built with: every call bounded, connecting a little faster."""
    return httpx.Client(timeout=httpx.Timeout(timeout_s, connect=min(5.0, timeout_s)))


class ProviderHttp:
    """Calls one provider's HTTP API and returns decoded JSON bodies, or raises ProviderError.

    `headers` (usually the credentials) go with every call; `secret` is masked in every
    message. A 204 or an empty body decodes to None.
    """

    def __init__(
        self, client: httpx.Client, provider: str, secret: str, headers: dict[str, str]
    ) -> None:
        self._client = client
        self._provider = provider
        self._secret = secret
        self._headers = headers

    @classmethod
    def bearer(cls, client: httpx.Client, provider: str, token: str) -> Self:
        """The usual shape: the token sent as `Authorization: Bearer` and masked everywhere."""
        return cls(client, provider, token, {"Authorization": f"Bearer {token}"})

    def request(
        self,
        method: str,
        url: str,
        *,
        json: Any = None,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        try:
            response = self._client.request(
                method, url, json=json, params=params, headers={**self._headers, **(headers or {})}
            )
        except httpx.TimeoutException as exc:
            raise self.error(f"timed out ({type(exc).__name__})", True) from None
        except httpx.TransportError as exc:
            raise self.error(f"unreachable ({type(exc).__name__}: {exc})", True) from None
        self.raise_for_status(response)
        if response.status_code == 204 or not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            snippet = response.text[:200]
            raise self.error(f"answered a body that is not JSON: {snippet!r}", True) from None

    def raise_for_status(self, response: httpx.Response) -> None:
        """Raise the ProviderError an answer amounts to (nothing for a success).

        A provider that explains its refusals in the body (an error code, a reason) extends
        this: read the body, raise a more precise error, or leave it to this one."""
        status = response.status_code
        if status < 400:
            return
        said = f"HTTP {status}: {response.text[:200]!r}"
        if status == 429:
            delay = retry_after_s(response.headers.get("Retry-After"))
            wait = "" if delay is None else f"; retry after {delay:g} s"
            raise self.error(f"rate limited ({said}){wait}", True, retry_after=delay, status=status)
        if status >= 500:
            raise self.error(f"failed on its side ({said})", True, status=status)
        raise self.error(f"refused the request ({said})", False, status=status)

    def error(
        self,
        message: str,
        retryable: bool,
        *,
        retry_after: float | None = None,
        status: int | None = None,
    ) -> ProviderError:
        """A ProviderError saying `message` about this provider, with every secret masked."""
        text = redact(f"{self._provider} {message}", self._secret)
        return ProviderError(text, retryable=retryable, retry_after_s=retry_after, status=status)
