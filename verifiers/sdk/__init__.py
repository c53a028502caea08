"""Verifier SDK: subclass :class:`Verifier`, get a gRPC service, ``grpo score`` and metrics.

- :class:`Verifier` / :class:`VerifierInfo` / :func:`make_score` — the base class (``base``).
- :class:`WorkerPool` / :class:`PoolSettings` — pre-started worker processes with a hard
  wall-clock limit and a memory cap for CPU-heavy checks (``pool``).
- :class:`VerifierServicer` / :class:`ServingSettings` — Describe, Score, ScoreBatch (``servicer``).
- :func:`verifier_service_spec` — the ``ServiceSpec`` for ``grpo serve`` (``service``).

See docs/add-a-verifier.md.
"""

from grpo.verifiers.sdk.base import Verifier, VerifierInfo, make_score
from grpo.verifiers.sdk.pool import (
    CheckMemoryError,
    CheckTimeoutError,
    PoolSettings,
    RemoteCheckError,
    WorkerCrashError,
    WorkerPool,
    request_deadline,
)
from grpo.verifiers.sdk.service import verifier_service_spec
from grpo.verifiers.sdk.servicer import ServingSettings, VerifierServicer

__all__ = [
    "CheckMemoryError",
    "CheckTimeoutError",
    "PoolSettings",
    "RemoteCheckError",
    "ServingSettings",
    "Verifier",
    "VerifierInfo",
    "VerifierServicer",
    "WorkerCrashError",
    "WorkerPool",
    "make_score",
    "request_deadline",
    "verifier_service_spec",
]
