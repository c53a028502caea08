"""Fixtures of the verifier tests: shared worker pools and verifiers (started once)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# Functions run inside pool workers must be importable by module name there.
sys.path.insert(0, str(Path(__file__).parent))

from grpo.verifiers.math import MathConfig, MathVerifier
from grpo.verifiers.sdk import PoolSettings

GENEROUS_S = 20.0
"""Time limit for ordinary checks: far above their cost, so a loaded machine cannot flake them."""
TIGHT_S = 1.5
"""Time limit for the hostile-input checks that must be killed."""


@pytest.fixture(scope="session")
def math_verifier() -> Iterator[MathVerifier]:
    """A math verifier with two workers and a generous time limit."""
    with MathVerifier(MathConfig(pool=PoolSettings(workers=2, timeout_s=GENEROUS_S))) as v:
        yield v


@pytest.fixture(scope="session")
def tight_math_verifier() -> Iterator[MathVerifier]:
    """A math verifier with one worker and a 1.5 s limit, for inputs that must time out."""
    config = MathConfig(pool=PoolSettings(workers=1, timeout_s=TIGHT_S, memory_mb=1024))
    with MathVerifier(config) as v:
        yield v


@pytest.fixture(scope="session")
def steps_verifier():  # type: ignore[no-untyped-def]
    """A step verifier with two workers and a generous time limit."""
    from grpo.verifiers.steps import StepsConfig, StepsVerifier

    with StepsVerifier(StepsConfig(pool=PoolSettings(workers=2, timeout_s=GENEROUS_S))) as v:
        yield v
