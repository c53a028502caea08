"""Dataset checks of the math verifier on the real GSM8K and MATH-500 files (issue 4)."""

from __future__ import annotations

import concurrent.futures as cf
import os
from collections import Counter
from pathlib import Path

import pytest

from grpo.v1 import common_pb2
from grpo.verifiers.math import MathVerifier


@pytest.fixture(scope="module")
def datasets(data_dir: Path) -> None:
    os.environ.setdefault("GRPO_DATA_DIR", str(data_dir))


def _score_all(verifier: MathVerifier, pairs: list[tuple[str, str]]) -> list[common_pb2.Score]:
    with cf.ThreadPoolExecutor(4) as ex:
        return list(
            ex.map(lambda p: verifier.verify(common_pb2.Task(gold_answer=p[0]), p[1]), pairs)
        )


def _correct(scores: list[common_pb2.Score]) -> int:
    return sum(s.status == common_pb2.SCORE_STATUS_OK and s.reward == 1.0 for s in scores)


def test_gsm8k_reference_solutions_score_one(datasets: None, math_verifier: MathVerifier) -> None:
    from grpo.services.tasks.datasets import load_gsm8k

    tasks = load_gsm8k("test")
    assert len(tasks) == 1219
    scores = _score_all(math_verifier, [(t.gold_answer, t.metadata["solution"]) for t in tasks])
    share = _correct(scores) / len(tasks)
    assert share >= 0.995, Counter(s.status for s in scores)


def test_math500_boxed_gold_and_shifted_gold(datasets: None, math_verifier: MathVerifier) -> None:
    from grpo.services.tasks.datasets import load_math500

    tasks = load_math500()
    golds = [t.gold_answer for t in tasks]
    assert len(golds) == 500
    solutions = _score_all(math_verifier, [(t.gold_answer, t.metadata["solution"]) for t in tasks])
    assert _correct(solutions) == 500  # each reference solution's own \boxed{} vs its gold
    own = _score_all(math_verifier, [(g, rf"so \boxed{{{g}}}") for g in golds])
    assert _correct(own) == 500, [g for g, s in zip(golds, own, strict=True) if s.reward != 1]
    # shifted: every third problem here (all 500 in bench/bench_verifiers_math.py)
    shifted_pairs = [(golds[(i + 1) % 500], rf"\boxed{{{golds[i]}}}") for i in range(0, 500, 3)]
    shifted = _score_all(math_verifier, shifted_pairs)
    assert _correct(shifted) / len(shifted) <= 0.02
    # a wrong answer is a verdict (status OK, reward 0), not a failure
    assert Counter(s.status for s in shifted)[common_pb2.SCORE_STATUS_OK] >= 0.99 * len(shifted)
