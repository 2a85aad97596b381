"""The cloud providers' settings (GOVERNOR_<PROVIDER>_*): part of the server's Settings.

A provider exists only when its credentials (or, for AWS, its region; for on-prem, a stop
method) are set. Every key may instead be read from a file (`..._FILE`), the usual way
secrets reach a container; no key may sit in a URL.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator
from pydantic_settings import NoDecode

Rates = Annotated[dict[str, Decimal], NoDecode]
Url = Annotated[str, Field(pattern=r"^https?://")]
SECRET_FILES = {  # the key setting -> the setting naming a file that holds it
    "runpod_api_key": "runpod_api_key_file",
    "vast_api_key": "vast_api_key_file",
    "lambda_api_key": "lambda_api_key_file",
    "gcp_access_token": "gcp_access_token_file",
}


def json_setting(value: Any, empty: Any, shape: str) -> Any:
    """A setting given as JSON text in the environment, decoded; blank text is `empty`."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value) if value.strip() else empty
    except json.JSONDecodeError as exc:
        raise ValueError(f"not {shape} ({exc})") from None


class ProviderSettings(BaseModel):
    runpod_api_key: SecretStr | None = Field(
        None, description="RunPod API key; the runpod provider exists only when one is set."
    )
    runpod_api_key_file: Path | None = Field(
        None, description="A file holding the RunPod API key (instead of the key itself)."
    )
    runpod_url: Url = Field(
        "https://api.runpod.io/graphql",
        description="RunPod's GraphQL endpoint; billing and network volumes are read from its "
        "REST v2 API (/v2/...) on the same host, as RunPod serves it.",
    )
    runpod_stop_latency_s: float = Field(
        30.0, ge=0, description="Seconds a RunPod pod may bill after podStop."
    )
    runpod_volume_usd_per_gb_month: Decimal = Field(
        Decimal("0.10"), ge=0, description="RunPod volume disk price while the pod runs."
    )
    runpod_stopped_volume_usd_per_gb_month: Decimal = Field(
        Decimal("0.20"), ge=0, description="RunPod volume disk price while the pod is stopped."
    )
    runpod_high_performance_volume_usd_per_gb_month: Decimal = Field(
        Decimal("0.14"),
        ge=0,
        description="RunPod HIGH_PERFORMANCE network volume price, running or stopped (RunPod "
        "prices it at a premium over STANDARD's 0.07 and publishes no figure: set the console's).",
    )

    vast_api_key: SecretStr | None = Field(
        None, description="Vast.ai API key; the vast provider exists only when one is set."
    )
    vast_api_key_file: Path | None = Field(None, description="A file holding the Vast.ai key.")
    vast_url: Url = Field("https://console.vast.ai", description="Vast.ai's API host.")
    vast_stop_latency_s: float = Field(
        60.0, ge=0, description="Seconds a Vast.ai instance may bill after it is stopped."
    )

    lambda_api_key: SecretStr | None = Field(
        None, description="Lambda Cloud API key; the lambda provider exists only when one is set."
    )
    lambda_api_key_file: Path | None = Field(None, description="A file holding the Lambda key.")
    lambda_url: Url = Field("https://cloud.lambda.ai/api/v1", description="Lambda's API base.")
    lambda_stop_latency_s: float = Field(
        120.0, ge=0, description="Seconds a Lambda instance may bill after it is terminated."
    )
    lambda_filesystem_usd_per_gb_month: Decimal = Field(
        Decimal("0.20"),
        ge=0,
        description="Lambda's persistent filesystem price per GiB-month (Lambda bills per GiB "
        "used).",
    )

    gcp_project: str | None = Field(
        None, description="GCP project id; the gcp provider exists only when one is set."
    )
    gcp_access_token: SecretStr | None = Field(
        None,
        description="A static OAuth2 token, never refreshed (an explicit override); unset: "
        "Application Default Credentials through google-auth (the gcp extra).",
    )
    gcp_access_token_file: Path | None = Field(
        None, description="A file holding the OAuth2 access token."
    )
    gcp_url: Url = Field(
        "https://compute.googleapis.com/compute/v1", description="The Compute Engine API base."
    )
    gcp_rates: Rates = Field(
        default_factory=dict,
        description='$/hour by machine type, e.g. {"a2-highgpu-1g": "3.67", '
        '"a2-highgpu-1g:spot": "1.47"} (the API has no prices).',
    )
    gcp_disk_rates: Rates = Field(
        default_factory=dict,
        description="$/GiB-month by disk type, over pd-standard 0.04, pd-balanced 0.10, "
        "pd-ssd 0.17 and local-ssd 0.08 (local SSDs a stop keeps bill on).",
    )
    gcp_stop_latency_s: float = Field(
        90.0, ge=0, description="Seconds a GCP VM may bill after instances.stop."
    )
    gcp_billing_table: str | None = Field(
        None,
        description="Read GCP bills from the Cloud Billing resource-level export in BigQuery: "
        "its project.dataset.table (gcp_billing_export_resource_v1_<ACCOUNT>), queried from "
        "GOVERNOR_GCP_PROJECT with the same credentials; unset: no GCP bills are read.",
    )
    gcp_bigquery_url: Url = Field(
        "https://bigquery.googleapis.com/bigquery/v2", description="The BigQuery API base."
    )

    aws_region: str | None = Field(
        None,
        description="AWS region; the aws provider exists only when one is set (credentials: "
        "boto3's usual chain). Needs the aws extra.",
    )
    aws_endpoint_url: Url | None = Field(None, description="An EC2 endpoint other than AWS's.")
    aws_rates: Rates = Field(
        default_factory=dict,
        description='$/hour by instance type, e.g. {"p5.48xlarge": "98.32"} (the API has none).',
    )
    aws_ebs_usd_per_gb_month: Decimal = Field(
        Decimal("0.08"), ge=0, description="EBS price per GB-month (gp3 list price)."
    )
    aws_stop_latency_s: float = Field(
        30.0, ge=0, description="Seconds an EC2 instance may bill after StopInstances."
    )
    aws_billing: bool = Field(
        False,
        description="Read AWS bills from Cost Explorer (GetCostAndUsageWithResources, $0.01 a "
        "request; resource-level data enabled in the account's Cost Explorer preferences).",
    )
    aws_cost_explorer_url: Url | None = Field(
        None, description="A Cost Explorer endpoint other than AWS's."
    )
    aws_billing_min_interval_s: float = Field(
        86_400.0,
        ge=0,
        description="The least time between two Cost Explorer requests for one instance, "
        "counted in settled days past the bill already booked (kept in the database, so a "
        "restart or another replica does not ask again); at least a day whatever it says.",
    )
    aws_billing_settle_s: float = Field(
        24 * 3600.0,
        ge=0,
        description="How long after a day ends its Cost Explorer costs count as complete.",
    )

    kubernetes_kubeconfig: Path | None = Field(
        None,
        description="A kubeconfig (client certificates, tokens, exec plugins); unset: "
        "KUBECONFIG, then ~/.kube/config when present, then the in-cluster service account. "
        "Needs the kubernetes extra.",
    )
    kubernetes_context: str | None = Field(
        None, description="The kubeconfig context to use; unset: its current context."
    )
    kubernetes_url: Url | None = Field(
        None,
        description="The Kubernetes API server, with a token: overrides any kubeconfig.",
    )
    kubernetes_token: SecretStr | None = Field(None, description="A Kubernetes bearer token.")
    kubernetes_token_file: Path | None = Field(
        None, description="A file holding the Kubernetes bearer token (re-read at every call)."
    )
    kubernetes_ca_file: Path | None = Field(
        None, description="The cluster's CA certificate (PEM) to verify the API server with."
    )
    kubernetes_stop_latency_s: float = Field(
        60.0, ge=0, description="Seconds a workload's pods may run after it is suspended."
    )
    kueue_enabled: bool = Field(
        False,
        description="Answer Kueue's admission checks on the Kubernetes cluster configured above "
        "(its credentials), and register the Workloads Kueue admits as pods.",
    )
    kueue_controller_name: str = Field(
        "gpu-governor.io/budget",
        min_length=1,
        max_length=253,
        description="The spec.controllerName of the AdmissionChecks the governor answers.",
    )
    kueue_interval_s: float = Field(
        10.0,
        gt=0,
        le=3600,
        description="How often the leader keeps its AdmissionChecks Active and answers the "
        "Workloads waiting on them.",
    )

    local_stop_command: Annotated[list[str] | None, NoDecode] = Field(
        None,
        description='On-prem: the command that stops a pod, as a JSON list ("{ref}" is '
        'replaced), e.g. ["systemctl", "stop", "train@{ref}"].',
    )
    local_resume_command: Annotated[list[str] | None, NoDecode] = Field(
        None,
        description="On-prem: the command that starts a stopped pod again, as a JSON list "
        '("{ref}" is replaced), e.g. ["systemctl", "start", "train@{ref}"]; only with a stop '
        "command (a process stopped by a signal cannot be resumed).",
    )
    local_stop_signal: str | None = Field(
        None,
        description="On-prem: the signal sent to the pod's process (ref: a pid or "
        "pidfile:/path), e.g. SIGTERM.",
    )
    local_command_timeout_s: float = Field(
        30.0, gt=0, description="On-prem: how long the stop or resume command may run."
    )
    local_stop_latency_s: float = Field(
        90.0, ge=0, description="Seconds an on-prem pod may bill after it is asked to stop."
    )

    @field_validator("gcp_rates", "gcp_disk_rates", "aws_rates", mode="before")
    @classmethod
    def _json_rates(cls, value: Any) -> Any:
        return json_setting(value, {}, 'a JSON object of rates, e.g. {"type": "2.50"}')

    @field_validator("local_stop_command", "local_resume_command", mode="before")
    @classmethod
    def _json_command(cls, value: Any) -> Any:
        return json_setting(value, None, 'a JSON list, e.g. ["systemctl", "stop", "{ref}"]')

    @field_validator("runpod_url", "vast_url", "lambda_url", "gcp_url", "kubernetes_url")
    @classmethod
    def _no_key_in_url(cls, url: str | None) -> str | None:
        if url is not None and ("api_key" in url or "token=" in url):
            raise ValueError("keep the key out of the URL: set the provider's key setting")
        return url

    @model_validator(mode="after")
    def _secret_files(self) -> ProviderSettings:
        for key, file in SECRET_FILES.items():
            path = getattr(self, file)
            if path is None or getattr(self, key) is not None:
                continue
            secret = path.read_text().strip()
            if not secret:
                raise ValueError(f"GOVERNOR_{file.upper()} {path} is empty")
            setattr(self, key, SecretStr(secret))
        return self
