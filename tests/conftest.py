"""Shared pytest fixtures: dataset location (Redis fixtures live below)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The read-only reference datasets (GSM8K, MATH-500, HumanEval) beside the project."""
    path = Path(os.environ.get("GRPO_DATA_DIR", REPO.parent / "shared" / "data"))
    if not path.is_dir():
        pytest.fail(f"dataset folder {path} is missing (set GRPO_DATA_DIR)")
    return path
