"""``grpo eval``: generate samples of a policy on a problem set, score them with a verifier,
report pass@1, pass@k, maj@k, mean reward and statuses (overall and by field).

A thin command over ``grpo.services.evaluation.evaluate``: problems come from
``evaluation.tasks`` (shipped sources or a JSONL file with a field map), or with
``--run-config`` from a ``grpo run`` config's held-out set, evaluated exactly as the run
evaluates it (``grpo.services.driver.heldout``). Writes ``samples.jsonl`` (one row per
sample, appended as scored; ``--resume``), ``run.json`` (what the folder was made from:
``--resume`` refuses another dataset, model, sampling settings or verifier) and
``summary.json`` into ``--output-dir`` and prints a table. Exits 3 when some samples got no
reward (the count is printed), as ``grpo score`` does with lines
(``cli_resumable.exit_for_unscored``), and 2 for a bad invocation.
docs/evaluation.md has the formats, the metric definitions and examples.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from grpo.cli_resumable import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    exit_for_unscored,
    resumable_run,
    table_console,
)
from grpo.errors import InvalidArgumentError, UsageError

__all__ = ["EXIT_FAILED", "EXIT_INTERRUPTED", "eval", "report_table"]


DEFAULT_VERIFIERS = {"math": "verifier-math", "arith": "verifier-math", "code": "verifier-code"}
"""Task type -> the verifier service that scores it when --verifier is not given."""


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def report_table(title: str, report: Any) -> Table:
    """A rich table of an ``EvalReport``: one row overall, one per value of each --by field;
    the caption says which samples (no verdict) the rates leave out."""
    ks = list(report.settings.ks)
    maj_k = max(ks)
    table = Table(title=title)
    m = report.overall
    if m.missing_samples:
        left_out = ", ".join(
            f"{s} {c}" for s, c in sorted(m.statuses.items()) if not _is_verdict_status(s)
        )
        table.caption = (
            f"missing: {m.missing_samples} of {m.samples} samples have no verdict ({left_out}); "
            "they are left out of pass@k, maj@k and the reward mean"
        )
    for name in ["slice", "problems", "samples", *[f"pass@{k}" for k in ks], f"maj@{maj_k}",
                 "reward mean", "missing", "statuses"]:  # fmt: skip
        table.add_column(name, justify="left" if name in ("slice", "statuses") else "right")

    def add(label: str, m: Any) -> None:
        statuses = ", ".join(f"{s} {c}" for s, c in sorted(m.statuses.items()))
        table.add_row(
            label, str(m.problems), str(m.samples), *[_fmt(m.pass_at[k]) for k in ks],
            _fmt(m.maj_at_k), _fmt(m.reward_mean), str(m.missing_samples), statuses,
        )  # fmt: skip

    add("all", report.overall)
    for name, values in report.by_field.items():
        for value, metrics in values.items():
            add(f"{name}={value or '(none)'}", metrics)
    return table


def _is_verdict_status(name: str) -> bool:
    from grpo.services.evaluation.scoring import is_verdict_status

    return is_verdict_status(name)


def _scorer(task_type: str, options: dict[str, Any]) -> Any:
    from grpo.services.evaluation.scorers import open_scorer

    service = options["verifier"] or DEFAULT_VERIFIERS.get(task_type)
    if not options["verifier_endpoint"] and service is None:
        raise InvalidArgumentError(
            f"no default verifier for task type {task_type!r}: pass --verifier module:SERVICE "
            "or --verifier-endpoint HOST:PORT"
        )
    return open_scorer(
        endpoint=options["verifier_endpoint"], service=service, deadline_s=options["deadline"],
        workers=options["workers"], tls_ca=options["tls_ca"], tls_cert=options["tls_cert"],
        tls_key=options["tls_key"],
    )  # fmt: skip


_RUN_DEFINES = (
    "generation", "dataset", "field", "task_type", "limit", "k", "samples", "temperature",
    "top_p", "max_new_tokens", "seed", "verifier", "verifier_endpoint", "correct_threshold", "by",
)  # fmt: skip
"""Options whose value ``--run-config`` takes from the run (refused when not at their default)."""


def _run(options: dict[str, Any], output_dir: Path, on_progress: Callable[[int, int], None]) -> Any:
    from grpo.services.evaluation.evaluate import (
        EvalSettings,
        check_by_fields,
        evaluate,
        sample_key,
    )
    from grpo.services.evaluation.inputs import FieldMap
    from grpo.services.evaluation.provenance import file_sha256
    from grpo.services.evaluation.results import ResultsFile
    from grpo.services.evaluation.sampling import BackendSampler, ServiceSampler
    from grpo.services.evaluation.scorers import check_verifier
    from grpo.services.evaluation.scoring import is_final
    from grpo.services.evaluation.tasks import load_problems
    from grpo.services.generation.backend import SamplingConfig

    if options["run_config"] is not None:
        from grpo.services.driver.heldout import heldout_accuracy
        from grpo.services.settings.run import load_run_config
        from grpo.services.tasks.run_tasks import load_run_tasks

        config = load_run_config(options["run_config"])
        run_tasks = load_run_tasks(config)
        tasks = run_tasks.dev if options["split"] == "dev" else run_tasks.heldout
        return heldout_accuracy(
            options["model"], tasks, config=config, task_type=run_tasks.task_type,
            out_dir=output_dir, resume=options["resume"], overwrite=options["overwrite"],
            on_progress=on_progress,
        )  # fmt: skip
    if options["dataset"] is None:
        raise UsageError(
            "pass --dataset (a source or a JSONL file) or --run-config",
            option="--dataset / --run-config",
        )
    fields = FieldMap.parse(options["field"])
    problems = load_problems(
        options["dataset"], limit=options["limit"], seed=options["seed"],
        task_type=options["task_type"], fields=fields,
    )  # fmt: skip
    dataset_file = Path(options["dataset"]) if Path(options["dataset"]).is_file() else None
    source: dict[str, Any] = {
        "dataset": "file" if dataset_file else options["dataset"],
        "limit": options["limit"],
        "task_type": problems.task_type,
        "fields": dict(sorted(fields.keys.items())),
    }
    if dataset_file is not None:
        source["sha256"] = file_sha256(dataset_file)
    about = {"dataset": str(dataset_file.resolve()) if dataset_file else options["dataset"]}
    samples = options["samples"] or max(options["k"] or [1])
    temperature = options["temperature"]
    if temperature is None:
        temperature = 0.0 if samples == 1 else 1.0
    settings = EvalSettings(
        samples=samples,
        ks=tuple(options["k"] or ()),
        sampling=SamplingConfig(
            temperature=temperature,
            top_p=options["top_p"],
            max_new_tokens=options["max_new_tokens"],
            seed=options["seed"],
        ),
        correct_threshold=options["correct_threshold"],
        batch_prompts=options["batch_size"],
        by=tuple(options["by"]),
    )
    check_by_fields(problems.tasks, problems.invalid, settings.by)
    if (options["model"] is None) == (options["generation"] is None):
        raise UsageError(
            "pass exactly one of --model (in process) or --generation",
            option="--model / --generation",
        )
    output_dir.mkdir(parents=True, exist_ok=True)
    results = ResultsFile(
        output_dir / "samples.jsonl", key=sample_key, resume=options["resume"],
        overwrite=options["overwrite"], inputs=[dataset_file] if dataset_file else [],
        keep=is_final, record_path=output_dir / "run.json", option="--output-dir",
    )  # fmt: skip
    try:
        sampler = (
            ServiceSampler(options["generation"])
            if options["generation"]
            else BackendSampler(options["model"])
        )
        with sampler, _scorer(problems.task_type, options) as scorer:
            check_verifier(
                scorer.describe(), task_type=problems.task_type, kind=None, where=scorer.where
            )
            report = evaluate(
                problems.tasks, sampler, scorer, results, settings, invalid=problems.invalid,
                lines=problems.lines, source=source, about=about, on_progress=on_progress,
            )  # fmt: skip
    finally:
        results.close()
    (output_dir / "summary.json").write_text(json.dumps(report.to_json(), indent=2) + "\n")
    return report


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
    max_new_tokens: Annotated[int, typer.Option(min=1, help="Tokens per sample, at most.")] = 256,
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
        int,
        typer.Option(
            min=1, help="In-process verifier: worker processes (math), samples at once (code)."
        ),
    ] = 2,
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
) -> None:
    """Generate samples of a policy, score them with a verifier, report pass@k and maj@k.

    Writes OUTPUT_DIR/samples.jsonl (one row per sample, appended as scored),
    OUTPUT_DIR/run.json (what it was made from, checked by --resume) and
    OUTPUT_DIR/summary.json. The in-process verifier reads GRPO_* settings variables as grpo
    serve does (docs/configuration.md; --workers and --deadline win). Exit code: 0 when every
    sample has a reward, 2 for a bad invocation (nothing written), 3 when some samples got no
    reward (invalid_input, too_large, undecided, internal; the count is printed and in
    summary.json), 101 when the evaluation could not finish, 130 when interrupted (finished
    samples are kept: rerun with --resume).
    """
    import torch
    from transformers.utils import logging as hf_logging

    torch.set_num_threads(1)
    hf_logging.disable_progress_bar()
    options = dict(
        model=model, generation=generation, dataset=dataset, field=field or [],
        task_type=task_type, run_config=run_config, split=split, limit=limit, k=k,
        samples=samples, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens,
        seed=seed, batch_size=batch_size, verifier=verifier,
        verifier_endpoint=verifier_endpoint, tls_ca=tls_ca, tls_cert=tls_cert, tls_key=tls_key,
        workers=workers, deadline=deadline, correct_threshold=correct_threshold, by=by or [],
        resume=resume, overwrite=overwrite,
    )  # fmt: skip
    if split not in ("heldout", "dev"):
        raise InvalidArgumentError(f"--split must be heldout or dev, got {split!r}")
    if run_config is not None:
        if model is None:
            raise InvalidArgumentError("--run-config evaluates a policy folder: pass --model")
        defaults = inspect.signature(eval).parameters
        ignored = [  # list options arrive as [] for their default None
            n for n in _RUN_DEFINES if options[n] not in (defaults[n].default, [])
        ]
        if ignored:
            flags = ", ".join(("-k" if n == "k" else "--" + n.replace("_", "-")) for n in ignored)
            raise InvalidArgumentError(
                f"--run-config evaluates the run's own set the run's way (greedy, one sample, "
                f"its verifier): drop {flags}, or evaluate with --dataset instead"
            )
    console = table_console(stderr=True)
    samples_path = output_dir / "samples.jsonl"
    kept = f"finished samples are in {samples_path}"
    with resumable_run(console, "eval", results=samples_path, kept=kept) as on_progress:
        report = _run(options, output_dir, on_progress)
    table_console().print(report_table(f"grpo eval: {output_dir}", report))
    console.print(f"samples: {samples_path}  summary: {output_dir / 'summary.json'}")
    exit_for_unscored(console, report.unscored, rows="sample(s)")
