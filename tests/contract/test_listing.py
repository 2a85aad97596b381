"""What every adapter's listing tells of each pod, against a fake of its cloud over HTTP, the
requests and answers held to the provider's own definitions (the suite's `off_spec`): a pod
labelled the provider's own way (its labels or tags; for a provider with none, labels written
in its name) is listed with those labels, billing, with its name and GPUs where the provider
says them."""

from __future__ import annotations

from governor.domain.launch_labels import BUDGET_LABEL, LAUNCH_LABEL
from governor.domain.ports import ListsPods
from tests.contract.conftest import Governed

LABELS = {BUDGET_LABEL: "llama-lora", LAUNCH_LABEL: "launch-7", "team": "nlp"}


def test_the_listing_reads_each_pods_labels_name_gpus_and_billing(governed: Governed) -> None:
    adapter = governed.adapter
    assert isinstance(adapter, ListsPods)
    ref = governed.harness.labelled(governed.cloud, dict(LABELS))
    listed = {pod.ref: pod for pod in adapter.pods()}
    assert governed.harness.running in listed and ref in listed
    pod = listed[ref]
    assert pod.billing
    assert {k: pod.labels[k] for k in LABELS} == LABELS  # EC2 may add its own tags: not here
    assert pod.name is None or (isinstance(pod.name, str) and pod.name)
    assert pod.gpu_count is None or pod.gpu_count >= 1
    plain = listed[governed.harness.running]
    assert BUDGET_LABEL not in plain.labels and plain.billing


def test_a_stopped_pod_is_listed_but_does_not_bill(governed: Governed) -> None:
    adapter, ref = governed.adapter, governed.harness.running
    subject = governed.subject
    for _ in range(50):
        if subject.halt(ref).outcome.value == "done":
            break
    listed = {pod.ref: pod for pod in adapter.pods()}  # type: ignore[union-attr]
    assert ref not in listed or not listed[ref].billing
