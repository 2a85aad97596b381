"""classify_failure: whose failure a crash is; and importing the client pulls in no framework."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from governor.client import classify_failure


class BrokenDataset(Dataset[int]):
    def __len__(self) -> int:
        return 4

    def __getitem__(self, index: int) -> int:
        raise FileNotFoundError(f"shard-{index}.bin")


def raised_from(action: Callable[[], object]) -> BaseException:
    try:
        action()
    except Exception as exc:
        return exc
    raise AssertionError("nothing was raised")


@pytest.mark.parametrize(
    "exc",
    [
        torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 MiB"),
        RuntimeError("CUDA error: out of memory"),
    ],
)
def test_out_of_memory_is_the_models(exc: BaseException) -> None:
    assert classify_failure(exc) == ("model", "oom")


def test_an_error_while_loading_data_is_the_harnesss() -> None:
    exc = raised_from(lambda: next(iter(DataLoader(BrokenDataset()))))
    assert isinstance(exc, FileNotFoundError)
    assert classify_failure(exc) == ("harness", "data-loading")


def test_anything_else_is_the_harnesss() -> None:
    assert classify_failure(ValueError("bad learning rate")) == ("harness", None)


def test_importing_the_client_loads_no_framework_and_no_server_library() -> None:
    heavy = ["torch", "transformers", "pytorch_lightning", "pydantic", "sqlalchemy", "fastapi"]
    code = f"import sys, governor.client; print([m for m in {heavy!r} if m in sys.modules])"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "[]"
