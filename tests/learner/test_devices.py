"""The one device rule and dtype table (grpo.devices) that generation and the learner share."""

from __future__ import annotations

import pytest
import torch

from grpo.devices import DTYPES, resolve_device, resolve_dtype
from grpo.errors import InvalidArgumentError


def test_auto_device_is_cuda_with_its_index_or_cpu() -> None:
    auto = resolve_device("auto")
    if torch.cuda.is_available():
        assert auto == torch.device("cuda", torch.cuda.current_device())
    else:
        assert auto == torch.device("cpu")
    assert resolve_device("cuda:1") == torch.device("cuda", 1)  # named devices pass through


def test_dtype_table_and_auto_rule() -> None:
    assert resolve_dtype("auto", torch.device("cpu")) is torch.float32
    assert resolve_dtype("auto", torch.device("cuda", 0)) is torch.bfloat16
    assert {n: resolve_dtype(n, torch.device("cpu")) for n in DTYPES} == DTYPES
    with pytest.raises(InvalidArgumentError, match=r"unknown dtype 'fp8'.*auto, float32"):
        resolve_dtype("fp8", torch.device("cpu"))
