"""Refresh the vendored provider definitions in this folder from the providers' own packages.

    python tests/specs/refresh.py

Downloads (never at test time) the newest google-api-python-client and vastai wheels with
pip, copies Compute Engine's and BigQuery's discovery documents out of the first and
extracts, from the second's source, the endpoints the SDK calls for instances and charges
(method, path, query parameters, body keys and values) and every instance status value it
names; and
downloads Lambda Cloud's OpenAPI document from Lambda's documentation site. Update
README.md's versions and dates afterwards.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx

HERE = Path(__file__).parent
DISCOVERIES = "googleapiclient/discovery_cache/documents"
GCP_APIS = ("compute.v1.json", "bigquery.v2.json")  # Compute Engine; the billing export's
# The SDK modules whose calls the Vast adapter makes too.
VAST_MODULES = ("vastai/api/instances.py", "vastai/api/billing.py")
VAST_PATHS = ("/instances/{id}/", "/api/v1/instances/", "/api/v0/charges/")
# Where the SDK names instance statuses outside its status table.
VAST_STATUS_MENTIONS = {
    "vastai/cli/commands/instances.py": r'the "(scheduling)" state',
    "vastai/cli/commands/machines.py": r"status in \[([^\]]+)\]",
    "vastai/cli/commands/benchmarks.py": r"TERMINAL_STATES = \{([^}]+)\}",
}
LAMBDA_OPENAPI = "https://docs.lambda.ai/api/cloud/spec.json"  # Lambda's, as published
STATUS_TABLE = "| `actual_status` | Meaning |"  # SKILL.md's table of instance statuses
_STATUS_ROW = re.compile(r"^\| `(?P<status>[^`]+)` \| (?P<meaning>.+?) \|$")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        google = _wheel("google-api-python-client", Path(tmp))
        with zipfile.ZipFile(google) as wheel:
            for name in GCP_APIS:
                (HERE / "gcp" / name).write_bytes(wheel.read(f"{DISCOVERIES}/{name}"))
        vast = _wheel("vastai", Path(tmp))
        extracted = vast_definitions(vast)
        (HERE / "vast" / "vastai.json").write_text(json.dumps(extracted, indent=2) + "\n")
    openapi = httpx.get(LAMBDA_OPENAPI, follow_redirects=True).raise_for_status()
    (HERE / "lambda" / "openapi.json").write_bytes(openapi.content)
    version = openapi.json()["info"]["version"]
    print(f"{google.name}, {vast.name}, Lambda {version}: update README.md's versions and dates")


def _wheel(package: str, where: Path) -> Path:
    pip = [sys.executable, "-m", "pip", "download", package, "--no-deps", "-d", str(where)]
    subprocess.run(pip, check=True)
    return next(where.glob(f"{package.replace('-', '_')}-*.whl"))


def vast_definitions(wheel: Path) -> dict[str, object]:
    version = wheel.name.split("-")[1]
    with zipfile.ZipFile(wheel) as archive:
        sources = {
            name: archive.read(name).decode()
            for name in archive.namelist()
            if name.endswith((".py", ".md"))
        }
    endpoints = [
        endpoint
        for module in VAST_MODULES
        for endpoint in _calls(ast.parse(sources[module]), module)
        if any(endpoint["path"].endswith(path) for path in VAST_PATHS)
    ]
    skill = sources["vastai/SKILL.md"].split(STATUS_TABLE, 1)[1].strip().splitlines()
    table: dict[str, str] = {}
    for line in skill[1:]:  # after the |---| row, until the table ends
        match = _STATUS_ROW.match(line.strip())
        if match is None:
            break
        table[match["status"]] = match["meaning"]
    mentioned: dict[str, str] = {}
    for module, pattern in VAST_STATUS_MENTIONS.items():
        for found in re.finditer(pattern, sources[module]):
            for word in re.findall(r"[a-z]+", found.group(1)):
                mentioned.setdefault(word, module)
    instance = ast.parse(sources["vastai/data/instance.py"])
    fields = [
        statement.target.id
        for node in instance.body
        if isinstance(node, ast.ClassDef) and node.name == "Instance"
        for statement in node.body
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)
    ]
    return {
        "source": {"package": "vastai", "version": version, "wheel": wheel.name},
        "endpoints": endpoints,
        "instance_fields": {"file": "vastai/data/instance.py", "names": fields},
        "actual_status": {"file": "vastai/SKILL.md", "values": table},
        "status_mentions": mentioned,
    }


def _calls(tree: ast.Module, module: str) -> Iterator[dict[str, object]]:
    """Every `client.get|put|post|delete(path, query_args=..., json_data=...)` in `module`,
    with the literal keys (and, for bodies, values) of the dicts it passes."""
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef):
            continue
        dicts = _dicts(tree, function)
        for call in ast.walk(function):
            if not (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and isinstance(call.func.value, ast.Name)
                and call.func.value.id == "client"
                and call.func.attr in ("get", "put", "post", "delete")
                and call.args
            ):
                continue
            args = {k.arg: k.value for k in call.keywords if k.arg}
            query = _literal_keys(args.get("query_args"), dicts)
            body = _literal_keys(args.get("json_data"), dicts)
            for path in _paths(call.args[0], function):
                yield {
                    "method": call.func.attr.upper(),
                    "path": path if re.match(r"^/api/v\d+/", path) else "/api/v0" + path,
                    "query": sorted(query),
                    "body": {k: sorted(v) for k, v in sorted(body.items())},
                    "file": f"{module}:{call.lineno} ({function.name})",
                }


def _paths(node: ast.expr, function: ast.FunctionDef) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return [
            "".join(
                str(part.value) if isinstance(part, ast.Constant) else "{id}"
                for part in node.values
            )
        ]
    if isinstance(node, ast.Name):
        for statement in ast.walk(function):
            if isinstance(statement, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == node.id for t in statement.targets
            ):
                value = statement.value
                options = [value.body, value.orelse] if isinstance(value, ast.IfExp) else [value]
                return [p for option in options for p in _paths(option, function)]
    return []


def _dicts(tree: ast.Module, function: ast.FunctionDef) -> dict[str, dict[str, set[str]]]:
    """Name -> its literal keys (each with the string values it takes), from the dicts
    assigned to that name in `function`, or anywhere in the module for a parameter (the
    SDK builds a request's parameters in the caller)."""
    parameters = {a.arg for a in function.args.args}
    found: dict[str, dict[str, set[str]]] = {}
    for scope in (function, tree):
        for node in ast.walk(scope):
            if scope is tree and not (isinstance(node, ast.Assign) and _named(node) in parameters):
                continue
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
                name = _named(node)
                for key, value in zip(node.value.keys, node.value.values, strict=True):
                    if isinstance(key, ast.Constant) and name:
                        values = found.setdefault(name, {}).setdefault(str(key.value), set())
                        if isinstance(value, ast.Constant) and isinstance(value.value, str):
                            values.add(value.value)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    if (
                        isinstance(target, ast.Subscript)
                        and isinstance(target.value, ast.Name)
                        and isinstance(target.slice, ast.Constant)
                    ):
                        keys = found.setdefault(target.value.id, {})
                        keys.setdefault(str(target.slice.value), set())
    return found


def _named(node: ast.AST) -> str | None:
    if isinstance(node, ast.Assign):
        target = node.targets[0]
        if isinstance(target, ast.Name):
            return target.id
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            return target.value.id
    return None


def _literal_keys(
    node: ast.expr | None, dicts: dict[str, dict[str, set[str]]]
) -> dict[str, set[str]]:
    if isinstance(node, ast.Dict):
        return {
            str(k.value): {str(v.value)} if isinstance(v, ast.Constant) else set()
            for k, v in zip(node.keys, node.values, strict=True)
            if isinstance(k, ast.Constant)
        }
    if isinstance(node, ast.Name):
        return dicts.get(node.id, {})
    return {}


if __name__ == "__main__":
    main()
