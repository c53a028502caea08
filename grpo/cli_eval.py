"""``grpo eval``: generate samples of a policy on a problem set, score them with a verifier,
report pass@1, pass@k, maj@k, mean reward and statuses (overall and by field).

A thin command: its options become an ``EvalSettings`` and one frozen
``grpo.services.evaluation.eval_job.EvalJob`` (problems from ``evaluation.tasks``: shipped
sources or a JSONL file with a field map), run by ``eval_job.run_eval``; or, with
``--run-config``, a ``grpo run`` config's held-out set evaluated exactly as the run evaluates
it (``grpo.services.driver.heldout``). Writes ``samples.jsonl`` (one row per sample, appended
as scored; ``--resume``), ``run.json`` (what the folder was made from: ``--resume`` refuses
another dataset, model, sampling settings or verifier) and ``summary.json`` into
``--output-dir`` and prints a table (``cli_console.eval_table``) with how many samples got no
verdict and why. Exits 3 when some samples got no reward (the count is printed), as
``grpo score`` does with lines (``cli_console.exit_for_unscored``), and 2 for a bad invocation.
docs/evaluation.md has the formats, the metric definitions and examples.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from grpo.cli_console import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    eval_table,
    exit_for_unscored,
    resumable_run,
    table_console,
)
from grpo.errors import InvalidArgumentError, UsageError

__all__ = ["EXIT_FAILED", "EXIT_INTERRUPTED", "eval"]


_RUN_DEFINES = (
    "generation", "dataset", "field", "task_type", "limit", "k", "samples", "temperature",
    "top_p", "max_new_tokens", "seed", "verifier", "verifier_endpoint", "correct_threshold", "by",
    "chat_template", "system",
)  # fmt: skip
"""Options whose value ``--run-config`` takes from the run (refused when not at their default)."""


def _refuse_run_defined(given: dict[str, Any]) -> None:
    """Refuse options that ``--run-config`` takes from the run when they are not at their
    default (``given``: option name -> value; list options arrive as [] for None).

    Raises:
        InvalidArgumentError: names the flags to drop.
    """
    defaults = inspect.signature(eval).parameters
    ignored = [n for n in _RUN_DEFINES if given[n] not in (defaults[n].default, [])]
    if ignored:
        flags = ", ".join(("-k" if n == "k" else "--" + n.replace("_", "-")) for n in ignored)
        raise InvalidArgumentError(
            f"--run-config evaluates the run's own set the run's way (greedy, one sample, "
            f"its verifier): drop {flags}, or evaluate with --dataset instead"
        )


def _heldout(
    run_config: Path,
    split: str,
    model: Path,
    output_dir: Path,
    *,
    resume: bool,
    overwrite: bool,
    on_progress: Callable[[int, int], None],
) -> Any:
    """A run's held-out (or dev) set evaluated as the run evaluates it (``heldout_accuracy``)."""
    from grpo.local.preflight import check_run_verifiers
    from grpo.services.driver.heldout import heldout_accuracy
    from grpo.services.settings.run import load_run_config
    from grpo.services.tasks.run_tasks import load_run_tasks

    config = load_run_config(run_config)
    run_tasks = load_run_tasks(config)
    check_run_verifiers(config, run_tasks.task_type)  # grpo run's check, before any write
    tasks = run_tasks.dev if split == "dev" else run_tasks.heldout
    return heldout_accuracy(
        model, tasks, config=config, task_type=run_tasks.task_type, out_dir=output_dir,
        resume=resume, overwrite=overwrite, on_progress=on_progress,
    )  # fmt: skip


def eval(
    output_dir: Annotated[
        Path,
        typer.Option(
            "--output-dir", "-o", help="Folder for samples.jsonl, run.json and summary.json."
        ),
    ],
    model: Annotated[
        Path | None, typer.Option(help="Policy folder (save_pretrained), generated in process.")
    ] = None,
    generation: Annotated[
        str | None, typer.Option(help="HOST:PORT of a running grpo.v1.Generation service.")
    ] = None,
    dataset: Annotated[
        str | None,
        typer.Option(help="arith, gsm8k (test), math500, humaneval, or a JSONL file of problems."),
    ] = None,
    field: Annotated[
        list[str] | None,
        typer.Option(
            "--field", help="JSONL: NAME=KEY, read field NAME (prompt, gold, id...) from KEY."
        ),
    ] = None,
    task_type: Annotated[
        str | None, typer.Option(help="JSONL: Task.type of the problems (default math).")
    ] = None,
    run_config: Annotated[
        Path | None,
        typer.Option(help="A grpo run config: evaluate its held-out set as the run does."),
    ] = None,
    split: Annotated[str, typer.Option(help="With --run-config: heldout or dev.")] = "heldout",
    limit: Annotated[int, typer.Option(min=0, help="First N problems (0 = all).")] = 0,
    k: Annotated[
        list[int] | None,
        typer.Option("-k", min=1, help="Report pass@K (repeatable; default 1 and n)."),
    ] = None,
    samples: Annotated[
        int | None, typer.Option(min=1, help="Samples per problem n (default: the largest k).")
    ] = None,
    temperature: Annotated[
        float | None,
        typer.Option(
            min=0.0, help="Temperature (default 0 if n = 1, else 1; 0 is refused with n > 1)."
        ),
    ] = None,
    top_p: Annotated[float, typer.Option(min=0.0, max=1.0, help="Nucleus mass.")] = 1.0,
    max_new_tokens: Annotated[
        int,
        typer.Option(
            min=1,
            help="Tokens per sample, at most; lowered (with a warning) to what the model's "
            "context leaves after the longest prompt.",
        ),
    ] = 256,
    seed: Annotated[int, typer.Option(min=0, help="Sampling seed (0 = unseeded); arith seed.")] = 0,
    batch_size: Annotated[int, typer.Option(min=1, help="Problems per generate call.")] = 32,
    verifier: Annotated[
        str | None,
        typer.Option(
            help="Verifier service run in process (default by task type: verifier-math "
            "for math/arith, verifier-code for code) or module:SERVICE."
        ),
    ] = None,
    verifier_endpoint: Annotated[
        str | None, typer.Option(help="HOST:PORT of a running verifier instead.")
    ] = None,
    tls_ca: Annotated[Path | None, typer.Option(help="PEM CA of --verifier-endpoint.")] = None,
    tls_cert: Annotated[Path | None, typer.Option(help="PEM client certificate (mTLS).")] = None,
    tls_key: Annotated[Path | None, typer.Option(help="PEM key of --tls-cert.")] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="In-process verifier: worker processes (math), samples at once (code); unset: "
            "GRPO_VERIFIER__POOL__WORKERS / GRPO_SCORING__CONCURRENCY, else its default.",
        ),
    ] = None,
    deadline: Annotated[
        float, typer.Option(min=0.001, help="Deadline of one ScoreBatch attempt (seconds).")
    ] = 300.0,
    correct_threshold: Annotated[
        float, typer.Option(help="A verdict reward >= this is correct.")
    ] = 1.0,
    by: Annotated[
        list[str] | None,
        typer.Option(
            "--by",
            help="Break the metrics down by this task field (repeatable); refused when no "
            "problem has it.",
        ),
    ] = None,
    resume: Annotated[
        bool,
        typer.Option(
            help="Continue --output-dir: keep its samples with a verdict or invalid_input, "
            "generate the missing ones, and score again those without a verdict (undecided, "
            "internal, too_large). Refused if it was made from another dataset, model, "
            "sampling settings or verifier."
        ),
    ] = False,
    overwrite: Annotated[bool, typer.Option(help="Replace earlier results.")] = False,
    chat_template: Annotated[
        str,
        typer.Option(
            help="auto: render each prompt with the policy's chat template (--model's, or the "
            "model the --generation service was started with) when its tokenizer has one (as "
            "grpo run does with data.chat); none: the plain prompt."
        ),
    ] = "auto",
    system: Annotated[
        str | None, typer.Option(help="System message of every prompt (needs a chat template).")
    ] = None,
) -> None:
    """Generate samples of a policy, score them with a verifier, report pass@k and maj@k.

    Writes OUTPUT_DIR/samples.jsonl (one row per sample, appended as scored),
    OUTPUT_DIR/run.json (what it was made from, checked by --resume) and
    OUTPUT_DIR/summary.json (with how many samples got no verdict and why). The in-process
    verifier reads GRPO_* settings variables as grpo serve does (docs/configuration.md;
    --workers and --deadline win). Exit code: 0 when every sample has a reward, 2 for a bad
    invocation or an address (--generation, --verifier-endpoint, the run config's endpoints)
    that does not answer its Describe at the start (nothing written), 3 when some samples got
    no reward (invalid_input, too_large, undecided, internal; the count is printed and in
    summary.json), 101 when the
    evaluation could not finish, 130 when interrupted (finished samples are kept: rerun with
    --resume).
    """
    import torch
    from transformers.utils import logging as hf_logging

    from grpo.services.evaluation.eval_job import EvalJob, run_eval
    from grpo.services.evaluation.evaluate import EvalSettings
    from grpo.services.evaluation.inputs import FieldMap
    from grpo.services.evaluation.scorers import VerifierTarget
    from grpo.services.generation.backend import SamplingConfig

    torch.set_num_threads(1)
    hf_logging.disable_progress_bar()
    if split not in ("heldout", "dev"):
        raise InvalidArgumentError(f"--split must be heldout or dev, got {split!r}")
    if run_config is not None:
        if model is None:
            raise InvalidArgumentError("--run-config evaluates a policy folder: pass --model")
        _refuse_run_defined(dict(
            generation=generation, dataset=dataset, field=field or [], task_type=task_type,
            limit=limit, k=k or [], samples=samples, temperature=temperature, top_p=top_p,
            max_new_tokens=max_new_tokens, seed=seed, verifier=verifier,
            verifier_endpoint=verifier_endpoint, correct_threshold=correct_threshold,
            by=by or [], chat_template=chat_template, system=system,
        ))  # fmt: skip
    console = table_console(stderr=True)
    samples_path = output_dir / "samples.jsonl"
    kept = f"finished samples are in {samples_path}"
    with resumable_run(console, "eval", results=samples_path, kept=kept) as on_progress:
        if run_config is not None:
            assert model is not None
            report = _heldout(
                run_config, split, model, output_dir, resume=resume, overwrite=overwrite,
                on_progress=on_progress,
            )  # fmt: skip
        elif dataset is None:
            raise UsageError(
                "pass --dataset (a source or a JSONL file) or --run-config",
                option="--dataset / --run-config",
            )
        else:
            n = samples or max(k or [1])
            sampling = SamplingConfig(
                temperature=(0.0 if n == 1 else 1.0) if temperature is None else temperature,
                top_p=top_p, max_new_tokens=max_new_tokens, seed=seed,
            )  # fmt: skip
            settings = EvalSettings(
                samples=n, ks=tuple(k or ()), sampling=sampling,
                correct_threshold=correct_threshold, batch_prompts=batch_size, by=tuple(by or []),
            )  # fmt: skip
            target = VerifierTarget(
                endpoint=verifier_endpoint, service=verifier, deadline_s=deadline,
                workers=workers, tls_ca=tls_ca, tls_cert=tls_cert, tls_key=tls_key,
                service_option="--verifier",
            )  # fmt: skip
            job = EvalJob(
                output_dir, dataset, settings, model=model, generation=generation,
                verifier=target, fields=FieldMap.parse(field or []), task_type=task_type,
                limit=limit, seed=seed, chat_template=chat_template,  # type: ignore[arg-type]
                system=system, resume=resume, overwrite=overwrite,
            )  # fmt: skip
            report = run_eval(job, on_progress, lambda line: console.print(f"[yellow]{line}"))
    table_console().print(eval_table(f"grpo eval: {output_dir}", report))
    console.print(f"samples: {samples_path}  summary: {output_dir / 'summary.json'}")
    exit_for_unscored(console, report.unscored, rows="sample(s)")
