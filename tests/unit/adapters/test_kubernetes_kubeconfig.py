"""Kubernetes credentials read by the official client's loader, against the fake API server
over TLS (certificates made by trustme): a kubeconfig whose user is an exec credential
plugin, one whose user is a client certificate, and the in-cluster service account.

The plugin is a small script that prints an ExecCredential with the token and expiry the
test wrote and counts its runs, so the tests see it run again once its credential expires
(an expirationTimestamp in the past) and after a 401, without waiting. The fake accepts its
bearer token, or a client certificate its client CA verifies. No token or key reaches an
error or a log line. A cluster whose certificate names it otherwise than its URL's host is
reached through the kubeconfig's `tls-server-name`.
"""

from __future__ import annotations

import base64
import json
import logging
import ssl
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import trustme
from kubernetes.config import incluster_config

from governor.adapters.providers.kube_auth import LoadedCredentials
from governor.adapters.providers.kubernetes import KubernetesProvider
from governor.domain.model import PodState
from governor.domain.ports import CallOutcome, ProviderError
from governor.fakes.kubernetes import FakeKubernetes, serve_tls

TOKEN = "eyJhbGciOiJSUzI1NiJ9.EXEC_PLUGIN_SECRET_TOKEN.c2lnbmF0dXJl"
JOB = "ml/job/train-llama"
PLUGIN = """
import json, pathlib, sys
here = pathlib.Path(sys.argv[1])
runs = here / "runs"
runs.write_text(str(int(runs.read_text()) + 1 if runs.exists() else 1))
token, expires = (here / "token").read_text(), (here / "expires").read_text()
status = {"token": token, "expirationTimestamp": expires}
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": status}))
"""


SERVER_NAME = "api.cluster.internal"  # what the named server's certificate says, alone


class Certificates:
    """The cluster's CA and serving certificates (one for its address, one for SERVER_NAME
    only), and a client CA with one user's certificate."""

    def __init__(self) -> None:
        self.ca = trustme.CA()
        self.server = self.ca.issue_cert("127.0.0.1")
        self.named_server = self.ca.issue_cert(SERVER_NAME)
        self.client_ca = trustme.CA()
        self.user = self.client_ca.issue_cert("gpu-governor.example", common_name="gpu-governor")

    def server_context(self, *, named: bool = False) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        (self.named_server if named else self.server).configure_cert(context)
        self.client_ca.configure_trust(context)
        context.verify_mode = ssl.CERT_OPTIONAL  # a certificate, or else a bearer token
        return context

    def key_lines(self) -> list[str]:
        pem = self.user.private_key_pem.bytes().decode()
        return [line for line in pem.splitlines() if line and "PRIVATE KEY" not in line]


class Plugin:
    """The exec plugin's answers, written by the test, and how often it ran."""

    def __init__(self, here: Path) -> None:
        self.here = here
        self.script = here / "plugin.py"
        self.script.write_text(PLUGIN)

    def issue(self, token: str, valid_for: timedelta) -> None:
        (self.here / "token").write_text(token)
        expires = datetime.now(UTC) + valid_for
        (self.here / "expires").write_text(expires.strftime("%Y-%m-%dT%H:%M:%SZ"))

    def runs(self) -> int:
        runs = self.here / "runs"
        return int(runs.read_text()) if runs.exists() else 0


class Cluster:
    def __init__(self, fake: FakeKubernetes, url: str, certificates: Certificates) -> None:
        self.fake, self.url, self.certificates = fake, url, certificates

    def kubeconfig(
        self, path: Path, users: dict[str, dict[str, Any]], **cluster_fields: str
    ) -> Path:
        """A kubeconfig with one context per user, named as the user; the first is current.
        `cluster_fields` go into the cluster entry (e.g. tls-server-name)."""
        ca = base64.b64encode(self.certificates.ca.cert_pem.bytes()).decode()
        cluster = {"server": self.url, "certificate-authority-data": ca, **cluster_fields}
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": cluster}],
            "users": [{"name": name, "user": user} for name, user in users.items()],
            "contexts": [
                {"name": name, "context": {"cluster": "fake", "user": name}} for name in users
            ],
            "current-context": next(iter(users)),
        }
        path.write_text(json.dumps(config))  # JSON is YAML
        return path

    def suspended(self) -> bool:
        return self.fake.workloads[JOB].spec["suspend"] is True


@pytest.fixture(scope="module")
def certificates() -> Certificates:
    return Certificates()


@contextmanager
def serving(tmp_path: Path, certificates: Certificates, *, named: bool) -> Iterator[Cluster]:
    """The fake cluster on 127.0.0.1 over TLS; `named`: its certificate names SERVER_NAME
    only, not the address it is reached at."""
    fake = FakeKubernetes(tmp_path / "kubernetes.json", TOKEN)
    fake.add_pod(JOB, "2.50")
    server = serve_tls(fake, certificates.server_context(named=named))
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    try:
        yield Cluster(fake, f"https://127.0.0.1:{server.server_port}", certificates)
    finally:
        server.shutdown()
        server.server_close()
    assert fake.calls("DELETE") == []


@pytest.fixture
def cluster(tmp_path: Path, certificates: Certificates) -> Iterator[Cluster]:
    with serving(tmp_path, certificates, named=False) as cluster:
        yield cluster


@pytest.fixture
def named_cluster(tmp_path: Path, certificates: Certificates) -> Iterator[Cluster]:
    with serving(tmp_path, certificates, named=True) as cluster:
        yield cluster


@pytest.fixture
def plugin(tmp_path: Path) -> Plugin:
    here = tmp_path / "plugin"
    here.mkdir()
    return Plugin(here)


def exec_user(plugin: Plugin) -> dict[str, Any]:
    return {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": sys.executable,
            "args": [str(plugin.script), str(plugin.here)],
            "interactiveMode": "Never",
        }
    }


def certificate_user(certificates: Certificates) -> dict[str, Any]:
    user = certificates.user
    return {
        "client-certificate-data": base64.b64encode(user.cert_chain_pems[0].bytes()).decode(),
        "client-key-data": base64.b64encode(user.private_key_pem.bytes()).decode(),
    }


def test_an_exec_plugin_token_describes_and_stops_over_tls(
    cluster: Cluster, plugin: Plugin, tmp_path: Path
) -> None:
    plugin.issue(TOKEN, timedelta(hours=1))
    kubeconfig = cluster.kubeconfig(tmp_path / "config", {"eks": exec_user(plugin)})
    kubernetes = KubernetesProvider(LoadedCredentials.kubeconfig(str(kubeconfig)))
    assert kubernetes.credential == f"kubeconfig {kubeconfig} (context eks)"
    assert kubernetes.describe(JOB).state is PodState.RUNNING
    assert kubernetes.stop(JOB).outcome is CallOutcome.PENDING
    assert kubernetes.stop(JOB).outcome is CallOutcome.DONE
    assert cluster.suspended()
    assert plugin.runs() == 1  # an hour-long token serves every call


def test_an_expired_exec_credential_is_renewed_before_the_next_call(
    cluster: Cluster, plugin: Plugin, tmp_path: Path
) -> None:
    plugin.issue(TOKEN, timedelta(minutes=-1))  # still accepted: no 401 asks for a new one
    kubeconfig = cluster.kubeconfig(tmp_path / "config", {"eks": exec_user(plugin)})
    kubernetes = KubernetesProvider(LoadedCredentials.kubeconfig(str(kubeconfig), "eks"))
    assert plugin.runs() == 1
    plugin.issue(TOKEN, timedelta(hours=1))
    assert kubernetes.describe(JOB).state is PodState.RUNNING
    assert plugin.runs() == 2  # run again, because the credential had expired
    assert kubernetes.stop(JOB).outcome is CallOutcome.PENDING
    assert plugin.runs() == 2


def test_a_refused_exec_token_is_renewed_and_the_call_sent_once_more(
    cluster: Cluster, plugin: Plugin, tmp_path: Path
) -> None:
    plugin.issue("a-token-revoked-early", timedelta(hours=1))
    kubeconfig = cluster.kubeconfig(tmp_path / "config", {"eks": exec_user(plugin)})
    kubernetes = KubernetesProvider(LoadedCredentials.kubeconfig(str(kubeconfig)))
    plugin.issue(TOKEN, timedelta(hours=1))
    assert kubernetes.stop(JOB).outcome is CallOutcome.PENDING  # 401, new token, accepted
    assert plugin.runs() == 2 and cluster.suspended()
    assert kubernetes.stop(JOB).outcome is CallOutcome.DONE
    assert plugin.runs() == 2


def test_a_token_still_refused_after_renewal_is_permanent_and_never_quoted(
    cluster: Cluster, plugin: Plugin, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    refused = "eyJhbGciOiJSUzI1NiJ9.A_TOKEN_THE_CLUSTER_REFUSES.c2ln"
    plugin.issue(refused, timedelta(hours=1))
    kubeconfig = cluster.kubeconfig(tmp_path / "config", {"eks": exec_user(plugin)})
    kubernetes = KubernetesProvider(LoadedCredentials.kubeconfig(str(kubeconfig)))
    result = kubernetes.stop(JOB)
    assert result.outcome is CallOutcome.PERMANENT and "401" in result.detail
    assert plugin.runs() == 2  # renewed once, retried once, then given up
    with pytest.raises(ProviderError) as listing:
        kubernetes.pods()
    assert caplog.records, "expected the HTTP client to log its requests"
    for said in (result.detail, str(listing.value), caplog.text):
        assert refused not in said and TOKEN not in said
    assert not cluster.suspended()


def test_a_client_certificate_describes_and_stops_over_tls(
    cluster: Cluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    users = {"anonymous": {}, "kubelet": certificate_user(cluster.certificates)}
    kubeconfig = cluster.kubeconfig(tmp_path / "config", users)
    kubernetes = KubernetesProvider(LoadedCredentials.kubeconfig(str(kubeconfig), "kubelet"))
    assert kubernetes.credential == f"kubeconfig {kubeconfig} (context kubelet)"
    assert kubernetes.describe(JOB).state is PodState.RUNNING
    assert kubernetes.stop(JOB).outcome is CallOutcome.PENDING
    assert cluster.suspended()
    anonymous = KubernetesProvider(LoadedCredentials.kubeconfig(str(kubeconfig)))
    refused = anonymous.stop(JOB)  # neither a certificate nor a token: the fake refuses
    assert refused.outcome is CallOutcome.PERMANENT and "401" in refused.detail
    for line in cluster.certificates.key_lines():
        assert line not in caplog.text and line not in refused.detail


def test_the_in_cluster_service_account(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text(TOKEN)
    cluster.certificates.ca.cert_pem.write_to_path(str(ca))
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(ca))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", cluster.url.rsplit(":", 1)[1])
    kubernetes = KubernetesProvider(LoadedCredentials.in_cluster())
    assert kubernetes.credential == "the in-cluster service account"
    assert kubernetes.stop(JOB).outcome is CallOutcome.PENDING and cluster.suspended()


def test_a_missing_kubeconfig_or_context_is_refused_naming_it(
    cluster: Cluster, tmp_path: Path
) -> None:
    kubeconfig = cluster.kubeconfig(tmp_path / "config", {"eks": {"token": TOKEN}})
    with pytest.raises(ProviderError, match="nope") as unknown:
        LoadedCredentials.kubeconfig(str(kubeconfig), "nope")
    with pytest.raises(ProviderError, match=r"kubeconfig .*missing"):
        LoadedCredentials.kubeconfig(str(tmp_path / "missing"))
    assert unknown.value.retryable is False and TOKEN not in str(unknown.value)


def test_tls_server_name_is_the_name_the_certificate_is_checked_against(
    named_cluster: Cluster, tmp_path: Path
) -> None:
    users = {"kubelet": certificate_user(named_cluster.certificates)}
    plain = named_cluster.kubeconfig(tmp_path / "plain", users)
    by_address = KubernetesProvider(LoadedCredentials.kubeconfig(str(plain)))
    refused = by_address.stop(JOB)  # the certificate does not name 127.0.0.1
    assert refused.outcome is CallOutcome.RETRYABLE and not named_cluster.suspended()
    assert named_cluster.fake.calls() == []  # the handshake failed: no request reached it
    named = named_cluster.kubeconfig(tmp_path / "named", users, **{"tls-server-name": SERVER_NAME})
    kubernetes = KubernetesProvider(LoadedCredentials.kubeconfig(str(named)))
    assert kubernetes.describe(JOB).state is PodState.RUNNING
    assert kubernetes.stop(JOB).outcome is CallOutcome.PENDING
    assert named_cluster.suspended()
