"""SFT warm start (its model then scored greedily by a verifier)."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo.errors import InvalidArgumentError
from grpo.learner.sft import run_sft
from grpo.v1 import common_pb2

from .conftest import TUNED_COMPLETION, TUNED_PROMPT


def test_sft_learns_the_completion_and_a_verifier_scores_it(
    tiny_model_dir: Path, tuned_model_dir: Path
) -> None:
    from grpo.services.evaluation.evaluate import EvalSettings, evaluate_model
    from grpo.services.evaluation.scorers import LocalScorer
    from grpo.services.generation.backend import SamplingConfig

    tasks = [
        common_pb2.Task(id="a", type="exact", prompt=TUNED_PROMPT, gold_answer=TUNED_COMPLETION),
        common_pb2.Task(id="b", type="exact", prompt=TUNED_PROMPT, gold_answer="no"),
    ]
    greedy = EvalSettings(sampling=SamplingConfig(temperature=0.0, max_new_tokens=6))
    with LocalScorer.from_service("grpo.verifiers.example:SERVICE") as exact_match:
        tuned = evaluate_model(tuned_model_dir, tasks, exact_match, greedy)
        before = evaluate_model(tiny_model_dir, tasks, exact_match, greedy)
    assert (tuned.correct, tuned.total, tuned.accuracy) == (1, 2, 0.5)
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
    with pytest.raises(InvalidArgumentError, match="check_every"):
        run_sft(tiny_model_dir, [("a", "b")], steps=1, check=lambda path, step: (0.0, False))


def test_sft_check_saves_the_model_and_stops_at_the_target(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    seen: list[tuple[int, bool]] = []

    def check(path: Path, step: int) -> tuple[float, bool]:
        # the model being checked is on disk at the moment of the check
        seen.append((step, (path / "model.safetensors").is_file()))
        return step / 10, step >= 6

    result = run_sft(
        tiny_model_dir,
        [("12+34=", "4+2=6,3+1=4:46")] * 4,
        out_dir=out,
        steps=20,
        batch_size=4,
        check_every=3,
        check=check,
    )
    assert seen == [(3, True), (6, True)]
    assert result.steps == 6 and result.stopped_by_check
    assert result.checks == [(3, 0.3), (6, 0.6)]
    # without a stop, every check is recorded and the run ends at its step bound
    full = run_sft(
        tiny_model_dir,
        [("12+34=", "4+2=6,3+1=4:46")] * 4,
        out_dir=tmp_path / "full",
        steps=7,
        batch_size=4,
        check_every=3,
        check=lambda path, step: (1.0, False),
    )
    assert full.steps == 7 and not full.stopped_by_check
    assert [s for s, _ in full.checks] == [3, 6]
