"""``grpo eval`` on the tiny model: samples, pass@k / maj@k by field, summary, resume; and the
run's held-out evaluation is the same code path (same accuracy, same samples)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from grpo.cli import app
from grpo.cli_console import EXIT_UNSCORED, EXIT_USAGE
from grpo.errors import InvalidArgumentError
from grpo.services.driver.heldout import heldout_accuracy
from grpo.services.settings.run import load_run_config
from grpo.services.tasks.run_tasks import load_run_tasks


def _problems(tmp_path: Path) -> Path:
    rows = [
        {"qid": "a", "q": "hi=", "answer": "ok", "subject": "greet"},
        {"qid": "b", "q": "hi=", "answer": "OK", "subject": "greet"},
        {"qid": "c", "q": "hi=", "answer": "no", "subject": "refuse"},
        {"qid": "d", "q": "hi="},  # no gold: the verifier refuses it (invalid_input)
    ]
    path = tmp_path / "problems.jsonl"
    lines = [json.dumps(r) for r in rows]
    # a prompt that is no string: invalid, but its subject can be read
    lines.insert(2, '{"qid": "e", "q": 5, "answer": "ok", "subject": "greet"}')
    lines.append("{not json")
    path.write_text("".join(line + "\n" for line in lines))
    return path


def _eval(tuned_model: Path, src: Path, out: Path, *extra: str) -> Any:
    args = ["eval", "--model", str(tuned_model), "--dataset", str(src), "-o", str(out),
            "--task-type", "exact", "--verifier", "grpo.verifiers.example:SERVICE",
            "--field", "id=qid", "--field", "prompt=q", "--field", "gold=answer",
            "--samples", "2", "-k", "1", "-k", "2", "--temperature", "0.01", "--seed", "1",
            "--max-new-tokens", "6", "--by", "subject", *extra]  # fmt: skip
    return CliRunner().invoke(app, args, env={"COLUMNS": "200"})


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_grpo_eval_tiny_model_pass_at_k_by_field_and_resume(
    tuned_model: Path, tmp_path: Path
) -> None:
    src, out = _problems(tmp_path), tmp_path / "eval"
    result = _eval(tuned_model, src, out)
    # d's 2 samples and the 2 unreadable lines have no reward: the exit code counts them
    assert result.exit_code == EXIT_UNSCORED, result.output
    assert "pass@2" in result.output and "subject=greet" in result.output
    assert "4 sample(s) got no reward" in result.output
    assert "missing: 4 of 10 samples have no verdict (invalid_input 4); they are left out" in (
        result.output
    )
    summary = json.loads((out / "summary.json").read_text())
    # 'ok' answers a and b (exact-match ignores case), not c; d and the bad lines: no verdict
    assert summary["problems"] == 6 and summary["samples"] == 10
    assert summary["pass@1"] == pytest.approx(2 / 3) and summary["pass@2"] == pytest.approx(2 / 3)
    assert summary["maj@2"] == pytest.approx(2 / 3)
    assert summary["statuses"] == {"invalid_input": 4, "ok": 6}
    assert summary["problems_per_k"] == {"1": 3, "2": 3}
    assert summary["unscored_samples"] == 4 and summary["missing_samples"] == 4
    assert summary["by"]["subject"]["greet"]["pass@1"] == 1.0
    assert summary["by"]["subject"]["refuse"]["pass@1"] == 0.0
    # the invalid line e keeps its subject (it was reported under subject=(none))
    greet = summary["by"]["subject"]["greet"]
    assert (greet["problems"], greet["samples"], greet["missing_samples"]) == (3, 5, 1)
    assert "subject=greet " in " ".join(result.output.split())
    rows = _rows(out / "samples.jsonl")
    # input order, invalid lines at their place (they came first, with negative indices)
    assert [(r["line"], r["index"], r["problem"], r["sample"]) for r in rows] == [
        (1, 0, "a", 0), (1, 0, "a", 1), (2, 1, "b", 0), (2, 1, "b", 1), (3, 2, "e", 0),
        (4, 3, "c", 0), (4, 3, "c", 1), (5, 4, "d", 0), (5, 4, "d", 1), (6, 5, "line-6", 0),
    ]  # fmt: skip
    scored = [r for r in rows if r["status"] == "ok"]
    assert [(r["problem"], r["sample"], r["correct"]) for r in scored] == [
        ("a", 0, True), ("a", 1, True), ("b", 0, True), ("b", 1, True),
        ("c", 0, False), ("c", 1, False),
    ]  # fmt: skip
    assert all(r["response"].strip() == "ok" and r["fields"]["subject"] for r in scored)
    bad = {(r["problem"], r["sample"]): r for r in rows if r["status"] == "invalid_input"}
    assert set(bad) == {("d", 0), ("d", 1), ("e", 0), ("line-6", 0)}
    assert bad["e", 0]["fields"] == {"subject": "greet"}
    assert bad["line-6", 0]["fields"] == {"subject": ""}
    assert all(r["reward"] is None and r["correct"] is None for r in bad.values())
    assert "gold_answer is required" in bad["d", 0]["detail"]
    assert bad["e", 0]["detail"] == "field 'q' must be a string, got number 5"
    assert "invalid JSON" in bad["line-6", 0]["detail"]

    # an interrupted run: the last three rows (d's two samples, the unreadable line) never
    # got written; --resume generates only d's two and writes the line's row again
    samples = out / "samples.jsonl"
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows[:-3]))
    again = _eval(tuned_model, src, out, "--resume")
    assert again.exit_code == EXIT_UNSCORED, again.output
    resumed = json.loads((out / "summary.json").read_text())
    assert resumed["generated_now"] == 2 and resumed["resumed_rows"] == 7
    assert {k: resumed[k] for k in ("pass@1", "pass@2", "maj@2", "statuses")} == {
        k: summary[k] for k in ("pass@1", "pass@2", "maj@2", "statuses")
    }
    assert _rows(samples) == rows  # no duplicate, no gap, same order
    refused = _eval(tuned_model, src, out)
    assert refused.exit_code == EXIT_USAGE, refused.output
    assert "Invalid value for '--output-dir'" in refused.output and "--resume" in refused.output


def test_grpo_eval_fits_the_default_budget_to_a_small_context_and_says_why_samples_failed(
    tmp_path: Path,
) -> None:
    """The default --max-new-tokens (256) on a 32-token model is lowered, with a warning, to
    what the context leaves after the longest prompt that fits (32 - 3 = 29), instead of
    every sample being refused; the one prompt longer than the context is refused, and the
    summary (table and summary.json) says how many samples got no verdict and why."""
    from grpo.model import init_tiny_model

    model = init_tiny_model(tmp_path / "model", hidden=32, layers=1, max_positions=32)
    src = tmp_path / "problems.jsonl"
    rows = [{"id": "short", "prompt": "hi=", "gold": "ok"},
            {"id": "long", "prompt": "x" * 40, "gold": "ok"}]  # fmt: skip
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "eval"
    args = ["eval", "--model", str(model), "--dataset", str(src), "-o", str(out),
            "--task-type", "exact", "--verifier", "grpo.verifiers.example:SERVICE"]  # fmt: skip
    result = CliRunner().invoke(app, args, env={"COLUMNS": "250"})
    assert result.exit_code == EXIT_UNSCORED, result.output
    output = " ".join(result.output.split())
    assert (
        "max_new_tokens 256 lowered to 29: the model's context is 32 tokens and the "
        "longest prompt (short) has 3" in output
    )
    summary = json.loads((out / "summary.json").read_text())
    assert summary["sampling"]["max_new_tokens"] == 29
    assert summary["statuses"] == {"invalid_input": 1, "ok": 1}
    [why] = summary["missing_reasons"]
    assert (why["status"], why["samples"]) == ("invalid_input", 1)
    assert "40 tokens" in why["reason"] and "context of 32 tokens" in why["reason"]
    assert "why: 1 invalid_input: generation refused the prompt" in output


def test_grpo_eval_over_a_generation_service_renders_prompts_as_training_does(
    bpe_chat_model: Path, tmp_path: Path
) -> None:
    """--generation: the prompts go through the chat template of the model the service was
    started with (its Describe's model_path), by the function that renders a run's prompts
    (``chat_renderer``), so the service samples from the text a chat run trained on; a
    service whose model has no template gets the plain prompt."""
    from grpo.services.generation.backend import BackendConfig
    from grpo.services.generation.service import GenerationServicer
    from grpo.services.generation.transformers_backend import TransformersBackend
    from grpo.services.runtime.server import ServerSettings, ServiceBinding, create_server
    from grpo.services.settings.run import RunConfig
    from grpo.services.tasks.run_tasks import load_run_tasks
    from grpo.v1 import generation_pb2_grpc

    src = tmp_path / "problems.jsonl"
    src.write_text(json.dumps({"id": "a", "prompt": "What is 1+1?", "gold": "2"}) + "\n")

    def served(model: Path) -> Any:
        backend = TransformersBackend(BackendConfig(model_path=str(model)))
        binding = ServiceBinding(
            "grpo.v1.Generation",
            generation_pb2_grpc.add_GenerationServicer_to_server,
            GenerationServicer(backend, str(model)),
        )
        server = create_server([binding], ServerSettings(port=0, metrics_port=-1, grace_s=0))
        server.start()
        return server

    def eval_over(server: Any, out: str, *extra: str) -> Any:
        return CliRunner().invoke(app, [
            "eval", "--generation", f"127.0.0.1:{server.port}", "--dataset", str(src),
            "--task-type", "exact", "--verifier", "grpo.verifiers.example:SERVICE",
            "--max-new-tokens", "4", "-o", str(tmp_path / out), *extra,
        ])  # fmt: skip

    chat_server = served(bpe_chat_model)
    try:
        chat = eval_over(chat_server, "chat", "--system", "Be brief.")
        assert chat.exit_code == 0, chat.output
        [row] = _rows(tmp_path / "chat" / "samples.jsonl")
        # the prompt a chat run renders for training, through the same function
        run = RunConfig.model_validate({
            "data": {"source": "arith", "train_size": 2, "heldout_size": 1,
                     "chat": {"system": "Be brief."}},
            "model": {"path": str(bpe_chat_model)},
        })  # fmt: skip
        trained = load_run_tasks(run).train[0]
        assert trained.prompt.startswith("<|im_start|>system\nBe brief.<|im_end|>\n")
        assert row["prompt"] == (
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 1+1?<|im_end|>\n"
            "<|im_start|>assistant\n"
        )
        plain = eval_over(chat_server, "plain", "--chat-template", "none")
        assert plain.exit_code == 0, plain.output
        assert _rows(tmp_path / "plain" / "samples.jsonl")[0]["prompt"] == "What is 1+1?"
    finally:
        chat_server.stop(0)
    from grpo.model import init_tiny_model

    char_model = init_tiny_model(tmp_path / "char", seed=0, hidden=64, layers=2)
    char_server = served(char_model)  # the character tokenizer has no template
    try:
        bare = eval_over(char_server, "bare")
        assert bare.exit_code == 0, bare.output
        assert _rows(tmp_path / "bare" / "samples.jsonl")[0]["prompt"] == "What is 1+1?"
    finally:
        char_server.stop(0)


def test_grpo_eval_renders_prompts_with_the_models_chat_template(
    bpe_chat_model: Path, tmp_path: Path
) -> None:
    """--model's chat template is applied to every prompt (--system adds a system turn); the
    rows record the text the policy read; --chat-template none keeps the plain prompt."""
    src = tmp_path / "problems.jsonl"
    src.write_text(json.dumps({"id": "a", "prompt": "What is 1+1?", "gold": "2"}) + "\n")
    base = ["eval", "--model", str(bpe_chat_model), "--dataset", str(src),
            "--task-type", "exact", "--verifier", "grpo.verifiers.example:SERVICE",
            "--max-new-tokens", "4"]  # fmt: skip
    chat = CliRunner().invoke(app, [*base, "-o", str(tmp_path / "chat"), "--system", "Be brief."])
    assert chat.exit_code == 0, chat.output
    [row] = _rows(tmp_path / "chat" / "samples.jsonl")
    assert row["prompt"] == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 1+1?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    plain = CliRunner().invoke(
        app, [*base, "-o", str(tmp_path / "plain"), "--chat-template", "none"]
    )
    assert plain.exit_code == 0, plain.output
    assert _rows(tmp_path / "plain" / "samples.jsonl")[0]["prompt"] == "What is 1+1?"
    bad = CliRunner().invoke(
        app, [*base, "-o", str(tmp_path / "bad"), "--chat-template", "none", "--system", "x"]
    )
    assert bad.exit_code == EXIT_USAGE and "Invalid value for '--system'" in bad.output


def test_grpo_eval_resume_scores_undecided_samples_again_without_resampling(
    tuned_model: Path, tmp_path: Path
) -> None:
    """A sample whose row has no verdict keeps its response; --resume scores that response
    again (never a new sample) and the new row supersedes the old one."""
    src, out = _problems(tmp_path), tmp_path / "eval"
    assert _eval(tuned_model, src, out).exit_code == EXIT_UNSCORED
    samples = out / "samples.jsonl"
    rows = _rows(samples)
    (i,) = [n for n, r in enumerate(rows) if (r["problem"], r["sample"]) == ("a", 1)]
    kept = dict(rows[i])
    rows[i].update(status="undecided", reward=None, correct=None, detail="sympy timed out")
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    again = _eval(tuned_model, src, out, "--resume")
    assert again.exit_code == EXIT_UNSCORED, again.output
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["generated_now"], summary["retried_now"], summary["samples"]) == (0, 1, 10)
    assert summary["statuses"] == {"invalid_input": 4, "ok": 6}
    after = _rows(samples)
    assert len(after) == len(rows)  # superseded, not duplicated
    assert {k: after[i][k] for k in ("status", "reward", "correct", "response")} == {
        k: kept[k] for k in ("status", "reward", "correct", "response")
    }


def test_grpo_eval_resume_refuses_another_run(tuned_model: Path, tmp_path: Path) -> None:
    src, out = _problems(tmp_path), tmp_path / "eval"
    assert _eval(tuned_model, src, out).exit_code == EXIT_UNSCORED
    record = json.loads((out / "run.json").read_text())
    assert record["identity"]["sampling"]["samples"] == 2
    assert record["identity"]["problems"]["dataset"] == "file"
    assert record["about"]["dataset"] == str(src.resolve())
    before = (out / "samples.jsonl").read_bytes()

    def refused(*extra: str, model: Path = tuned_model, dataset: Path = src) -> str:
        result = _eval(model, dataset, out, "--resume", *extra)
        assert result.exit_code == 101, result.output
        return " ".join(result.output.split())

    assert "sampling.temperature: recorded 0.01, now 0.5" in refused("--temperature", "0.5")
    assert "sampling.max_new_tokens: recorded 6, now 7" in refused("--max-new-tokens", "7")
    assert "sampling.seed: recorded 1, now 3" in refused("--seed", "3")
    assert "correct_threshold: recorded 1.0, now 0.5" in refused("--correct-threshold", "0.5")
    other = tmp_path / "other.jsonl"
    other.write_bytes(src.read_bytes().replace(b'"answer": "no"', b'"answer": "ok"'))
    text = refused(dataset=other)
    assert "problems.sha256" in text and "problems.tasks_sha256" in text
    model = tmp_path / "model-copy"
    shutil.copytree(tuned_model, model)
    (model / "NOTES.txt").write_text("another checkpoint\n")
    assert "policy.model_sha256" in refused(model=model)
    assert "drop --resume and pass --overwrite" in refused("--seed", "3")
    assert (out / "samples.jsonl").read_bytes() == before


@pytest.mark.parametrize(
    ("extra", "option", "message"),
    [
        (["--by", "nosuch"], "--by",
         "no problem has the field(s) nosuch; the problems' fields: subject"),
        (["--temperature", "0"], "--temperature",
         "2 samples per problem at temperature 0 are 2 copies of one greedy answer"),
        (["--field", "gold"], "--field", "'gold' is not NAME=KEY"),
        (["--verifier", "nosuchmod:SERVICE"], "--verifier",
         "cannot load verifier service 'nosuchmod:SERVICE': No module named 'nosuchmod'"),
        (["--model", "{tmp}/nomodel"], "--model", "model folder {tmp}/nomodel has no config.json"),
    ],
)  # fmt: skip
def test_grpo_eval_bad_invocations_exit_2_naming_the_option(
    extra: list[str], option: str, message: str, tuned_model: Path, tmp_path: Path
) -> None:
    """``--by`` a field no problem has (every problem fell in one '(none)' slice), pass@2
    over identical greedy samples, a --verifier that cannot be imported and a --model folder
    that does not exist are refused before anything is written (the last two were exit 101,
    or a traceback, with an empty samples.jsonl left)."""
    out = tmp_path / "eval"
    extra = [arg.format(tmp=tmp_path) for arg in extra]
    message = message.format(tmp=tmp_path)
    result = _eval(tuned_model, _problems(tmp_path), out, *extra)
    assert result.exit_code == EXIT_USAGE, result.output
    text = " ".join(result.output.replace("│", " ").split())
    assert f"Invalid value for '{option}': {message}" in text, text
    assert not (out / "samples.jsonl").exists() and not (out / "run.json").exists()


def test_grpo_eval_k_zero_names_the_option(tuned_model: Path, tmp_path: Path) -> None:
    result = _eval(tuned_model, _problems(tmp_path), tmp_path / "eval", "-k", "0")
    assert result.exit_code == 2
    assert "Invalid value for '-k'" in result.output and "greater than or equal to 1" in (
        result.output
    )
    assert "samples and batch_prompts" not in result.output


def test_grpo_eval_of_a_policy_gives_the_runs_heldout_accuracy(
    tuned_model: Path, tmp_path: Path
) -> None:
    """The run's evaluation (heldout_accuracy, as RunDriver.evaluate calls it) and
    ``grpo eval --run-config`` agree on every sample, hence on the accuracy."""
    config_path = tmp_path / "run.yaml"
    config_path.write_text(yaml.safe_dump({
        "name": "eval-twin",
        "data": {"source": "arith", "train_size": 20, "heldout_size": 5,
                 "arith": {"min_digits": 1, "max_digits": 1}},
        "verifiers": {"outcome": "verifier-math",
                      "extra": {"verifier-math": {"verifier": {"pool": {"workers": 1}}}}},
        "eval": {"max_new_tokens": 8, "batch_size": 2},
    }))  # fmt: skip
    config = load_run_config(config_path)
    tasks = load_run_tasks(config)
    run_report = heldout_accuracy(
        tuned_model, tasks.heldout, config=config, task_type=tasks.task_type,
        out_dir=tmp_path / "run-eval",
    )  # fmt: skip
    out = tmp_path / "cli-eval"
    result = CliRunner().invoke(
        app,
        ["eval", "--run-config", str(config_path), "--model", str(tuned_model), "-o", str(out)],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    cli = json.loads((out / "summary.json").read_text())
    assert cli["pass@1"] == run_report.accuracy and cli["problems"] == 5
    keep = ("problem", "response", "status", "reward", "extracted", "correct")
    run_rows = _rows(tmp_path / "run-eval" / "samples.jsonl")
    assert [{k: r[k] for k in keep} for r in _rows(out / "samples.jsonl")] == [
        {k: r[k] for k in keep} for r in run_rows
    ]
    assert {r["verifier"] for r in run_rows} == {"math"}  # scored by the run's outcome verifier

    # The run's evaluation is greedy with one sample: sampling options are refused, not ignored.
    refused = CliRunner().invoke(
        app,
        ["eval", "--run-config", str(config_path), "--model", str(tuned_model),
         "-o", str(tmp_path / "refused"), "--samples", "8", "-k", "8", "--limit", "2"],
        env={"COLUMNS": "200"},
    )  # fmt: skip
    assert refused.exit_code != 0
    assert isinstance(refused.exception, InvalidArgumentError)  # a usage error, before any work
    assert "drop --limit, -k, --samples" in str(refused.exception)
    assert not (tmp_path / "refused" / "samples.jsonl").exists()


@pytest.mark.parametrize(
    ("extra", "option", "message"),
    [
        (["--dataset", "gsm8k"], "--dataset", "dataset folder {tmp}/no-data does not exist"),
        (["--dataset", "arith", "--task-type", "math"], "--task-type",
         "--dataset arith has task type 'arith'; drop --task-type math"),
    ],
)  # fmt: skip
def test_grpo_eval_source_without_its_data_is_a_usage_error(
    extra: list[str], option: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A source whose data folder is missing, or a --task-type against the source's, is exit
    2 naming the option, before any model is read or anything written (was exit 101 with
    'error: NotFoundError: ...' / 'InvalidArgumentError')."""
    monkeypatch.setenv("GRPO_DATA_DIR", str(tmp_path / "no-data"))
    out = tmp_path / "eval"
    args = ["eval", "--model", str(tmp_path / "no-model"), "-o", str(out), *extra]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == EXIT_USAGE, result.output
    text = " ".join(result.output.replace("│", " ").split())
    assert f"Invalid value for '{option}': {message.format(tmp=tmp_path)}" in text, text
    assert not out.exists()
