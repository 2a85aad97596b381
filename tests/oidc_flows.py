"""A real OpenID Connect provider for the sign-in tests, and a person using it over HTTP.

`IdentityProvider` runs panva's `oidc-provider` (OpenID Certified) under Node.js, from
tests/oidc_provider (installed by `npm ci` from its lock), on a free port. Its accounts are a
JSON file read again at every sign-in, refresh and userinfo call: `set_groups` changes a
person's groups there, as an administrator would in the company's directory.

`submit_pages` is the person: it follows redirects and submits the forms the provider shows
(its login page, its consent page, a device's confirmation page) as a browser would, until
the answer comes from somewhere else.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import httpx

from tests.programs import program

PROVIDER_DIR = Path(__file__).parent / "oidc_provider"
CLIENT_ID = "governor"
CLIENT_SECRET = "governor-test-secret"
START_TIMEOUT_S = 60.0
MAX_PAGES = 12


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class IdentityProvider:
    """oidc-provider in its own process: the issuer at `issuer`, one confidential client."""

    def __init__(self, workdir: Path, accounts: dict[str, dict[str, Any]], redirect_uri: str):
        self.port = _free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.accounts_file = workdir / "accounts.json"
        self.log_path = workdir / "provider.log"
        self._accounts = dict(accounts)
        self._write_accounts()
        clients = [
            {
                "client_id": CLIENT_ID,
                "client_secret": CLIENT_SECRET,
                "redirect_uris": [redirect_uri],
                "grant_types": [
                    "authorization_code",
                    "refresh_token",
                    "urn:ietf:params:oauth:grant-type:device_code",
                ],
                "response_types": ["code"],
            }
        ]
        self.clients_file = workdir / "clients.json"
        self.clients_file.write_text(json.dumps(clients))
        self.process: subprocess.Popen[bytes] | None = None

    def _write_accounts(self) -> None:
        staged = self.accounts_file.with_suffix(".tmp")
        staged.write_text(json.dumps(self._accounts))
        os.replace(staged, self.accounts_file)  # never read half-written

    def set_groups(self, login: str, groups: list[str]) -> None:
        self._accounts[login] = {**self._accounts[login], "groups": groups}
        self._write_accounts()

    def start(self) -> IdentityProvider:
        node = program("node")
        assert (PROVIDER_DIR / "node_modules" / "oidc-provider").is_dir(), (
            "oidc-provider is not installed: run 'npm ci' in tests/oidc_provider (make test does)"
        )
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [
                    node,
                    "provider.mjs",
                    str(self.port),
                    str(self.accounts_file),
                    str(self.clients_file),
                ],
                cwd=PROVIDER_DIR,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"the provider exited:\n{self.log_path.read_text()}")
            if f"listening {self.issuer}" in self.log_path.read_text():
                return self
            time.sleep(0.05)
        raise AssertionError(f"the provider did not start:\n{self.log_path.read_text()}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class _Forms(HTMLParser):
    """Each <form>'s action, method and named inputs (buttons are left out: a form is
    submitted as its default button would, never as 'abort')."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[dict[str, Any]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        given = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.forms.append(
                {
                    "action": given.get("action", ""),
                    "method": given.get("method", "get"),
                    "fields": {},
                }
            )
        elif tag == "input" and self.forms and given.get("name"):
            self.forms[-1]["fields"][given["name"]] = given.get("value", "")


def submit_pages(
    client: httpx.Client, response: httpx.Response, login: str, until: str | None = None
) -> httpx.Response:
    """Sign in as `login` on the provider's pages that `response` opens: submit each form
    (login and password filled in; any password does), following redirects, until a page
    answers from an address starting with `until` (with None: until a page has no form)."""
    for _ in range(MAX_PAGES):
        if until is not None and str(response.url).startswith(until):
            return response
        parser = _Forms()
        parser.feed(response.text)
        if until is None and not parser.forms:
            return response
        assert parser.forms, f"no form on {response.url} ({response.status_code}):\n{response.text}"
        form = parser.forms[0]
        fields = dict(form["fields"])
        if "login" in fields:
            fields.update(login=login, password="any password")
        response = client.request(
            form["method"].upper(), urljoin(str(response.url), form["action"]), data=fields
        )
    raise AssertionError(f"still on the provider's pages after {MAX_PAGES} forms")
