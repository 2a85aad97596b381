"""Identifiers: a short type prefix and random hex, readable in logs and URLs."""

import secrets


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(8)}"
