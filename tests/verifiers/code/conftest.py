"""Fixtures of the code verifier tests: one sandboxed verifier per module (2 slots).

``GRPO_TEST_ISOLATION=runtime`` runs the red-team suite (test_hostile, test_tamper) with
``isolation: runtime`` instead of bubblewrap: how ``test_runtime.py`` runs it under gVisor.
"""

from __future__ import annotations

import ctypes
import os
import shutil
from collections.abc import Iterator

import psutil
import pytest

from grpo.v1 import common_pb2
from grpo.verifiers.code import CodeConfig, CodeVerifier, SandboxSettings

CANARY = "grpo-canary-5b1f0c9e2d"
_PR_GET_CHILD_SUBREAPER = 37  # prctl(2)


def own_descendants() -> set[int]:
    """Pids (zombies included) of every process descended from this test process.

    A verifier's sandbox makes this process the child subreaper (asserted here), so whatever
    a sample leaves behind, a daemon that double-forked out of its tree included, is
    reparented to a process of this tree, never to init: the set holds every process the
    verifier's samples can leave. Another sandbox on the host (another pytest run, a serving
    verifier) is not in it, even when it runs under the same slot uids.
    """
    flag = ctypes.c_int(0)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) != 0:
        # gVisor has no PR_GET_CHILD_SUBREAPER: there the suite runs as the PID namespace's
        # init, to which every orphan of the namespace is re-parented anyway
        assert os.getpid() == 1, "cannot read the child-subreaper flag and not pid 1"
    else:
        assert flag.value == 1, "no sandbox open: this process is not the child subreaper"
    return {p.pid for p in psutil.Process().children(recursive=True)}


ISOLATION = os.environ.get("GRPO_TEST_ISOLATION", "bubblewrap")
"""The isolation the shared fixtures use: 'bubblewrap' (default) or 'runtime'."""


def sandbox_settings(**kwargs: object) -> SandboxSettings:
    """SandboxSettings with the suite's isolation (``ISOLATION``)."""
    return SandboxSettings(isolation=ISOLATION, **kwargs)  # type: ignore[arg-type]


def need_sandbox() -> None:
    """Fail loudly (not skip) when the sandbox cannot be built here."""
    if ISOLATION == "runtime":
        if os.geteuid() != 0:
            pytest.skip("isolation runtime needs root")
        return
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
    """A real CodeVerifier: bwrap (or ``ISOLATION``), 2 slots, 3 s wall clock, the service env
    holds a canary."""
    need_sandbox()
    os.environ["GRPO_TEST_CANARY"] = CANARY
    settings = sandbox_settings(slots=2, wall_time_s=3.0, memory_mb=256)
    v = CodeVerifier(CodeConfig(reward_mode="fraction", sandbox=settings))
    try:
        yield v
    finally:
        v.close()
        os.environ.pop("GRPO_TEST_CANARY", None)
