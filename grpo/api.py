"""The Python API: score a response, compare two answers, build a run config, start a run.

Everything here is also importable from ``grpo`` itself (loaded on first use, so ``import
grpo`` stays light)::

    from grpo import score
    result = score("48 + 24 = 72. The answer is \\boxed{72}.", gold="72")
    print(result.status, result.reward)            # ok 1.0

    from grpo import load_run_config, run
    config = load_run_config("configs/e2e-tiny.yaml", {"budget.steps": 1})
    summary = run(config, "runs/from-python")      # a RunSummary: summary.final_accuracy

- :func:`score` runs the math outcome verifier of ``grpo score math`` and ``grpo run``
  (``grpo.verifiers.math.MathVerifier``: extraction, the answer model, sympy in a worker pool
  with a hard time limit) in this process. Its pool starts on the first call (about 2 s: sympy
  is imported once) and is closed at exit. A script needs no ``if __name__ == "__main__":``
  guard: the pool's workers never import the main module (``grpo.verifiers.sdk.pool``).
- :func:`answers_equal` compares two final answers given as text or as answer models
  (``grpo.verifiers.math.compare``), in this process (no pool, no time limit).
- :func:`load_run_config` reads a ``grpo run`` YAML (``RunConfig``; dotted overrides);
  :class:`RunConfig` builds one from Python values; :func:`run` runs it on this machine as
  ``grpo run`` does (``grpo.local.run.run_local``) and returns its summary (a frozen
  ``RunSummary``, read by attribute; ``.as_dict()`` is summary.json).
"""

from __future__ import annotations

import atexit
import threading
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grpo.verifiers.math.compare import answers_equal

if TYPE_CHECKING:
    from grpo.services.settings.run import RunConfig

__all__ = ["RunConfig", "ScoreResult", "answers_equal", "load_run_config", "run", "score"]


@dataclass(frozen=True)
class ScoreResult:
    """The verdict on one response (a ``grpo.v1.Score`` in plain values).

    Attributes:
        status: ``ok``, ``no_answer``, ``parse_error`` (verdicts: the reward counts), or
            ``undecided``, ``internal`` (no verdict: the reward is missing).
        reward: 1.0 or 0.0 for a verdict; None when the status is no verdict (never a silent 0).
        extracted: the final answer read from the response ("" when none).
        detail: how it was decided, or why not.
    """

    status: str
    reward: float | None
    extracted: str
    detail: str

    @property
    def correct(self) -> bool | None:
        """True/False for a verdict (reward 1 / 0); None when there is none."""
        return None if self.reward is None else self.reward >= 1.0


_lock = threading.Lock()
_verifier: Any = None


def _math_verifier() -> Any:
    """The process's math verifier (one worker), started on first use, closed at exit."""
    global _verifier
    with _lock:
        if _verifier is None:
            from grpo.verifiers.math import MathConfig, MathVerifier
            from grpo.verifiers.sdk import PoolSettings

            _verifier = MathVerifier(MathConfig(pool=PoolSettings(workers=1)))
            atexit.register(_verifier.close)
        return _verifier


def score(
    response: str,
    gold: str | int | Fraction,
    *,
    task_type: str = "math",
    answer_format: str | None = None,
) -> ScoreResult:
    """Score one response against a gold answer with the math outcome verifier.

    Args:
        response: the model's whole response text; its final answer is extracted
            (``\\boxed{}``, ``#### n``, "the answer is", ``<answer>`` tags).
        gold: the reference answer: text (``"3/4"``, ``"\\\\frac{3}{4}"``), an ``int`` or a
            ``Fraction``.
        task_type: ``math`` or ``arith``.
        answer_format: ``lenient`` (default), ``boxed``, ``answer_tag`` or ``gsm8k``: where the
            final answer must be (strict formats never guess; docs/verifiers.md).

    Returns:
        A :class:`ScoreResult`.

    Raises:
        TypeError: ``response`` is not text, or ``gold`` is none of text, ``int`` or
            ``Fraction`` (a float's decimal text is ambiguous: pass ``"0.5"``); the message
            names the argument and its type.
        InvalidArgumentError: an empty gold, a task type or answer format the verifier does
            not know.
    """
    from grpo.services.runtime.score_status import is_verdict
    from grpo.v1 import common_pb2

    if not isinstance(response, str):
        raise TypeError(f"score: response must be text (str), got {type(response).__name__}")
    if isinstance(gold, bool) or not isinstance(gold, str | int | Fraction):
        raise TypeError(
            f"score: gold must be text (str), an int or a Fraction, got {type(gold).__name__} "
            f"{gold!r:.60} (a float's decimal text is ambiguous: pass it as text)"
        )
    metadata = {"answer_format": answer_format} if answer_format else {}
    task = common_pb2.Task(type=task_type, gold_answer=str(gold), metadata=metadata)
    result = _math_verifier().verify(task, response)
    status = str(common_pb2.ScoreStatus.Name(result.status)).removeprefix("SCORE_STATUS_")
    return ScoreResult(
        status=status.lower(),
        reward=float(result.reward) if is_verdict(result) else None,
        extracted=result.extracted_answer,
        detail=result.detail,
    )


def load_run_config(path: str | Path, overrides: dict[str, Any] | None = None) -> RunConfig:
    """Read a ``grpo run`` config (YAML) with dotted-path ``overrides``
    (``{"budget.steps": 3}``); ``GRPO_RUN_*`` environment variables override the file.

    Raises:
        NotFoundError: the file does not exist.
        InvalidArgumentError: invalid values; the message lists each bad field's dotted path.
    """
    from grpo.services.settings.run import load_run_config as load

    return load(Path(path), overrides)


def run(config: RunConfig, run_dir: str | Path | None = None, *, steps: int | None = None) -> Any:
    """Run ``config`` on this machine as ``grpo run`` does: services on loopback, an embedded
    Redis (unless ``config.redis_url`` or ``$REDIS_URL``), the run driver; returns when the
    run ends.

    Args:
        config: the run (:func:`load_run_config` or ``RunConfig(...)``).
        run_dir: output folder; None = ``runs/<time>-<name>``.
        steps: learner steps (default ``config.budget.steps``).

    Returns:
        The run's ``grpo.services.driver.summary.RunSummary``, as
        ``grpo.local.run.run_local`` returns it (also in ``run_dir/summary.json``).

    Raises:
        RunRefusedError: the run must not start (its folder is in use, its Redis evicts).
        GrpoError: a bad config, a service that failed to start or died for good (the
            summary is written first).
    """
    from grpo.local.run import default_run_dir, run_local

    folder = default_run_dir(config) if run_dir is None else Path(run_dir)
    return run_local(config, folder, steps=steps)


def __getattr__(name: str) -> Any:
    if name == "RunConfig":  # loaded on use: the settings import the learner's config models
        from grpo.services.settings.run import RunConfig

        return RunConfig
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
