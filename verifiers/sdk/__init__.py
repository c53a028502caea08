"""Verifier SDK: subclass :class:`Verifier`, get a gRPC service, ``grpo score`` and metrics.

Domain half (no gRPC import: importing it loads neither grpc nor sympy):

- :class:`Verifier` / :class:`VerifierInfo` / :func:`make_score` — the base class (``base``).
- :class:`WorkerPool` / :class:`PoolSettings` — pre-started worker processes with a hard
  wall-clock limit and a memory cap for CPU-heavy checks (``pool``).
- :func:`pool_failure_score` / :func:`utf8_problem` — the statuses of a failed pool call and
  of an uncheckable response (``failures``).

Service half (imports grpc; loaded on first use of one of these names):

- :class:`VerifierServicer` / :class:`ScoringSettings` — Describe, Score, ScoreBatch
  (``servicer``).
- :func:`verifier_service_spec` — the ``ServiceSpec`` for ``grpo serve`` (``service``).

See docs/add-a-verifier.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from grpo.verifiers.sdk.base import Verifier, VerifierInfo, make_score
from grpo.verifiers.sdk.failures import pool_failure_score, pool_outcomes, utf8_problem
from grpo.verifiers.sdk.pool import (
    CallOutcome,
    CheckMemoryError,
    CheckTimeoutError,
    PoolSettings,
    RemoteCheckError,
    WorkerCrashError,
    WorkerPool,
    request_deadline,
)
from grpo.verifiers.sdk.pooled import PoolVerifier

if TYPE_CHECKING:
    from grpo.verifiers.sdk.service import verifier_service_spec
    from grpo.verifiers.sdk.servicer import ScoringSettings, VerifierServicer

_SERVICE_HALF = {
    "ScoringSettings": "grpo.verifiers.sdk.servicer",
    "VerifierServicer": "grpo.verifiers.sdk.servicer",
    "verifier_service_spec": "grpo.verifiers.sdk.service",
}

__all__ = [
    "CallOutcome",
    "CheckMemoryError",
    "CheckTimeoutError",
    "PoolSettings",
    "PoolVerifier",
    "RemoteCheckError",
    "ScoringSettings",
    "Verifier",
    "VerifierInfo",
    "VerifierServicer",
    "WorkerCrashError",
    "WorkerPool",
    "make_score",
    "pool_failure_score",
    "pool_outcomes",
    "request_deadline",
    "utf8_problem",
    "verifier_service_spec",
]


def __getattr__(name: str) -> Any:
    """Import the gRPC half of the SDK on first use (PEP 562), so the domain half stays
    importable without grpc."""
    module = _SERVICE_HALF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
