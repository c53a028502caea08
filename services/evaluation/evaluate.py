"""The eval loop: generate n samples per problem, score them with a verifier, write one row per
sample as it is scored, and summarise (pass@k, maj@k, mean reward, statuses, per field).

:func:`evaluate` is what ``grpo eval`` runs and what ``grpo run``'s held-out evaluation calls
(``grpo.services.driver.heldout``; greedy, one sample): one code path, so ``grpo eval`` of a
policy on a run's held-out set gives the run's accuracy.

Problems are taken ``batch_prompts`` at a time; each batch is generated in one call and its
samples are scored (``scoring.score_stream``) and appended to the results file
(``results.ResultsFile``) as they come back. Resuming skips every (problem, sample) already
there with a final row (``scoring.is_final``: a verdict, or ``invalid_input``) and generates
only the missing samples; a sample whose row has no verdict (``undecided``, ``internal``,
``too_large``) keeps its response, which is scored again (never sampled again: resampling until
the verifier decides would bias pass@k), and the new row supersedes the old one. Before the
first row, the run record (``provenance``: problems, policy, sampling, threshold, verifier) is
written, or on resume checked against the earlier run's. A problem the model cannot take (a
prompt over its context) gets rows with status ``invalid_input`` and the reason, never a
silent 0; so does a dataset line that could not be read (one row, sample 0, with the ``by``
fields it still has), and both count in the summary as samples without a verdict.

A sample row (``samples.jsonl``): ``index`` (problem position in the dataset, unreadable lines
counted: rows are in input order), ``line`` (its 1-based line when the problems come from a
file), ``problem`` (its id), ``sample`` (0..n-1), ``fields`` (the ``by`` fields' values),
``prompt`` (the exact text the policy read: chat template included), ``response``,
``finish_reason``, ``completion_tokens``, ``policy_version``, ``correct`` (null when
missing), and the score fields of ``grpo score`` (``status``, ``reward``, ``extracted``,
``detail``, ``latency_s``, ``verifier``, ``steps``/``tests``).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo import __version__
from grpo.errors import InvalidArgumentError, UsageError
from grpo.services.evaluation.inputs import InvalidLine, ScoreItem
from grpo.services.evaluation.metrics import (
    EvalMetrics,
    ProblemSamples,
    Sample,
    breakdown,
    compute_metrics,
)
from grpo.services.evaluation.provenance import RunRecord, tasks_sha256, verifier_identity
from grpo.services.evaluation.results import ResultsFile
from grpo.services.evaluation.sampling import Sampler
from grpo.services.evaluation.scorers import INVALID_INPUT, BatchScorer, Outcome, Refusal
from grpo.services.evaluation.scoring import (
    has_reward,
    is_final,
    refusal_fields,
    score_fields,
    score_stream,
)
from grpo.v1 import common_pb2

__all__ = [
    "REASONS_SHOWN",
    "EvalReport",
    "EvalSettings",
    "check_by_fields",
    "evaluate",
    "evaluate_model",
    "greedy_sampling",
    "sample_key",
    "summarize",
]

Row = dict[str, Any]

REASONS_SHOWN = 5
"""How many distinct reasons for samples without a verdict a report keeps."""


def sample_key(row: Row) -> tuple[str, int]:
    """The resume key of a sample row: (problem id, sample index)."""
    return str(row["problem"]), int(row["sample"])


def greedy_sampling(max_new_tokens: int) -> Any:
    """Greedy decoding (temperature 0) of at most ``max_new_tokens`` tokens per response: the
    ``SamplingConfig`` of a held-out evaluation (imported on call: no torch at import time).

    Raises:
        pydantic.ValidationError: ``max_new_tokens`` < 1.
    """
    from grpo.services.generation.backend import SamplingConfig

    return SamplingConfig(temperature=0.0, max_new_tokens=max_new_tokens)


@dataclass(frozen=True)
class EvalSettings:
    """How an evaluation samples, scores and reports.

    Attributes:
        samples: n, samples per problem (>= 1).
        ks: the k of each pass@k reported (each <= ``samples``); 1 and n by default.
        sampling: a ``SamplingConfig`` (temperature 0 = greedy).
        correct_threshold: a verdict reward >= this is correct.
        batch_prompts: problems generated per call.
        by: task metadata fields to break the metrics down by.
        score_workers: scoring batches in flight.
        score_batch_items, score_batch_bytes: limits of one ScoreBatch request.

    Raises:
        InvalidArgumentError: ``samples`` or ``batch_prompts`` below 1, a k out of 1..samples.
        UsageError: (``option="--temperature"``) more than one sample at temperature 0.
    """

    samples: int = 1
    ks: tuple[int, ...] = ()
    sampling: Any = None
    correct_threshold: float = 1.0
    batch_prompts: int = 32
    by: tuple[str, ...] = ()
    score_workers: int = 2
    score_batch_items: int = 64
    score_batch_bytes: int = 4 * 1024 * 1024

    def __post_init__(self) -> None:
        if self.samples < 1:
            raise InvalidArgumentError(
                f"samples per problem (--samples) must be >= 1, got {self.samples}"
            )
        if self.batch_prompts < 1:
            raise InvalidArgumentError(
                f"problems per generate call (--batch-size) must be >= 1, got {self.batch_prompts}"
            )
        ks = self.ks or tuple(sorted({1, self.samples}))
        bad = [k for k in ks if not 1 <= k <= self.samples]
        if bad:
            raise InvalidArgumentError(
                f"pass@k needs 1 <= k <= samples ({self.samples}); got k = {bad}: raise "
                "--samples or lower -k"
            )
        object.__setattr__(self, "ks", tuple(sorted(set(ks))))
        if self.sampling is None:
            from grpo.services.generation.backend import SamplingConfig

            object.__setattr__(self, "sampling", SamplingConfig(temperature=0.0))
        if self.samples > 1 and self.sampling.temperature == 0:
            raise UsageError(
                f"{self.samples} samples per problem at temperature 0 are {self.samples} copies "
                "of one greedy answer: pass@k with k > 1 and maj@k need sampling. Set a "
                "temperature > 0 (the default with --samples > 1 is 1.0), or --samples 1",
                option="--temperature",
            )


@dataclass
class EvalReport:
    """The result of :func:`evaluate` over every row of the results file.

    Attributes:
        overall: metrics over all problems.
        by_field: field -> value -> metrics.
        settings: what was run.
        generated_now: samples generated by this call (0 when everything was resumed).
        resumed: final rows already in the file (kept as they were).
        retried: samples without a verdict in the file whose response this call scored again.
        wall_s: seconds this call took.
        missing_reasons: why samples got no verdict: (status, reason, samples), the
            :data:`REASONS_SHOWN` most common, most common first.
    """

    overall: EvalMetrics
    by_field: dict[str, dict[str, EvalMetrics]] = field(default_factory=dict)
    settings: EvalSettings = field(default_factory=EvalSettings)
    generated_now: int = 0
    resumed: int = 0
    retried: int = 0
    wall_s: float = 0.0
    missing_reasons: list[tuple[str, str, int]] = field(default_factory=list)

    @property
    def unscored(self) -> int:
        """Sample rows without a reward (``scoring.has_reward`` False: ``invalid_input``,
        ``too_large``, a status that is no verdict); ``grpo eval`` exits 3 when > 0."""
        return self.overall.samples - self.overall.verdict_samples

    @property
    def accuracy(self) -> float:
        """pass@1 (the greedy accuracy when one sample is drawn); nan with no verdict."""
        value = self.overall.pass_at.get(1)
        return float("nan") if value is None else value

    @property
    def correct(self) -> int:
        """Correct samples."""
        return self.overall.correct_samples

    @property
    def total(self) -> int:
        """Verdict samples (the denominator of pass@1 with one sample per problem)."""
        return self.overall.verdict_samples

    def to_json(self) -> dict[str, Any]:
        """The JSON summary (``summary.json``)."""
        s = self.settings
        return {
            "samples_per_problem": s.samples,
            "ks": list(s.ks),
            "sampling": s.sampling.model_dump(mode="json"),
            "correct_threshold": s.correct_threshold,
            **self.overall.to_json(),
            "by": {
                name: {value: m.to_json() for value, m in values.items()}
                for name, values in self.by_field.items()
            },
            "unscored_samples": self.unscored,
            "missing_reasons": [
                {"status": status, "reason": reason, "samples": count}
                for status, reason, count in self.missing_reasons
            ],
            "generated_now": self.generated_now,
            "resumed_rows": self.resumed,
            "retried_now": self.retried,
            "wall_s": round(self.wall_s, 2),
        }


def check_by_fields(
    tasks: Sequence[common_pb2.Task], invalid: Sequence[InvalidLine], by: Sequence[str]
) -> None:
    """Refuse a ``--by`` field that no problem has (it would put every problem in one slice).

    Args:
        tasks: the problems; their ``metadata`` keys are the fields.
        invalid: unreadable lines (their readable metadata counts too).
        by: the breakdown fields.

    Raises:
        UsageError: (``option="--by"``) a field no problem has; the message lists the fields
            the problems have.
    """
    have = {k for t in tasks for k in t.metadata} | {k for b in invalid for k in b.metadata}
    missing = [name for name in by if name not in have]
    if missing:
        listed = ", ".join(sorted(have)) if have else "none: the problems carry no metadata"
        raise UsageError(
            f"no problem has the field(s) {', '.join(missing)}; the problems' fields: {listed}",
            option="--by",
        )


def _missing(task_id: str, n: int, done: set[Any]) -> list[int]:
    return [j for j in range(n) if (task_id, j) not in done]


def _generate(
    sampler: Sampler, tasks: list[common_pb2.Task], n: int, sampling: Any
) -> list[list[common_pb2.Completion] | str]:
    """Completions per task, or the reason a task's prompt was refused (tried alone)."""
    try:
        return list(sampler.generate([t.prompt for t in tasks], n, sampling))
    except InvalidArgumentError as exc:
        if len(tasks) == 1:
            return [f"generation refused the prompt: {exc}"]
    out: list[list[common_pb2.Completion] | str] = []
    for task in tasks:
        out.extend(_generate(sampler, [task], n, sampling))
    return out


def evaluate(
    tasks: Sequence[common_pb2.Task],
    sampler: Sampler,
    scorer: BatchScorer,
    results: ResultsFile,
    settings: EvalSettings,
    *,
    invalid: Sequence[InvalidLine] = (),
    lines: Sequence[int] | None = None,
    source: Mapping[str, Any] | None = None,
    about: Mapping[str, Any] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> EvalReport:
    """Generate, score and record ``settings.samples`` samples of every task; summarise.

    Args:
        tasks: the problems (``prompt`` and what the verifier needs; ids unique).
        sampler: the policy (in process or a generation service).
        scorer: the verifier (in process or remote).
        results: the per-sample results file (opened with ``key=sample_key`` and, to retry
            the rows without a verdict, ``keep=scoring.is_final``); final rows already in it
            are kept and not generated again. With a ``record_path``, the run record is
            written (or checked, on resume) before the first row.
        settings: samples, sampling, threshold, breakdown fields.
        invalid: dataset lines that could not be read: one ``invalid_input`` row each, in the
            summary as a problem without a verdict.
        lines: the 1-based input line of each task (problems read from a file): rows carry
            it, and ``index`` orders tasks and ``invalid`` lines together in input order.
            None: ``index`` is the task's position, the ``invalid`` lines after the tasks.
        source: where the problems come from, compared on resume (``dataset``, its
            ``sha256``, ``limit``...); the tasks' own hash is always compared.
        about: facts for the record that are not compared (the dataset path).
        on_progress: ``(samples done, samples total)`` after each scored batch.

    Returns:
        An :class:`EvalReport` over every row of ``results`` (the last row of each sample).

    Raises:
        InvalidArgumentError: duplicate task ids, a task without a prompt, or a resume of a
            results file made by another run (the message names the differing fields).
        GrpoError: the verifier or the generation service was lost (rows finished so far are
            in ``results``).
        KeyboardInterrupt: interrupted (likewise).
    """
    start = time.perf_counter()
    ids = [t.id for t in tasks]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise InvalidArgumentError(f"task id {dup!r} appears twice; ids must be unique")
    empty = [t.id for t in tasks if not t.prompt]
    if empty:
        raise InvalidArgumentError(f"task {empty[0]!r} has no prompt")
    n = settings.samples
    if lines is not None and len(lines) != len(tasks):
        raise InvalidArgumentError(f"{len(lines)} line numbers for {len(tasks)} tasks")
    positions = _positions(len(tasks), [bad.line for bad in invalid], lines)
    if results.record_path is not None:
        results.claim(_record(tasks, sampler, scorer, settings, source, about))
    results.append(
        _invalid_row(bad, positions[len(tasks) + j], settings)
        for j, bad in enumerate(invalid)
        if (bad.id, 0) not in results.done
    )
    total = n * len(tasks)
    retry = {
        key: row for key, row in results.retry.items() if isinstance(row.get("response"), str)
    }  # scored again below; a retried row without a response is generated again
    done = set(results.done) | set(retry)
    progress = len(set(results.done) & {(t.id, j) for t in tasks for j in range(n)})
    generated = 0
    context: dict[int, tuple[int, common_pb2.Task, int, common_pb2.Completion]] = {}
    retried = _rescore(tasks, scorer, results, retry, settings)
    progress += retried

    def sink(batch: list[tuple[ScoreItem, Outcome]]) -> None:
        nonlocal progress
        rows = []
        for item, scored in batch:
            index, task, pos, completion = context.pop(item.line)
            rows.append(_row(index, task, pos, completion, scored, settings, line_of(index)))
        progress += results.append(rows)
        if on_progress is not None:
            on_progress(progress, total)

    line_by_index = {positions[i]: lines[i] for i in range(len(tasks))} if lines else {}

    def line_of(index: int) -> int | None:
        return line_by_index.get(index)

    for lo in range(0, len(tasks), settings.batch_prompts):
        chunk = [
            (positions[i], tasks[i])
            for i in range(lo, min(lo + settings.batch_prompts, len(tasks)))
        ]
        by_missing: dict[int, list[tuple[int, common_pb2.Task, list[int]]]] = {}
        for index, task in chunk:
            todo = _missing(task.id, n, done)
            if todo:
                by_missing.setdefault(len(todo), []).append((index, task, todo))
        for count, group in by_missing.items():
            generations = _generate(sampler, [t for _, t, _ in group], count, settings.sampling)
            items: list[ScoreItem] = []
            refused_rows: list[Row] = []
            for (index, task, todo), outcome in zip(group, generations, strict=True):
                for j, pos in enumerate(todo):
                    if isinstance(outcome, str):
                        refusal = Refusal(INVALID_INPUT, outcome)
                        refused_rows.append(
                            _row(index, task, pos, None, refusal, settings, line_of(index))
                        )
                        continue
                    line = index * n + pos
                    context[line] = (index, task, pos, outcome[j])
                    items.append(ScoreItem(line, f"{task.id}#{pos}", task, outcome[j].text))
            generated += len(items)
            progress += results.append(refused_rows)
            _score(items, scorer, sink, settings)
    results.sort(lambda row: (int(row["index"]), int(row["sample"])))
    wanted = set(ids) | {bad.id for bad in invalid}
    rows = [row for row in results.rows() if str(row["problem"]) in wanted]
    fields = {t.id: {name: t.metadata.get(name, "") for name in settings.by} for t in tasks}
    fields.update({b.id: {name: b.metadata.get(name, "") for name in settings.by} for b in invalid})
    report = summarize(rows, settings, fields=fields)
    report.generated_now = generated
    report.resumed = results.resumed_rows
    report.retried = retried
    report.wall_s = time.perf_counter() - start
    return report


def _record(
    tasks: Sequence[common_pb2.Task],
    sampler: Sampler,
    scorer: BatchScorer,
    settings: EvalSettings,
    source: Mapping[str, Any] | None,
    about: Mapping[str, Any] | None,
) -> RunRecord:
    """The run record of an evaluation (``provenance``; compared on resume)."""
    return RunRecord(
        "eval",
        identity={
            "problems": {**dict(source or {}), "tasks_sha256": tasks_sha256(tasks)},
            "policy": sampler.identity(),
            "sampling": {"samples": settings.samples, **settings.sampling.model_dump(mode="json")},
            "correct_threshold": settings.correct_threshold,
            "verifier": verifier_identity(scorer.describe()),
        },
        about={
            **dict(about or {}),
            "policy_at": sampler.where,
            "verifier_at": scorer.where,
            "grpo": __version__,
        },
    )


def _positions(tasks: int, invalid_lines: Sequence[int], lines: Sequence[int] | None) -> list[int]:
    """``index`` of each task, then of each invalid line: their rank in input order (by line
    number when the tasks' lines are known; else tasks first, in order)."""
    if lines is None:
        return list(range(tasks + len(invalid_lines)))
    keyed = [(line, k) for k, line in enumerate([*lines, *invalid_lines])]
    out = [0] * len(keyed)
    for rank, (_, k) in enumerate(sorted(keyed)):
        out[k] = rank
    return out


def _invalid_row(bad: InvalidLine, index: int, settings: EvalSettings) -> Row:
    """The one ``invalid_input`` row (sample 0) of a dataset line that could not be read, at
    its input position, with the ``by`` fields it still has."""
    return {
        "index": index,
        "line": bad.line,
        "problem": bad.id,
        "sample": 0,
        "fields": {name: bad.metadata.get(name, "") for name in settings.by},
        "correct": None,
        **refusal_fields(Refusal(INVALID_INPUT, bad.reason)),
    }


_SCORE_KEYS = ("status", "reward", "extracted", "detail", "latency_s", "verifier", "steps",
               "tests", "correct")  # fmt: skip
"""The fields of a sample row that scoring fills (the rest describe the generation)."""


def _rescore(
    tasks: Sequence[common_pb2.Task],
    scorer: BatchScorer,
    results: ResultsFile,
    retry: Mapping[Any, Row],
    settings: EvalSettings,
) -> int:
    """Score the kept responses of the rows without a verdict again; append the new rows
    (they supersede the old ones). Returns how many rows were written."""
    by_id = {t.id: t for t in tasks}
    items: list[ScoreItem] = []
    old: dict[int, Row] = {}
    for (problem, sample), row in retry.items():
        task = by_id.get(problem)
        if task is None:
            continue
        old[len(items)] = row
        items.append(ScoreItem(len(items), f"{problem}#{sample}", task, str(row["response"])))
    written = 0

    def sink(batch: list[tuple[ScoreItem, Outcome]]) -> None:
        nonlocal written
        rows = []
        for item, outcome in batch:
            row = {k: v for k, v in old[item.line].items() if k not in _SCORE_KEYS}
            row.update(_scored(outcome, settings))
            rows.append(row)
        written += results.append(rows)

    _score(items, scorer, sink, settings)
    return written


def _score(
    items: list[ScoreItem],
    scorer: BatchScorer,
    sink: Callable[[list[tuple[ScoreItem, Outcome]]], None],
    settings: EvalSettings,
) -> None:
    """``score_stream`` with the run's scoring workers and batch limits."""
    score_stream(
        items,
        scorer,
        sink,
        workers=settings.score_workers,
        max_items=settings.score_batch_items,
        max_bytes=settings.score_batch_bytes,
    )


def _scored(outcome: Outcome, settings: EvalSettings) -> Row:
    """``correct`` and the score fields of an outcome (``correct`` null without a reward)."""
    scored = refusal_fields(outcome) if isinstance(outcome, Refusal) else score_fields(outcome)
    correct = bool(scored["reward"] >= settings.correct_threshold) if has_reward(scored) else None
    return {"correct": correct, **scored}


def _row(
    index: int,
    task: common_pb2.Task,
    sample: int,
    completion: common_pb2.Completion | None,
    outcome: Outcome,
    settings: EvalSettings,
    line: int | None = None,
) -> Row:
    row: Row = {"index": index}
    if line is not None:
        row["line"] = line
    row |= {
        "problem": task.id,
        "sample": sample,
        "fields": {name: task.metadata.get(name, "") for name in settings.by},
        "prompt": task.prompt,
    }
    if completion is not None:
        row["response"] = completion.text
        row["finish_reason"] = (
            str(common_pb2.FinishReason.Name(completion.finish_reason))
            .removeprefix("FINISH_REASON_")
            .lower()
        )
        row["completion_tokens"] = len(completion.token_ids)
        row["policy_version"] = completion.policy_version
    row.update(_scored(outcome, settings))
    return row


def summarize(
    rows: Sequence[Row],
    settings: EvalSettings,
    *,
    fields: Mapping[str, Mapping[str, str]] | None = None,
) -> EvalReport:
    """Metrics of sample rows (overall and per ``settings.by`` field).

    Args:
        rows: sample rows; rows of one problem are grouped by ``problem``; the rows without
            a reward give ``missing_reasons`` (by status and ``detail``).
        settings: ks and the breakdown fields.
        fields: problem id -> its field values (default: each row's ``fields``).
    """
    grouped: dict[str, list[Row]] = {}
    for row in rows:
        grouped.setdefault(str(row["problem"]), []).append(row)
    problems = [
        ProblemSamples(
            problem=pid,
            samples=tuple(
                Sample(
                    index=int(r["sample"]),
                    status=str(r["status"]),
                    reward=r.get("reward"),
                    correct=r.get("correct"),
                    answer=str(r.get("extracted") or ""),
                )
                for r in group
            ),
            fields=dict(fields[pid]) if fields and pid in fields else group[0].get("fields", {}),
        )
        for pid, group in grouped.items()
    ]
    ks, maj_k = settings.ks, max(settings.ks)
    reasons = Counter(
        (str(r["status"]), str(r.get("detail") or "(no detail)")) for r in rows if not has_reward(r)
    )
    return EvalReport(
        overall=compute_metrics(problems, ks=ks, maj_k=maj_k),
        by_field={name: breakdown(problems, name, ks=ks, maj_k=maj_k) for name in settings.by},
        settings=settings,
        missing_reasons=[(s, d, c) for (s, d), c in reasons.most_common(REASONS_SHOWN)],
    )


def evaluate_model(
    model: Any,
    tasks: Sequence[common_pb2.Task],
    scorer: BatchScorer,
    settings: EvalSettings,
    *,
    out_dir: Path | None = None,
    resume: bool = False,
    overwrite: bool = True,
    on_progress: Callable[[int, int], None] | None = None,
) -> EvalReport:
    """:func:`evaluate` of a policy generated in this process, with the files in ``out_dir``.

    Args:
        model: a ``save_pretrained`` folder (or hub id), or a ``GenerationBackend``.
        tasks, scorer, settings, on_progress: see :func:`evaluate` (``scorer`` not closed).
        out_dir: folder for ``samples.jsonl``, ``run.json`` (the run record) and
            ``summary.json``; None keeps none.
        resume, overwrite: for an ``out_dir`` that holds samples (see ``ResultsFile``).

    Returns:
        The :class:`EvalReport`.

    Raises:
        See :func:`evaluate`; ``ResultsFile`` errors for ``out_dir``.
    """
    import json
    import tempfile

    from grpo.services.evaluation.sampling import BackendSampler

    with tempfile.TemporaryDirectory(prefix="grpo-eval-") as tmp:
        folder = Path(tmp) if out_dir is None else out_dir
        folder.mkdir(parents=True, exist_ok=True)
        results = ResultsFile(
            folder / "samples.jsonl",
            key=sample_key,
            resume=resume,
            overwrite=overwrite and not resume,
            keep=is_final,
            record_path=None if out_dir is None else out_dir / "run.json",
        )
        try:
            with BackendSampler(model) as sampler:
                report = evaluate(
                    tasks, sampler, scorer, results, settings, on_progress=on_progress
                )
        finally:
            results.close()
    if out_dir is not None:
        (out_dir / "summary.json").write_text(json.dumps(report.to_json(), indent=2) + "\n")
    return report
