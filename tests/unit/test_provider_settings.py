"""Provider settings: keys from the environment or a file, never in a URL, each provider
built only when it is configured, and a configuration that cannot work refused at start."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from governor.adapters.providers.aws import Ec2Provider
from governor.adapters.providers.aws_billing import BilledEc2Provider
from governor.adapters.providers.gcp import GcpProvider
from governor.adapters.providers.gcp_billing import BilledGcpProvider
from governor.adapters.providers.kubernetes import KubernetesProvider
from governor.adapters.providers.kueue import KueueProvider
from governor.adapters.providers.lambda_cloud import LambdaProvider
from governor.adapters.providers.local import LocalCommandProvider, LocalProvider
from governor.adapters.providers.runpod import RunPodProvider
from governor.adapters.providers.vast import VastProvider
from governor.bootstrap import ProviderSetupError, build_providers
from governor.cli import main
from governor.domain.ports import ReportsWindowedBilling, Resumes
from governor.fakes.cloud import BillingFakeProvider, FakeProvider
from governor.fakes.gcp import FakeGcp
from governor.settings import load_settings
from tests.clock import FrozenClock
from tests.gcp_keys import EMAIL, key_file


def test_without_a_key_only_the_fake_provider_is_built() -> None:
    assert set(build_providers(load_settings(), FrozenClock())) == {"fake"}


def test_a_key_builds_the_runpod_provider() -> None:
    providers = build_providers(load_settings(runpod_api_key="k"), FrozenClock())
    assert isinstance(providers["runpod"], RunPodProvider)


def test_the_key_can_come_from_a_file(tmp_path: Path) -> None:
    key_file = tmp_path / "runpod.key"
    key_file.write_text("rpa_FROM_FILE\n")
    settings = load_settings(runpod_api_key_file=key_file)
    assert settings.runpod_api_key is not None
    assert settings.runpod_api_key.get_secret_value() == "rpa_FROM_FILE"
    assert "rpa_FROM_FILE" not in repr(settings)


def test_an_empty_key_file_is_refused(tmp_path: Path) -> None:
    key_file = tmp_path / "runpod.key"
    key_file.write_text("\n")
    with pytest.raises(ValidationError, match="is empty"):
        load_settings(runpod_api_key_file=key_file)


def test_a_key_in_the_url_is_refused() -> None:
    with pytest.raises(ValidationError, match="keep the key out of the URL"):
        load_settings(runpod_url="https://api.runpod.io/graphql?api_key=rpa_X")


@pytest.mark.parametrize(
    ("settings", "name", "kind"),
    [
        ({"vast_api_key": "k"}, "vast", VastProvider),
        ({"lambda_api_key": "k"}, "lambda", LambdaProvider),
        ({"gcp_project": "p", "gcp_access_token": "t"}, "gcp", GcpProvider),
        ({"aws_region": "us-east-1"}, "aws", Ec2Provider),
        (
            {"kubernetes_url": "https://k8s.test", "kubernetes_token": "t"},
            "kubernetes",
            KubernetesProvider,
        ),
        ({"local_stop_signal": "SIGINT"}, "local", LocalProvider),
        ({"local_stop_command": '["true", "{ref}"]'}, "local", LocalProvider),
        ({"fake_billing_factor": "1.1"}, "fake", BillingFakeProvider),
    ],
)
def test_each_provider_is_built_once_configured(
    settings: dict[str, str], name: str, kind: type
) -> None:
    providers = build_providers(load_settings(**settings), FrozenClock())
    assert isinstance(providers[name], kind)
    assert set(providers) == {"fake", name}


@pytest.mark.parametrize(
    ("settings", "name", "kind"),
    [
        (
            {
                "gcp_project": "p",
                "gcp_access_token": "t",
                "gcp_billing_table": "my-project.billing.export_1",
            },
            "gcp",
            BilledGcpProvider,
        ),
        ({"aws_region": "us-east-1", "aws_billing": "true"}, "aws", BilledEc2Provider),
    ],
)
def test_billing_settings_build_the_adapters_that_read_bills(
    settings: dict[str, str], name: str, kind: type
) -> None:
    plain = build_providers(
        load_settings(**{k: settings[k] for k in list(settings)[:-1]}), FrozenClock()
    )
    assert not isinstance(plain[name], ReportsWindowedBilling)  # off unless asked for
    billed = build_providers(load_settings(**settings), FrozenClock())[name]
    assert isinstance(billed, kind) and isinstance(billed, ReportsWindowedBilling)


def test_a_billing_table_that_is_no_table_name_stops_the_start() -> None:
    settings = load_settings(
        gcp_project="p", gcp_access_token="t", gcp_billing_table="billing; DROP TABLE x"
    )
    with pytest.raises(ProviderSetupError, match="GOVERNOR_GCP_BILLING_TABLE") as caught:
        build_providers(settings, FrozenClock())
    assert "give the export's project.dataset.table" in str(caught.value)


def test_the_plain_fake_does_not_report_billing() -> None:
    assert type(build_providers(load_settings(), FrozenClock())["fake"]) is FakeProvider


def test_every_key_can_come_from_a_file(tmp_path: Path) -> None:
    for name in ("vast_api_key", "lambda_api_key", "gcp_access_token"):
        key_file = tmp_path / name
        key_file.write_text(f"{name}-FROM-FILE\n")
        secret = getattr(load_settings(**{f"{name}_file": key_file}), name)
        assert secret.get_secret_value() == f"{name}-FROM-FILE"


def test_rates_are_json_objects_of_decimals() -> None:
    settings = load_settings(gcp_rates='{"a2-highgpu-1g": "3.67"}', aws_rates='{"p5": 98.32}')
    assert str(settings.gcp_rates["a2-highgpu-1g"]) == "3.67"
    assert str(settings.aws_rates["p5"]) == "98.32"
    with pytest.raises(ValidationError, match="not a JSON object of rates"):
        load_settings(gcp_rates="a2=3.67")


def test_a_resume_command_makes_the_local_provider_resume() -> None:
    stop_only = build_providers(load_settings(local_stop_command='["true"]'), FrozenClock())
    assert not isinstance(stop_only["local"], Resumes)
    settings = load_settings(
        local_stop_command='["systemctl", "stop", "{ref}"]',
        local_resume_command='["systemctl", "start", "{ref}"]',
    )
    local = build_providers(settings, FrozenClock())["local"]
    assert isinstance(local, LocalCommandProvider) and isinstance(local, Resumes)


def test_a_resume_command_without_a_stop_command_is_refused() -> None:
    with pytest.raises(ProviderSetupError, match="GOVERNOR_LOCAL_STOP_COMMAND"):
        build_providers(load_settings(local_resume_command='["true"]'), FrozenClock())


def test_an_unknown_signal_is_refused_naming_it() -> None:
    with pytest.raises(ProviderSetupError, match="'SIGNOPE' is not a signal name"):
        build_providers(load_settings(local_stop_signal="SIGNOPE"), FrozenClock())


def test_kubernetes_needs_a_token_with_its_url() -> None:
    with pytest.raises(ProviderSetupError, match="GOVERNOR_KUBERNETES_TOKEN"):
        build_providers(load_settings(kubernetes_url="https://k8s.test"), FrozenClock())


def test_aws_without_boto3_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "governor.adapters.providers.aws", None)
    with pytest.raises(ProviderSetupError, match=r"pip install 'gpu-governor\[aws\]'"):
        build_providers(load_settings(aws_region="us-east-1"), FrozenClock())


def test_gcp_without_a_token_uses_application_default_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeGcp(tmp_path / "gcp.json", "unused")
    key = key_file(tmp_path, fake, "http://127.0.0.1:1")  # nothing is fetched at start
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
    gcp = build_providers(load_settings(gcp_project="p"), FrozenClock())["gcp"]
    assert isinstance(gcp, GcpProvider)
    assert gcp.credential == f"a service-account key file ({EMAIL})"


def test_gcp_without_any_credentials_says_where_they_are_looked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path))
    monkeypatch.setenv("NO_GCE_CHECK", "True")
    with pytest.raises(ProviderSetupError, match="GOOGLE_APPLICATION_CREDENTIALS"):
        build_providers(load_settings(gcp_project="p"), FrozenClock())


def test_gcp_without_google_auth_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "governor.adapters.providers.gcp_auth", None)
    with pytest.raises(ProviderSetupError, match=r"pip install 'gpu-governor\[gcp\]'"):
        build_providers(load_settings(gcp_project="p"), FrozenClock())
    providers = build_providers(load_settings(gcp_project="p", gcp_access_token="t"), FrozenClock())
    assert providers["gcp"].credential == "a static access token (never refreshed)"


def test_a_kubernetes_token_file_is_enough_with_the_url(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("k8s-token\n")
    settings = load_settings(kubernetes_url="https://k8s.test", kubernetes_token_file=token_file)
    assert isinstance(build_providers(settings, FrozenClock())["kubernetes"], KubernetesProvider)


def _kubeconfig(path: Path, context: str = "dev") -> Path:
    """A kubeconfig whose user is a bearer token; nothing is fetched at start."""
    user = {"name": "u", "user": {"token": "k8s-kubeconfig-token"}}
    path.write_text(
        json.dumps(
            {
                "clusters": [{"name": "c", "cluster": {"server": "https://k8s.test:6443"}}],
                "users": [user],
                "contexts": [{"name": context, "context": {"cluster": "c", "user": "u"}}],
                "current-context": context,
            }
        )
    )
    return path


@pytest.fixture
def no_kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home without ~/.kube/config and no KUBECONFIG: only what a test sets is found."""
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def test_kubernetes_reads_the_kubeconfig_setting_and_its_context(no_kubeconfig: Path) -> None:
    path = _kubeconfig(no_kubeconfig / "config")
    settings = load_settings(kubernetes_kubeconfig=path, kubernetes_context="dev")
    kubernetes = build_providers(settings, FrozenClock())["kubernetes"]
    assert kubernetes.credential == f"kubeconfig {path} (context dev)"


def test_kubernetes_finds_kubeconfig_then_the_home_one(
    no_kubeconfig: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "kubernetes" not in build_providers(load_settings(), FrozenClock())
    (no_kubeconfig / ".kube").mkdir()
    home = _kubeconfig(no_kubeconfig / ".kube" / "config", "home")
    found = build_providers(load_settings(), FrozenClock())["kubernetes"]
    assert found.credential == f"kubeconfig {home} (context home)"
    named = _kubeconfig(no_kubeconfig / "named", "named")
    monkeypatch.setenv("KUBECONFIG", str(named))
    found = build_providers(load_settings(), FrozenClock())["kubernetes"]
    assert found.credential == f"kubeconfig {named} (context named)"
    explicit = load_settings(kubernetes_url="https://k8s.test", kubernetes_token="t")
    overridden = build_providers(explicit, FrozenClock())["kubernetes"]
    assert overridden.credential == "GOVERNOR_KUBERNETES_TOKEN"


def test_kubernetes_with_an_unknown_context_is_refused(no_kubeconfig: Path) -> None:
    settings = load_settings(
        kubernetes_kubeconfig=_kubeconfig(no_kubeconfig / "config"), kubernetes_context="prod"
    )
    with pytest.raises(ProviderSetupError, match="prod"):
        build_providers(settings, FrozenClock())


def test_kubernetes_kubeconfig_without_the_client_says_what_to_install(
    no_kubeconfig: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "governor.adapters.providers.kube_auth", None)
    settings = load_settings(kubernetes_kubeconfig=_kubeconfig(no_kubeconfig / "config"))
    with pytest.raises(ProviderSetupError, match=r"pip install 'gpu-governor\[kubernetes\]'"):
        build_providers(settings, FrozenClock())
    explicit = load_settings(kubernetes_url="https://k8s.test", kubernetes_token="t")
    assert isinstance(build_providers(explicit, FrozenClock())["kubernetes"], KubernetesProvider)


def test_a_refused_setting_is_named_with_the_validators_own_words(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GOVERNOR_GCP_RATES", "not json")
    assert main(["migrate"]) == 2  # refused before anything else runs
    assert capsys.readouterr().err.startswith(
        "governor: invalid setting GOVERNOR_GCP_RATES: not a JSON object of rates"
    )


def test_kueue_answers_on_the_kubernetes_clusters_credentials_under_its_controller_name() -> None:
    settings = load_settings(
        kubernetes_url="https://k8s.test",
        kubernetes_token="t",
        kueue_enabled="true",
        kueue_controller_name="example.com/budget",
    )
    providers = build_providers(settings, FrozenClock())
    assert set(providers) == {"fake", "kubernetes", "kueue"}
    kueue = providers["kueue"]
    assert isinstance(kueue, KueueProvider) and kueue.controller == "example.com/budget"
    assert kueue.credential == "GOVERNOR_KUBERNETES_TOKEN"


def test_kueue_without_a_kubernetes_cluster_stops_the_start() -> None:
    with pytest.raises(ProviderSetupError, match="GOVERNOR_KUEUE_ENABLED needs a Kubernetes"):
        build_providers(load_settings(kueue_enabled="true"), FrozenClock())
