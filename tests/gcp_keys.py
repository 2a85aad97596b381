"""Service-account key files for the fake GCP's token endpoint, made at test time (no key
is ever checked in)."""

from __future__ import annotations

import json
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from governor.fakes.gcp import SA_TOKEN_PATH, FakeGcp

EMAIL = "governor@unit-project.iam.gserviceaccount.com"


def key_file(folder: Path, fake: FakeGcp, url: str, *, trusted: bool = True) -> Path:
    """A JSON key file whose token_uri is the fake's token endpoint at `url`; the fake
    trusts its key unless `trusted` is False. Returns the file's path."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    if trusted:
        fake.add_service_account(EMAIL, public.decode())
    info = {
        "type": "service_account",
        "project_id": fake.project,
        "private_key_id": "0123456789abcdef",
        "private_key": private,
        "client_email": EMAIL,
        "client_id": "100000000000000000001",
        "token_uri": f"{url}{SA_TOKEN_PATH}",
    }
    path = folder / "service-account.json"
    path.write_text(json.dumps(info))
    return path


def private_key_lines(path: Path) -> list[str]:
    """The key's base64 lines, each of which must never be seen in a log or an error."""
    pem = json.loads(path.read_text())["private_key"]
    return [line for line in pem.splitlines() if line and not line.startswith("-----")]
