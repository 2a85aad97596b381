"""Kubernetes credentials as their users already have them, through the official client's
configuration loader (the `kubernetes` extra): a kubeconfig's context (a bearer token, a
client certificate, an exec credential plugin such as EKS's, GKE's or AKS's), or the
in-cluster service account.

The loader is used for credentials only: the adapter's calls stay on httpx, with the API
server, CA bundle and client certificate the loader found and the Authorization header it
would send. That header is asked for at every call, through the loader's refresh hook,
which runs an exec plugin again once its credential expires (the loader counts five minutes
early) and re-reads a rotated service-account token. After a 401 the credentials are loaded
afresh. A cluster's `tls-server-name` is the name the API server's certificate is checked
against (and sent as SNI) when it differs from the server URL's host. No error or log line
carries a token or a key.
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable
from functools import partial

import httpx
from kubernetes.client import Configuration
from kubernetes.config import (
    ConfigException,
    list_kube_config_contexts,
    load_incluster_config,
    load_kube_config,
)

from governor.domain.ports import ProviderError

TIMEOUT = httpx.Timeout(10.0, connect=5.0)


class LoadedCredentials:
    """Implements the Kubernetes adapter's Credentials with what the loader reads.

    Built by `kubeconfig` or `in_cluster`; `credential` names the kubeconfig and context,
    or the in-cluster service account."""

    def __init__(self, kubeconfig: str | None, context: str | None, credential: str) -> None:
        self.credential = credential
        self._kubeconfig = kubeconfig
        self._context = context
        self._lock = threading.Lock()  # one load or refresh at a time
        self._configuration = self._load()
        self._tls = _tls(self._configuration)
        self._client = _client(self._configuration)

    @classmethod
    def kubeconfig(cls, path: str, context: str | None = None) -> LoadedCredentials:
        """A kubeconfig's `context` (its current context when None); `path` may list several
        files, joined with ':' as in KUBECONFIG, merged as kubectl merges them."""
        try:
            _contexts, current = list_kube_config_contexts(config_file=path)
        except (ConfigException, OSError, ValueError) as exc:
            raise _failed(f"kubeconfig {path}", exc) from None
        name = context or (current or {}).get("name")
        return cls(path, context, f"kubeconfig {path} (context {name})")

    @classmethod
    def in_cluster(cls) -> LoadedCredentials:
        return cls(None, None, "the in-cluster service account")

    @property
    def url(self) -> str:
        return str(self._configuration.host)

    def client(self) -> httpx.Client:
        return self._client

    def authorization(self) -> str | None:
        with self._lock:  # runs the refresh hook: an expired exec credential is renewed
            header = self._configuration.get_api_key_with_prefix(
                "BearerToken", alias="authorization"
            )
        return header.strip() if header else None  # a token file may end in a newline

    def reload(self) -> bool:
        """Loads the credentials afresh (an exec plugin is run again); a new client only if
        the CA or client certificate changed. Never raises: a failed load keeps the old."""
        with self._lock:
            try:
                configuration = self._load()
            except ProviderError:
                return False
            if _tls(configuration) != self._tls:
                self._client, self._tls = _client(configuration), _tls(configuration)
            self._configuration = configuration
        return True

    def _load(self) -> Configuration:
        configuration = Configuration()
        try:
            if self._kubeconfig is None:
                load_incluster_config(client_configuration=configuration)
            else:
                load_kube_config(
                    config_file=self._kubeconfig,
                    context=self._context,
                    client_configuration=configuration,
                    persist_config=False,
                )
        except (ConfigException, OSError, ValueError) as exc:
            raise _failed(self.credential, exc) from None
        if not str(configuration.host).startswith(("https://", "http://")):
            raise ProviderError(
                f"kubernetes: {self.credential} names no API server", retryable=False
            )
        return configuration


def _tls(configuration: Configuration) -> tuple[object, ...]:
    """What the httpx client is built from: the CA bundle, the client certificate and key,
    whether the server is verified, the name its certificate is checked against, and any
    proxy."""
    return (
        configuration.ssl_ca_cert,
        configuration.cert_file,
        configuration.key_file,
        configuration.verify_ssl,
        configuration.tls_server_name,
        configuration.proxy,
    )


def _client(configuration: Configuration) -> httpx.Client:
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    if not configuration.verify_ssl:  # the kubeconfig's insecure-skip-tls-verify
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file)
    hooks: dict[str, list[Callable[[httpx.Request], None]]] = {}
    if configuration.tls_server_name:  # the certificate names the server otherwise than its URL
        hooks["request"] = [partial(_server_name, str(configuration.tls_server_name))]
    return httpx.Client(
        timeout=TIMEOUT, verify=context, proxy=configuration.proxy, event_hooks=hooks
    )


def _server_name(name: str, request: httpx.Request) -> None:
    """Has the TLS handshake send `name` as SNI and check the certificate against it."""
    request.extensions["sni_hostname"] = name


def _failed(credential: str, exc: Exception) -> ProviderError:
    """A load that failed, said in the loader's own first words (they name files and
    fields, never their contents)."""
    said = str(exc.args[0]) if exc.args else type(exc).__name__
    return ProviderError(f"kubernetes could not load {credential}: {said[:300]}", retryable=False)
