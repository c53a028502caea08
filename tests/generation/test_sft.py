"""SFT warm start and the greedy accuracy helper."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo.learner.sft import final_answer, greedy_accuracy, run_sft
from grpo.services.errors import InvalidArgumentError
from grpo.v1 import common_pb2

from .conftest import TUNED_COMPLETION, TUNED_PROMPT


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("7+8=15,4+3+1=8:85", "85"),
        ("so 3+4 = 7 #### 1,450", "1450"),
        ("the total is 12 then 13.", "13"),
        ("no digits here", ""),
        ("x:", ""),
    ],
)
def test_final_answer(text: str, answer: str) -> None:
    assert final_answer(text) == answer


def test_sft_learns_the_completion_and_greedy_accuracy_scores_it(
    tiny_model_dir: Path, tuned_model_dir: Path
) -> None:
    tasks = [
        common_pb2.Task(id="a", prompt=TUNED_PROMPT, gold_answer=TUNED_COMPLETION),
        common_pb2.Task(id="b", prompt=TUNED_PROMPT, gold_answer="no"),
    ]
    # default check compares final_answer(text); "ok" has no ':' or number -> "".
    exact = greedy_accuracy(
        tuned_model_dir, tasks, max_new_tokens=6, check=lambda text, t: text == t.gold_answer
    )
    assert (exact.correct, exact.total, exact.accuracy) == (1, 2, 0.5)
    before = greedy_accuracy(
        tiny_model_dir, tasks, max_new_tokens=6, check=lambda text, t: text == t.gold_answer
    )
    assert before.correct == 0


def test_sft_masks_prompt_tokens_and_reports(tiny_model_dir: Path, tmp_path: Path) -> None:
    logged: list[tuple[int, float]] = []
    result = run_sft(
        tiny_model_dir,
        [("12+34=", "4+2=6,3+1=4:46")] * 4,
        out_dir=tmp_path / "out",
        steps=6,
        batch_size=4,
        log_every=3,
        on_log=lambda step, loss: logged.append((step, loss)),
    )
    assert result.steps == 6 and [s for s, _ in logged] == [3, 6]
    # 4 examples x (14 completion chars + EOS) per step; prompt tokens carry no loss.
    assert result.completion_tokens == 6 * 4 * 15
    assert result.epochs == 6.0
    assert (tmp_path / "out" / "model.safetensors").is_file()
    assert (tmp_path / "out" / "tokenizer.json").is_file()


def test_sft_argument_errors(tiny_model_dir: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="at least one"):
        run_sft(tiny_model_dir, [("a", "b")])
    with pytest.raises(InvalidArgumentError, match="empty prompt or completion"):
        run_sft(tiny_model_dir, [("a", "")], steps=1)
