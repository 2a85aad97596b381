from __future__ import annotations

import pytest

from tests.unit.cli.scripted import Governor


@pytest.fixture
def governor(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Governor:
    """A scripted governor; the operator's GOVERNOR_URL and tokens kept out."""
    for name in ("GOVERNOR_URL", "GOVERNOR_OPERATOR_TOKEN", "GOVERNOR_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    return Governor(capsys)
