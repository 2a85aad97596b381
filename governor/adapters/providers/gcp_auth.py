"""GCP credentials through google-auth (the `gcp` extra), as their users already have them.

Application Default Credentials, in google-auth's order: the key file or workload identity
federation config named by GOOGLE_APPLICATION_CREDENTIALS, gcloud's user credentials
(`gcloud auth application-default login`), then the GCE metadata server. Tokens are
refreshed when google-auth counts them expired (a few minutes early), over the adapter's
own httpx client. No error or log line carries a token or a key: a refusal is quoted by its
first words only, never with the answer's body.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import google.auth
import httpx
from google.auth import exceptions
from google.auth.credentials import Credentials
from google.auth.transport import Request, Response

from governor.domain.ports import ProviderError

SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
TOKEN_TIMEOUT_S = 10.0
# What each kind of credential is called in `governor providers check`, by its module.
KINDS = {
    "google.oauth2.service_account": "a service-account key file",
    "google.auth.identity_pool": "workload identity federation",
    "google.auth.aws": "workload identity federation (AWS)",
    "google.auth.pluggable": "workload identity federation (executable)",
    "google.auth.external_account_authorized_user": "workforce identity federation",
    "google.auth.impersonated_credentials": "service-account impersonation",
    "google.oauth2.credentials": "gcloud user credentials",
    "google.auth.compute_engine.credentials": "the GCE metadata server",
}


class GoogleCredentials:
    """A TokenSource over google-auth credentials, refreshed when they expire.

    `credential` says which credential it is (never the secret), for `providers check`.
    """

    def __init__(self, client: httpx.Client, credentials: Credentials) -> None:
        self._request = _HttpxRequest(client)
        self._credentials = credentials
        self._lock = threading.Lock()  # one refresh at a time; others wait for its token
        kind = KINDS.get(type(credentials).__module__, type(credentials).__name__)
        email = getattr(credentials, "service_account_email", None)
        self.credential = f"{kind} ({email})" if email and email != "default" else kind

    @classmethod
    def default(cls, client: httpx.Client) -> GoogleCredentials:
        """Application Default Credentials, scoped to cloud-platform."""
        try:
            credentials, _project = google.auth.default(scopes=SCOPES)
        except exceptions.DefaultCredentialsError as exc:
            raise ProviderError(
                f"gcp found no Application Default Credentials: {_said(exc)}", retryable=False
            ) from None
        return cls(client, credentials)

    def token(self) -> str:
        with self._lock:
            if not self._credentials.valid:
                try:
                    self._credentials.refresh(self._request)
                except exceptions.TransportError as exc:
                    raise self._failed(exc, retryable=True) from None
                except exceptions.RefreshError as exc:
                    raise self._failed(exc, retryable=bool(exc.retryable)) from None
            return str(self._credentials.token)

    def _failed(self, exc: exceptions.GoogleAuthError, *, retryable: bool) -> ProviderError:
        return ProviderError(
            f"gcp could not get a token from {self.credential}: {_said(exc)}",
            retryable=retryable,
        )


class _HttpxResponse(Response):
    def __init__(self, response: httpx.Response) -> None:
        self._response = response

    @property
    def status(self) -> int:
        return self._response.status_code

    @property
    def headers(self) -> Mapping[str, str]:
        return self._response.headers

    @property
    def data(self) -> bytes:
        return self._response.content


class _HttpxRequest(Request):
    """google-auth's transport over httpx: token endpoints are reached with the adapter's
    own client (its timeouts, proxies and CA), not a second HTTP library."""

    def __init__(self, client: httpx.Client) -> None:
        self._client = client

    def __call__(
        self,
        url: str,
        method: str = "GET",
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        **_kwargs: Any,
    ) -> _HttpxResponse:
        try:
            response = self._client.request(
                method, url, content=body, headers=headers, timeout=timeout or TOKEN_TIMEOUT_S
            )
        except httpx.HTTPError as exc:  # the URL only: a token endpoint, no secret in it
            raise exceptions.TransportError(f"{type(exc).__name__} reaching {url}") from None
        return _HttpxResponse(response)


def _said(exc: Exception) -> str:
    """An exception's own message, without the response data google-auth attaches to it
    (which may hold a token)."""
    first = exc.args[0] if exc.args else ""
    return str(first)[:200] if isinstance(first, str) else type(exc).__name__
