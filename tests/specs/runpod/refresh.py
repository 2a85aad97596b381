"""Refresh RunPod's own definitions of its API, vendored beside this script; the tests read
them and never fetch anything.

    python tests/specs/runpod/refresh.py

Writes, from the sources pinned below (change a pin to move to a newer release):
- sdk.graphql: the pod query and mutation documents of RunPod's Python SDK (`runpod` on
  PyPI), rendered by the wheel's own `runpod/api/queries/pods.py` and
  `runpod/api/mutations/pods.py`;
- cli.graphql: the documents RunPod's CLI (runpodctl) sends, from its `api/pod.go`;
- cli-pod.json: the types the CLI decodes a GraphQL Pod's fields into (`type Pod struct`);
- rest-v1-pod.json: the Pod schema of RunPod's REST v1 OpenAPI document (field types, the
  `desiredStatus` enum and the descriptions of the disks);
- rest-v2-openapi.json: RunPod's REST v2 OpenAPI document, whole (a pod's mounts, a network
  volume's size and tier, the error body).
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from types import ModuleType

import httpx

HERE = Path(__file__).parent
SDK_VERSION = "1.12.0"
CLI_COMMIT = "2e2df89e1fcb6a16632017a14385552005913732"
DOCS_COMMIT = "a900806e253c4f8c16da27d1a4370e72456da4cb"
CLI_POD_GO = f"https://raw.githubusercontent.com/runpod/runpodctl/{CLI_COMMIT}/api/pod.go"
DOCS = f"https://raw.githubusercontent.com/runpod/docs/{DOCS_COMMIT}"
REST_V1 = f"{DOCS}/api-reference/openapi.json"
REST_V2 = f"{DOCS}/api-reference-v2/openapi.json"
POD_ID = "POD_ID"  # what the SDK's generators are given for a pod's id


def sdk_documents(wheel: Path) -> str:
    """The SDK's pod documents, rendered by its own generators."""
    with tempfile.TemporaryDirectory() as unpacked:
        zipfile.ZipFile(wheel).extractall(unpacked)
        api = Path(unpacked, "runpod", "api")
        queries, mutations = (
            _module(api / "queries" / "pods.py"),
            _module(api / "mutations" / "pods.py"),
        )
    documents = {
        "QUERY_POD": queries.QUERY_POD,
        "generate_pod_query": queries.generate_pod_query(POD_ID),
        "generate_pod_stop_mutation": mutations.generate_pod_stop_mutation(POD_ID),
        "generate_pod_resume_mutation": mutations.generate_pod_resume_mutation(POD_ID, 1),
        "generate_pod_terminate_mutation": mutations.generate_pod_terminate_mutation(POD_ID),
    }
    return "".join(
        f"# runpod {SDK_VERSION}: {name}\n{text.strip()}\n\n" for name, text in documents.items()
    )


def cli_documents(pod_go: str) -> str:
    return "".join(
        f"# runpodctl api/pod.go\n{text.strip()}\n\n"
        for text in re.findall(r"Query:\s*`([^`]*)`", pod_go)
    )


def cli_pod_types(pod_go: str) -> dict[str, str]:
    """The Go type of each scalar field of `type Pod struct`, by its GraphQL name."""
    body = re.search(r"type Pod struct \{([^}]*)\}", pod_go)
    assert body is not None, "api/pod.go has no Pod struct"
    fields = (line.split() for line in body.group(1).splitlines() if line.strip())
    return {name[0].lower() + name[1:]: kind for name, kind in fields if not kind.startswith("*")}


def _module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        pip = [sys.executable, "-m", "pip", "download", f"runpod=={SDK_VERSION}", "--no-deps"]
        subprocess.run([*pip, "-d", folder], check=True)
        [wheel] = Path(folder).glob("runpod-*.whl")
        (HERE / "sdk.graphql").write_text(sdk_documents(wheel))
    pod_go = httpx.get(CLI_POD_GO, follow_redirects=True).raise_for_status().text
    (HERE / "cli.graphql").write_text(cli_documents(pod_go))
    (HERE / "cli-pod.json").write_text(json.dumps(cli_pod_types(pod_go), indent=2) + "\n")
    openapi = httpx.get(REST_V1, follow_redirects=True).raise_for_status().json()
    pod = openapi["components"]["schemas"]["Pod"]
    (HERE / "rest-v1-pod.json").write_text(json.dumps(pod, indent=2) + "\n")
    rest_v2 = httpx.get(REST_V2, follow_redirects=True).raise_for_status()
    (HERE / "rest-v2-openapi.json").write_bytes(rest_v2.content)


if __name__ == "__main__":
    main()
