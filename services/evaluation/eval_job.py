"""One ``grpo eval`` run over a problem set: the frozen :class:`EvalJob` and :func:`run_eval`.

``grpo eval`` builds an :class:`EvalJob` (where the problems come from, which policy samples,
which verifier scores, the ``EvalSettings``) straight from its options, and ``run_eval``
loads the problems (``tasks.load_problems``), opens the sampler and the scorer, fits the
token budget to the model (:func:`fit_to_context`), runs the eval loop
(``evaluate.evaluate``) and writes ``summary.json``.

Chat templates: each prompt is rendered with the policy's chat template when its tokenizer
has one (``chat_template: auto``, the default; ``--system`` adds a system turn), by the
function that renders a run's prompts for training (``grpo.services.tasks.chat.
chat_renderer``). The policy is ``--model``, or with ``--generation`` the model the service
was started with (its ``Describe``'s ``model_path``, read here: a folder this process cannot
read keeps plain prompts with a warning, and a system message is then refused).

Fitting the budget: with a policy generated in this process, ``max_new_tokens`` is lowered
to the model's context minus the longest prompt that fits in it (with a warning), so a default
made for large models (256) does not make every sample of a small one (a 128-token context)
``invalid_input``. A prompt longer than the context is refused with that reason and counted.
Over a generation service the prompts' token counts are not known here: nothing is changed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from grpo.errors import InvalidArgumentError, NotFoundError, UsageError
from grpo.services.evaluation.evaluate import (
    EvalReport,
    EvalSettings,
    check_by_fields,
    evaluate,
    sample_key,
)
from grpo.services.evaluation.inputs import FieldMap
from grpo.services.evaluation.provenance import file_sha256
from grpo.services.evaluation.results import ResultsFile
from grpo.services.evaluation.sampling import (
    BackendSampler,
    Sampler,
    ServiceSampler,
    describe_generation,
)
from grpo.services.evaluation.scorers import (
    VerifierTarget,
    check_target,
    check_verifier,
    open_scorer,
)
from grpo.services.evaluation.scoring import is_final
from grpo.services.evaluation.tasks import ProblemSet, load_problems
from grpo.services.tasks.chat import chat_renderer, rendered
from grpo.v1 import common_pb2

__all__ = ["DEFAULT_VERIFIERS", "EvalJob", "fit_to_context", "run_eval"]

DEFAULT_VERIFIERS = {"math": "verifier-math", "arith": "verifier-math", "code": "verifier-code"}
"""Task type -> the verifier service that scores it when the job names none."""


@dataclass(frozen=True)
class EvalJob:
    """One ``grpo eval`` run over a dataset.

    Attributes:
        output_dir: folder for ``samples.jsonl``, ``run.json`` and ``summary.json``.
        dataset: a shipped source (``tasks.SOURCES``) or a JSONL file of problems.
        settings: samples, ks, sampling, threshold, batch size, breakdown fields.
        model: a policy folder (or hub id) generated in this process; or None with
        generation: ``HOST:PORT`` of a running ``grpo.v1.Generation`` service.
        verifier: the verifier; its ``service`` None (and no endpoint) = the task type's
            default (:data:`DEFAULT_VERIFIERS`).
        fields: where a JSONL file's fields are read from.
        task_type: ``Task.type`` of a JSONL file's problems (default math).
        limit: first N problems (0 = all).
        seed: the ``arith`` generator's seed.
        chat_template: ``auto``: each prompt rendered with the policy's chat template when
            its tokenizer has one (``grpo.services.tasks.chat``: ``model``, or the model of
            the ``generation`` service); ``none``: plain prompts.
        system: the system message of every prompt (needs a chat template).
        resume, overwrite: for an ``output_dir`` that holds samples (``ResultsFile``).

    Raises:
        UsageError: (naming the options) neither or both of ``model`` and ``generation``; a
            system message with ``chat_template`` none.
    """

    output_dir: Path
    dataset: str
    settings: EvalSettings
    model: Path | str | None = None
    generation: str | None = None
    verifier: VerifierTarget = field(default_factory=VerifierTarget)
    fields: FieldMap = field(default_factory=FieldMap)
    task_type: str | None = None
    limit: int = 0
    seed: int = 0
    chat_template: Literal["auto", "none"] = "auto"
    system: str | None = None
    resume: bool = False
    overwrite: bool = False

    def __post_init__(self) -> None:
        if (self.model is None) == (self.generation is None):
            raise UsageError(
                "pass exactly one of --model (in process) or --generation",
                option="--model / --generation",
            )
        if self.chat_template not in ("auto", "none"):
            raise UsageError(
                f"{self.chat_template!r}: choose auto or none", option="--chat-template"
            )
        if self.system is not None and self.chat_template == "none":
            raise UsageError(
                "a system message needs the model's chat template: --chat-template auto",
                option="--system",
            )

    def chat(self, problems: ProblemSet, policy: Path | str | None) -> ProblemSet:
        """``problems`` with every prompt through the policy's chat template
        (``chat_template``), rendered as a run's prompts are (``chat_renderer``).

        Args:
            problems: the loaded problems.
            policy: the folder or hub id whose tokenizer reads the prompts: ``model``, or the
                ``generation`` service's model path (None: not known, prompts stay plain).

        Raises:
            FailedPreconditionError: ``system`` is set but the tokenizer has no template (or
                cannot be read here).
        """
        render = chat_renderer(
            policy, template=self.chat_template, system=self.system, system_name="--system"
        )
        if render is None:
            return problems
        return replace(problems, tasks=rendered(problems.tasks, render))

    def dataset_file(self) -> Path | None:
        """The dataset as a file, or None for a shipped source."""
        path = Path(self.dataset)
        return path if path.is_file() else None

    def scorer_target(self, task_type: str) -> VerifierTarget:
        """The verifier, with the task type's default service when none is named.

        Raises:
            InvalidArgumentError: no verifier named and none known for ``task_type``.
        """
        target = self.verifier
        if target.endpoint or target.service:
            return target
        if task_type not in DEFAULT_VERIFIERS:
            raise InvalidArgumentError(
                f"no default verifier for task type {task_type!r}: pass --verifier "
                "module:SERVICE or --verifier-endpoint HOST:PORT"
            )
        return replace(target, service=DEFAULT_VERIFIERS[task_type])


def fit_to_context(
    settings: EvalSettings,
    sampler: Sampler,
    tasks: Sequence[common_pb2.Task],
    warn: Callable[[str], None],
) -> EvalSettings:
    """``settings`` with ``max_new_tokens`` lowered to what the model's context leaves after
    the longest prompt that fits (module docstring); ``warn`` is told when it is lowered.

    Args:
        settings: the requested settings.
        sampler: the policy; :meth:`Sampler.context_tokens` and :meth:`Sampler.prompt_tokens`
            give the context (tokens) and each prompt's length (tokens), or None (a service).
        tasks: the problems.
        warn: called with one line when the budget is lowered.

    Returns:
        ``settings``, or a copy with the lowered ``sampling.max_new_tokens``.
    """
    context = sampler.context_tokens()
    lengths = sampler.prompt_tokens([t.prompt for t in tasks]) if tasks else None
    if context is None or not lengths:
        return settings
    fitting = [(n, t.id) for n, t in zip(lengths, tasks, strict=True) if n < context]
    if not fitting:
        return settings  # every prompt is refused, each with its reason
    longest, task_id = max(fitting)
    budget = context - longest
    requested = settings.sampling.max_new_tokens
    if requested <= budget:
        return settings
    warn(
        f"max_new_tokens {requested} lowered to {budget}: the model's context is {context} "
        f"tokens and the longest prompt ({task_id}) has {longest}"
    )
    sampling = settings.sampling.model_copy(update={"max_new_tokens": budget})
    return replace(settings, sampling=sampling)


def _source(job: EvalJob, problems: ProblemSet) -> tuple[dict[str, Any], dict[str, Any]]:
    """What the problems are (compared on resume) and where they were read from (not)."""
    dataset_file = job.dataset_file()
    source: dict[str, Any] = {
        "dataset": "file" if dataset_file else job.dataset,
        "limit": job.limit,
        "task_type": problems.task_type,
        "fields": dict(sorted(job.fields.keys.items())),
    }
    if dataset_file is not None:
        source["sha256"] = file_sha256(dataset_file)
    about = {"dataset": str(dataset_file.resolve()) if dataset_file else job.dataset}
    return source, about


def _open_sampler(job: EvalJob) -> Sampler:
    """The sampler of ``job``: its ``generation`` service, or its ``model`` loaded here.

    Raises:
        UsageError: (``option="--model"``) a model that cannot be found (a folder without
            ``config.json``, a path that does not exist).
    """
    if job.generation:
        return ServiceSampler(job.generation)
    try:
        return BackendSampler(job.model)
    except NotFoundError as exc:
        raise UsageError(str(exc), option="--model") from None


def run_eval(
    job: EvalJob,
    on_progress: Callable[[int, int], None] | None = None,
    warn: Callable[[str], None] = lambda _line: None,
) -> EvalReport:
    """Run ``job``: generate, score and record every sample; write ``summary.json``.

    Args:
        job: the run.
        on_progress: ``(samples done, total)`` after each scored batch.
        warn: one-line warnings (the token budget lowered to fit the model).

    Returns:
        The ``EvalReport`` (also in ``output_dir/summary.json``).

    Raises:
        UsageError: a dataset that is neither a source nor a file, a ``--by`` field no problem
            has, a results folder that holds samples without ``resume``/``overwrite``.
        InvalidArgumentError: bad settings, no verifier for the task type, a resume of
            another run.
        EndpointCheckError: ``generation`` or the verifier's endpoint does not answer its
            ``Describe`` (checked before anything is written), or the verifier does not serve
            the task type.
        UsageError: (``option="--model"``) a model folder that cannot be found, or
            (``--verifier``) an in-process verifier that cannot be loaded; nothing written.
        FailedPreconditionError: a system message and no chat template.
        GrpoError: the verifier or the generation service was lost (finished rows are kept).
    """
    problems = load_problems(
        job.dataset, limit=job.limit, seed=job.seed, task_type=job.task_type, fields=job.fields
    )
    check_by_fields(problems.tasks, problems.invalid, job.settings.by)
    target = job.scorer_target(problems.task_type)
    # The addresses it was given answer, before anything is written (as grpo run checks).
    policy = job.model
    if job.generation:
        policy = describe_generation(job.generation).model_path or None
    check_target(target, task_type=problems.task_type, kind=None)
    # The policy and the verifier are loaded before anything is written: a --model folder
    # or a --verifier that cannot be loaded is a usage error, and no samples.jsonl is left.
    with _open_sampler(job) as sampler, open_scorer(target) as scorer:
        check_verifier(
            scorer.describe(), task_type=problems.task_type, kind=None, where=scorer.where
        )
        problems = job.chat(problems, policy)
        source, about = _source(job, problems)
        job.output_dir.mkdir(parents=True, exist_ok=True)
        dataset_file = job.dataset_file()
        results = ResultsFile(
            job.output_dir / "samples.jsonl", key=sample_key, resume=job.resume,
            overwrite=job.overwrite, inputs=[dataset_file] if dataset_file else [],
            keep=is_final, record_path=job.output_dir / "run.json", option="--output-dir",
        )  # fmt: skip
        try:
            settings = fit_to_context(job.settings, sampler, problems.tasks, warn)
            report = evaluate(
                problems.tasks, sampler, scorer, results, settings, invalid=problems.invalid,
                lines=problems.lines, source=source, about=about, on_progress=on_progress,
            )  # fmt: skip
        finally:
            results.close()
    summary = json.dumps(report.to_json(), indent=2) + "\n"
    (job.output_dir / "summary.json").write_text(summary)
    return report
