"""An OpenID Connect provider through authlib: discovery, the authorization code flow with
PKCE, the device authorization grant (RFC 8628), refresh, the ID token's signature and claims
(joserfc, authlib's own JOSE library) and userinfo. Nothing of the protocol is written here:
this module only says which of authlib's calls make a sign-in, and what of their answers the
governor keeps.

A person's claims are the ID token's (checked: issuer, audience, expiry, nonce, at_hash) with
userinfo's on top, so a group claim the provider puts only in userinfo is read too; userinfo
must name the same subject.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from authlib.integrations.base_client import BaseApp, OAuth2Mixin, OpenIDMixin
from authlib.integrations.base_client.errors import OAuthError
from authlib.integrations.httpx_client import OAuth2Client
from authlib.oauth2.rfc8628 import DEVICE_CODE_GRANT_TYPE
from joserfc.errors import JoseError

from governor.domain.errors import Invalid, Unauthenticated, Unavailable
from governor.domain.identity import Authorization, DeviceCode, Identity, Vouched

PENDING = ("authorization_pending", "slow_down")  # RFC 8628 §3.5: ask again later
LEEWAY_S = 60  # clock skew tolerated on the ID token's times


class _Client(OAuth2Mixin, OpenIDMixin, BaseApp):
    """authlib's framework-neutral OpenID client, over its httpx OAuth2Client."""

    client_cls = OAuth2Client

    def _on_update_token(
        self, token: Any, refresh_token: Any = None, access_token: Any = None
    ) -> None:
        """Tokens are kept by the governor's sign-in records, not by the client."""


class OidcProvider:
    """One provider, known by its issuer's discovery document (fetched once, on first use)."""

    def __init__(
        self,
        issuer: str,
        client_id: str,
        client_secret: str | None,
        scopes: Sequence[str],
        group_claim: str,
        timeout_s: float = 10.0,
    ) -> None:
        self._issuer = issuer.rstrip("/")
        self._group_claim = group_claim
        self._credentials = {
            "client_id": client_id,
            "client_secret": client_secret,
            "scope": " ".join(scopes),
            "timeout": timeout_s,
        }
        self._client = _Client(
            framework=None,
            client_id=client_id,
            client_secret=client_secret,
            server_metadata_url=f"{self._issuer}/.well-known/openid-configuration",
            client_kwargs={
                "scope": " ".join(scopes),
                "code_challenge_method": "S256",
                "timeout": timeout_s,
            },
        )
        self._lock = threading.Lock()  # the discovery document is fetched once

    def _metadata(self) -> Mapping[str, Any]:
        with self._lock:
            return _asking(self._client.load_server_metadata)

    def _oauth(self) -> OAuth2Client:
        """authlib's OAuth 2.0 client, for the grants its OpenID client does not make."""
        return OAuth2Client(**self._credentials)

    def start(self, redirect_uri: str) -> Authorization:
        self._metadata()
        made = _asking(lambda: self._client.create_authorization_url(redirect_uri))
        return Authorization(made["url"], made["state"], made["code_verifier"], made["nonce"])

    def finish(self, authorization: Authorization, redirect_uri: str, code: str) -> Vouched:
        self._metadata()
        token = _asking(
            lambda: self._client.fetch_access_token(
                redirect_uri=redirect_uri, code=code, code_verifier=authorization.code_verifier
            )
        )
        return self._vouched(token, authorization.nonce, None)

    def refresh(self, refresh_token: str, subject: str) -> Vouched:
        metadata = self._metadata()

        def ask() -> Any:
            with self._oauth() as client:
                return client.refresh_token(metadata["token_endpoint"], refresh_token=refresh_token)

        vouched = self._vouched(_asking(ask), None, subject)
        if vouched.refresh_token is None:  # the provider keeps the one it gave
            return Vouched(vouched.identity, refresh_token)
        return vouched

    def start_device(self) -> DeviceCode:
        metadata = self._metadata()
        endpoint = metadata.get("device_authorization_endpoint")
        if not endpoint:
            raise Invalid(f"the identity provider at {self._issuer} offers no device sign-in")

        def ask() -> Any:
            with self._oauth() as client:
                auth = client.client_auth(client.token_endpoint_auth_method)
                answer = client.request(
                    "POST",
                    endpoint,
                    data={"client_id": client.client_id, "scope": client.scope},
                    auth=auth,
                    withhold_token=True,
                )
                if 400 <= answer.status_code < 500:
                    raise Invalid(
                        f"the identity provider refused a device sign-in ({answer.status_code}: "
                        f"{answer.text[:200]}): is the device grant allowed for this client?"
                    )
                answer.raise_for_status()
                return answer.json()

        got = _asking(ask)
        try:
            return DeviceCode(
                device_code=str(got["device_code"]),
                user_code=str(got["user_code"]),
                verification_uri=str(got["verification_uri"]),
                verification_uri_complete=got.get("verification_uri_complete"),
                expires_in=int(got["expires_in"]),
                interval=int(got.get("interval", 5)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise Unavailable(f"the identity provider's device answer lacks {exc}") from None

    def poll_device(self, device_code: str) -> Vouched | None:
        metadata = self._metadata()

        def ask() -> Any:
            with self._oauth() as client:
                return client.fetch_token(
                    metadata["token_endpoint"],
                    grant_type=DEVICE_CODE_GRANT_TYPE,
                    device_code=device_code,
                )

        try:
            token = ask()
        except OAuthError as exc:
            if exc.error in PENDING:
                return None
            raise _refused(exc) from None
        except Exception as exc:
            raise Unavailable(f"the identity provider did not answer ({exc})") from None
        return self._vouched(token, None, None)

    def _vouched(self, token: Mapping[str, Any], nonce: str | None, subject: str | None) -> Vouched:
        claims: dict[str, Any] = {}
        if "id_token" in token:
            try:
                claims.update(self._client.parse_id_token(dict(token), nonce, leeway=LEEWAY_S))
            except JoseError as exc:
                raise Unauthenticated(
                    f"the identity provider's ID token is not valid ({exc})"
                ) from None
        elif nonce is not None:
            raise Unauthenticated("the identity provider answered a sign-in without an ID token")
        if self._metadata().get("userinfo_endpoint"):
            info = _asking(lambda: self._client.userinfo(token=dict(token)))
            if claims and info.get("sub") != claims.get("sub"):
                raise Unauthenticated("the identity provider's userinfo names another subject")
            claims.update(info)
        found = claims.get("sub")
        if not isinstance(found, str) or not found:
            raise Unauthenticated("the identity provider named no subject")
        if subject is not None and found != subject:
            raise Unauthenticated("the identity provider now names another subject")
        email = claims.get("email")
        return Vouched(
            Identity(
                issuer=self._issuer,
                subject=found,
                email=email if isinstance(email, str) and email else None,
                groups=_groups(claims.get(self._group_claim)),
            ),
            token.get("refresh_token"),
        )


def _groups(value: Any) -> tuple[str, ...]:
    """A group claim: a list of names (or one name); anything else is no group."""
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list):
        return tuple(v for v in value if isinstance(v, str))
    return ()


def _refused(exc: OAuthError) -> Unauthenticated:
    said = f": {exc.description}" if exc.description else ""
    return Unauthenticated(f"the identity provider refused ({exc.error}{said})")


def _asking(call: Any) -> Any:
    """Ask the provider; its refusal is Unauthenticated, anything else Unavailable."""
    try:
        return call()
    except OAuthError as exc:
        raise _refused(exc) from None
    except (Unauthenticated, Unavailable, Invalid):
        raise
    except Exception as exc:
        raise Unavailable(
            f"the identity provider did not answer ({type(exc).__name__}: {exc})"
        ) from None
