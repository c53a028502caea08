"""grpo-pipeline: a reward/verifier-centric GRPO training system.

Subpackages: ``grpo.learner`` (torch learner math and trainer, from ``learner/``),
``grpo.verifiers`` (verifier SDK and verifiers, from ``verifiers/``), ``grpo.services``
(gRPC servers and their runtime, from ``services/``), ``grpo.v1`` (generated protobuf stubs).

The Python API (``grpo.api``), loaded on first use so that ``import grpo`` stays light:
:func:`score` (one response against a gold answer), :func:`answers_equal`,
:func:`load_run_config`, ``RunConfig``, :func:`run`.
"""

from typing import Any

__version__ = "0.1.0"

__all__ = [
    "RunConfig",
    "ScoreResult",
    "__version__",
    "answers_equal",
    "load_run_config",
    "run",
    "score",
]

_API = frozenset(__all__) - {"__version__"}


def __getattr__(name: str) -> Any:
    if name in _API:
        from grpo import api

        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
