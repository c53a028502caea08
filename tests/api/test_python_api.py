"""The Python API (``grpo.api``, exported by ``grpo``): scoring from a script with no
``__main__`` guard, text or parsed answers accepted, anything else refused by name."""

from __future__ import annotations

import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from grpo import ScoreResult, answers_equal, score
from grpo.verifiers.math import read_answer
from grpo.verifiers.math.compare import AnswerParseError

REPO = Path(__file__).resolve().parents[2]

SCRIPT = """\
from grpo import score
from grpo.v1 import common_pb2
from grpo.verifiers.math import MathVerifier

print("top-level ran")
print(score("So 48 + 24 = 72. The answer is \\\\boxed{72}.", gold="72"))
with MathVerifier() as verifier:
    print(verifier.verify(common_pb2.Task(type="math", gold_answer="4"), "the answer is 5").reward)
"""


def test_a_script_without_a_main_guard_scores_and_runs_its_body_once(tmp_path: Path) -> None:
    """Pool workers (forkserver) do not run the script again: no nested pool, no 'did not
    start within 120 s', the top level runs once."""
    script = tmp_path / "no_guard.py"
    script.write_text(SCRIPT)
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=240, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines == [
        "top-level ran",
        "ScoreResult(status='ok', reward=1.0, extracted='72', detail='boxed: equivalent')",
        "0.0",
    ], out.stdout + out.stderr


def test_score_statuses_and_refusals() -> None:
    right = score("48/2 = 24, and 48 + 24 = 72.\n#### 72", gold=72)
    assert (right.status, right.reward, right.correct, right.extracted) == ("ok", 1.0, True, "72")
    wrong = score("The answer is 71.", gold="72")
    assert (wrong.status, wrong.reward, wrong.correct) == ("ok", 0.0, False)
    none = score("I do not know.", gold=Fraction(3, 4))
    assert isinstance(none, ScoreResult) and none.status == "no_answer" and none.reward == 0.0
    with pytest.raises(TypeError, match=r"score: gold must be text .* got float 0.75"):
        score("The answer is 0.75", gold=0.75)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="score: response must be text"):
        score(["The answer is 1"], gold="1")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("gold", "answer", "equal"),
    [
        ("1/2", "0.5", True),
        (r"\frac{3}{4}", Fraction(3, 4), True),
        (read_answer("5"), 5, True),
        ("7", "8", False),
        ("x = 2", "2", True),
    ],
)
def test_answers_equal_takes_text_numbers_or_models(
    gold: object, answer: object, equal: bool
) -> None:
    assert answers_equal(gold, answer) is equal  # type: ignore[arg-type]


def test_answers_equal_refuses_what_it_cannot_read_by_name() -> None:
    with pytest.raises(TypeError, match=r"gold must be answer text .* got float 0.5"):
        answers_equal(0.5, "1/2")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"answer must be answer text .* got NoneType"):
        answers_equal("1", None)  # type: ignore[arg-type]
    with pytest.raises(AnswerParseError, match="gold: empty answer"):
        answers_equal("", "1")
