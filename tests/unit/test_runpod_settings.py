"""RunPod settings: the key from the environment or a file, never in the URL, and the
provider registered only when a key is configured."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from governor.adapters.providers.runpod import RunPodProvider
from governor.bootstrap import build_providers
from governor.settings import load_settings
from tests.clock import FrozenClock


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
