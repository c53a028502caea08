"""Fixtures of the code verifier tests: one sandboxed verifier per module (2 slots)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from grpo.v1 import common_pb2
from grpo.verifiers.code import CodeConfig, CodeVerifier, SandboxSettings

CANARY = "grpo-canary-5b1f0c9e2d"


def need_sandbox() -> None:
    """Fail loudly (not skip) when the sandbox cannot be built here."""
    if shutil.which("bwrap") is None:
        pytest.fail("bubblewrap is missing: apt-get install bubblewrap (or make install)")
    if os.geteuid() != 0:
        pytest.skip("per-slot uids need root")


def code_task(test_code: str, entry_point: str = "f", prefix: str = "") -> common_pb2.Task:
    """A HumanEval-style task."""
    return common_pb2.Task(
        id="t",
        type="code",
        code_tests=common_pb2.CodeTests(
            test_code=test_code, entry_point=entry_point, program_prefix=prefix
        ),
    )


@pytest.fixture(scope="module")
def verifier() -> Iterator[CodeVerifier]:
    """A real CodeVerifier: bwrap, 2 slots, 3 s wall clock, the service env holds a canary."""
    need_sandbox()
    os.environ["GRPO_TEST_CANARY"] = CANARY
    settings = SandboxSettings(slots=2, wall_time_s=3.0, memory_mb=256)
    v = CodeVerifier(CodeConfig(reward_mode="fraction", sandbox=settings))
    try:
        yield v
    finally:
        v.close()
        os.environ.pop("GRPO_TEST_CANARY", None)
