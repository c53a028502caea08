"""``RunConfig``: everything ``grpo run`` needs, read from one YAML file (plus CLI overrides).

Sections: ``data`` (tasks and the held-out set), ``model`` (policy path or a fresh tiny model,
and the SFT warm start), ``generation`` (G, temperature, max tokens, backpressure),
``verifiers`` (which verifiers score outcome and process, by service name, ``module:SERVICE``
or endpoint, with weights: ``grpo.services.settings.verifiers``), ``assembler`` (deadlines and
dynamic sampling, ``grpo.services.settings.assembler.AssemblerConfig``), ``learner`` (trainer and
algorithm settings, batch B groups per step, publish every K, checkpoint every M), ``eval``
(held-out greedy accuracy every N steps) and ``budget`` (learner steps and wall clock).

The orchestrator turns a RunConfig into one settings YAML per service (see
``grpo.services.settings.services``); each section's ``extra`` mapping is merged into
that service's YAML, for settings this model does not name; each is validated at load time
against that service's settings model (``check_extra_blocks``, ``check_verifiers_config``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from grpo.errors import InvalidArgumentError
from grpo.learner.choices import SftScheduleName
from grpo.learner.config import LearnerAlgoConfig, LoraConfig, TrainerConfig
from grpo.learner.tracking import TrackingConfig
from grpo.services.runtime.config import load_settings
from grpo.services.settings.assembler import AssemblerConfig
from grpo.services.settings.data import (
    ArithConfig,
    ChatConfig,
    CurriculumConfig,
    DataConfig,
    DatasetSourceConfig,
)
from grpo.services.settings.verifiers import VerifiersConfig, check_verifiers_config

__all__ = [
    "SHARED_WITH_GENERATION",
    "ArithConfig",
    "BudgetConfig",
    "ChatConfig",
    "CurriculumConfig",
    "DataConfig",
    "DatasetSourceConfig",
    "EvalConfig",
    "GenerationRunConfig",
    "LearnerRunConfig",
    "ModelConfig",
    "RunConfig",
    "SftConfig",
    "TinyModelConfig",
    "VerifiersConfig",
    "load_run_config",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class RestartPolicy(BaseModel):
    """When the supervisor restarts a failed service and when it gives up."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_restarts: int = Field(
        default=5,
        ge=0,
        description="Restarts of one service allowed within window_s; one more death fails the "
        "run with a summary (0 = fail at the first death).",
    )
    window_s: float = Field(
        default=600.0, gt=0, description="Window over which restarts are counted (seconds)."
    )
    backoff_initial_s: float = Field(
        default=0.5, ge=0, description="Wait before the first restart (seconds); doubles per death."
    )
    backoff_max_s: float = Field(
        default=15.0, ge=0, description="Longest wait before a restart (seconds)."
    )
    stall_s: float = Field(
        default=60.0,
        ge=0,
        description="Liveness: a service that has not answered its health check SERVING for "
        "this long (stopped, hung, or a loop that stopped advancing for as long: each "
        "service's server.stall_s) is killed and restarted, named on the console and in "
        "summary.json's deaths and stalls (seconds; 0 = never killed, only named). A restarted "
        "service may take budget.startup_timeout_s to answer first.",
    )
    loop_stall_s: float = Field(
        default=600.0,
        ge=0,
        description="Each service's server.stall_s: its health turns NOT_SERVING while one of "
        "its loops (a learner step, a generate call, a scoring batch) has not advanced for "
        "this long, so a wedged loop is restarted like a hung process (seconds; 0 = off). "
        "Keep it above the longest step or checkpoint.",
    )
    redis_reply_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="Longest wait for one Redis reply by every component of the run (each "
        "service's server.redis_reply_timeout_s, grpo run's own client, the driver's): a "
        "Redis that answers nothing (stopped, wedged; one grpo run cannot restart, as an "
        "external REDIS_URL) is then an outage, ridden out and counted in outage_s.redis, "
        "instead of a call that waits until the loop-stall check. Keep every blocking stream "
        "read (block_ms) at most half of it (seconds).",
    )
    preload: bool = Field(
        default=True,
        description="Fork each service from one interpreter that imported torch, transformers "
        "and the services once (grpo.local.preload; needs a Linux subreaper, else "
        "fresh processes); false: every service starts a fresh interpreter.",
    )

    @model_validator(mode="after")
    def _check(self) -> RestartPolicy:
        if self.backoff_max_s < self.backoff_initial_s:
            raise ValueError("supervision.backoff_max_s must be >= backoff_initial_s")
        return self


class TinyModelConfig(BaseModel):
    """Shape of a fresh tiny model (``grpo.model.init_tiny_model``)."""

    model_config = _FROZEN

    hidden: int = Field(default=128, ge=8, description="Hidden size.")
    layers: int = Field(default=4, ge=1, description="Decoder layers.")
    heads: int = Field(default=4, ge=1, description="Attention heads.")
    kv_heads: int = Field(default=2, ge=1, description="Key/value heads.")
    intermediate: int = Field(default=512, ge=8, description="MLP inner size.")
    max_positions: int = Field(default=512, ge=16, description="Context length (tokens).")


class SftConfig(BaseModel):
    """Supervised warm start on worked solutions before GRPO (``grpo.learner.sft.run_sft``)."""

    model_config = _FROZEN

    enabled: bool = Field(default=True, description="Run SFT before GRPO.")
    examples: int = Field(
        default=4000, ge=1, description="Worked examples (arith: drawn disjoint from held-out)."
    )
    steps: int = Field(default=0, ge=0, description="Optimizer steps (0 = bounded by time/epochs).")
    epochs: float = Field(
        default=0.0, ge=0, description="Passes over the examples (0 = unbounded)."
    )
    time_budget_s: float = Field(
        default=0.0, ge=0, description="Wall-clock bound in seconds (0 = none)."
    )
    lr: float = Field(default=3e-3, gt=0, description="Peak AdamW learning rate.")
    batch_size: int = Field(default=32, ge=1, description="Examples per step.")
    warmup_steps: int = Field(default=20, ge=0, description="Linear warmup steps.")
    schedule: SftScheduleName = Field(
        default="cosine", description="LR after warmup: cosine decay to 10%, or constant."
    )
    target_accuracy: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="Stop SFT once the greedy accuracy on the dev set reaches this (0 = off); "
        "checked every check_every steps. The held-out set is never used for this.",
    )
    check_every: int = Field(
        default=25, ge=1, description="Steps between dev-set checks (with target_accuracy)."
    )
    dev_size: int = Field(
        default=300,
        ge=1,
        description="Dev prompts for target_accuracy (arith: drawn disjoint from held-out).",
    )
    checkpoint_every_s: float = Field(
        default=120.0,
        ge=0,
        description="Seconds of SFT between resumable checkpoints in <run_dir>/model/"
        "sft-checkpoints (model, optimizer, schedule, data position, RNG; one is also written "
        "on Ctrl-C/SIGTERM); 0 = only on an interrupt. grpo run --resume continues from the "
        "newest intact one.",
    )

    @model_validator(mode="after")
    def _check(self) -> SftConfig:
        if self.enabled and not (self.steps or self.epochs or self.time_budget_s):
            raise ValueError("model.sft needs steps, epochs or time_budget_s > 0 when enabled")
        return self


class ModelConfig(BaseModel):
    """The policy: an existing HF folder, or a fresh tiny model; optional SFT warm start."""

    model_config = _FROZEN

    path: str | None = Field(
        default=None, description="save_pretrained folder of the policy; None = init a tiny model."
    )
    tiny: TinyModelConfig = Field(
        default_factory=TinyModelConfig, description="Tiny model shape (path unset)."
    )
    sft: SftConfig = Field(
        default_factory=lambda: SftConfig(enabled=False), description="SFT warm start."
    )
    lora: LoraConfig | None = Field(
        default=None,
        description="GRPO trains LoRA adapters {r, alpha, dropout, target_modules} on the "
        "(SFT) policy instead of every weight; null = full fine-tuning.",
    )


class GenerationRunConfig(BaseModel):
    """Sampling of rollouts by the rollout worker."""

    model_config = _FROZEN

    group_size: int = Field(default=8, ge=2, description="Rollouts per prompt (G).")
    temperature: float = Field(default=1.0, gt=0, description="Sampling temperature.")
    top_p: float = Field(default=1.0, gt=0, le=1, description="Nucleus mass; 1 disables it.")
    max_new_tokens: int = Field(
        default=48, ge=1, description="Generated tokens per rollout, at most."
    )
    stop: list[str] = Field(default_factory=list, description="Stop strings (kept in the text).")
    prompts_ahead: int = Field(
        default=4,
        ge=1,
        description="Backpressure: most prompt jobs waiting for or in generation at once.",
    )
    groups_ahead: int | None = Field(
        default=None,
        ge=1,
        description="Backpressure: most closed groups not yet delivered to the learner before "
        "the feeder pauses; null = 2 x learner.batch_groups. With prompts_ahead it bounds how "
        "many policy versions old a trained group is (policy/staleness_mean).",
    )
    workers: int = Field(default=1, ge=1, description="Rollout worker processes.")
    extra: dict[str, Any] = Field(
        default_factory=dict, description="Merged verbatim into the rollout worker's YAML."
    )


class LearnerRunConfig(BaseModel):
    """The learner service: algorithm, optimizer, batch and cadence."""

    model_config = _FROZEN

    batch_groups: int = Field(default=8, ge=1, description="Groups per learner step (B).")
    publish_every: int = Field(default=1, ge=1, description="Publish weights every K steps.")
    checkpoint_every: int = Field(default=5, ge=1, description="Checkpoint every M steps.")
    trainer: TrainerConfig = Field(
        default_factory=lambda: TrainerConfig(),
        description="Optimizer, schedule, micro-batches (grpo.learner.trainer.TrainerConfig); "
        "temperature, max_response_length and seed are derived from generation and the run "
        "seed (SHARED_WITH_GENERATION).",
    )
    algo: LearnerAlgoConfig = Field(
        default_factory=LearnerAlgoConfig,
        description="Advantages, clipping, reduction, KL, process credit "
        "(grpo.learner.config.LearnerAlgoConfig).",
    )
    extra: dict[str, Any] = Field(
        default_factory=dict, description="Merged verbatim into the learner's YAML."
    )


class EvalConfig(BaseModel):
    """Held-out greedy accuracy."""

    model_config = _FROZEN

    every_steps: int = Field(
        default=0,
        ge=0,
        description="Evaluate the latest published policy every N steps (0 = only "
        "before and after). Training goes on during an evaluation; when the learner passes "
        "several multiples of N meanwhile, the next evaluation is for the latest of them.",
    )
    max_new_tokens: int = Field(default=48, ge=1, description="Greedy generation budget per task.")
    batch_size: int = Field(default=100, ge=1, description="Prompts per generate call.")


class BudgetConfig(BaseModel):
    """When the run stops: the first of these reached."""

    model_config = _FROZEN

    steps: int = Field(default=20, ge=1, description="Learner steps.")
    wall_clock_s: float = Field(
        default=900.0, gt=0, description="Wall-clock bound of the GRPO phase (seconds)."
    )
    generated_tokens: int = Field(
        default=0,
        ge=0,
        description="Most generated tokens (the assembler's count; 0 = no bound): no prompt job "
        "is fed whose worst case (G x max_new_tokens per group, its regenerations included) "
        "could pass what is left, and the run stops when none fits; compares runs at equal "
        "generation cost.",
    )
    startup_timeout_s: float = Field(
        default=120.0, gt=0, description="How long services may take to become healthy (seconds)."
    )
    stop_grace_s: float = Field(
        default=10.0, ge=0, description="SIGTERM grace before SIGKILL at shutdown (seconds)."
    )


SHARED_WITH_GENERATION: dict[str, tuple[str, str]] = {
    "temperature": ("generation", "temperature"),
    "max_response_length": ("generation", "max_new_tokens"),
}
"""``learner.trainer`` field -> the ``(section, field)`` it must equal: π_old is computed at
the sampler's temperature and the fixed-budget reduction divides by the sampler's L_max, so the
learner's values are derived from ``generation``, never set on their own."""


def _get(tree: Any, key: str) -> Any:
    """``tree[key]`` for a mapping, ``getattr`` for a model, else None."""
    if isinstance(tree, BaseModel):
        return getattr(tree, key, None)
    if isinstance(tree, dict):
        return tree.get(key)
    return None


def _same(a: Any, b: Any) -> bool:
    """Equal as numbers when both read as numbers (environment values are strings)."""
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return bool(a == b)


def _as_dict(tree: Any) -> dict[str, Any]:
    """A shallow mutable copy of a section given as a mapping or a model (unset fields out)."""
    if isinstance(tree, BaseModel):
        return tree.model_dump(exclude_unset=True)
    return dict(tree) if isinstance(tree, dict) else {}


def _derive_shared(data: Any) -> Any:
    """Fill ``learner.trainer``'s values shared with generation (and the seed) from their
    source, the one place they are derived; reject a conflicting explicit setting.

    Raises:
        ValueError: ``learner.trainer.<field>`` is set to a value other than its source's, or
            a section's ``extra`` mapping sets one of the shared values behind the typed field.
    """
    if not isinstance(data, dict):
        return data
    out = dict(data)
    learner = _as_dict(out.get("learner"))
    trainer = _as_dict(learner.get("trainer"))
    for field, (section, source) in SHARED_WITH_GENERATION.items():
        value = _get(out.get(section), source)
        if value is None:
            value = GenerationRunConfig.model_fields[source].default
        given = trainer.get(field)
        if given is not None and not _same(given, value):
            raise ValueError(
                f"learner.trainer.{field}={given!r} conflicts with {section}.{source}={value!r}: "
                f"the learner must use the sampler's value; set {section}.{source} only"
            )
        trainer[field] = value
    if trainer.get("seed") is None:
        trainer["seed"] = out.get("seed", 0)
    bypasses = {
        "generation.extra.worker.sampling": _get(
            _get(_get(out.get("generation"), "extra"), "worker"), "sampling"
        ),
        "learner.extra.trainer": _get(_get(out.get("learner"), "extra"), "trainer"),
    }
    for where, node in bypasses.items():
        for name in ("temperature", "max_new_tokens", "max_response_length"):
            if _get(node, name) is not None:
                raise ValueError(
                    f"{where}.{name} would bypass the value shared by learner and generation; "
                    "set generation.temperature / generation.max_new_tokens instead"
                )
    learner["trainer"] = trainer
    out["learner"] = learner
    return out


class RunConfig(BaseModel):
    """A whole ``grpo run``: one YAML file; see the module docstring for the sections."""

    model_config = _FROZEN

    name: str = Field(default="run", min_length=1, description="Run name (run dir suffix).")
    seed: int = Field(default=0, description="Seed of every component.")
    namespace: str = Field(
        default="", description="Redis key namespace; '' = derived from the run dir name."
    )
    redis_url: str | None = Field(
        default=None, description="External Redis; None = $REDIS_URL, else an embedded server."
    )
    data: DataConfig = Field(default_factory=DataConfig, description="Tasks.")
    model: ModelConfig = Field(default_factory=ModelConfig, description="Policy and SFT.")
    generation: GenerationRunConfig = Field(
        default_factory=GenerationRunConfig, description="Sampling."
    )
    verifiers: VerifiersConfig = Field(default_factory=VerifiersConfig, description="Verifiers.")
    assembler: AssemblerConfig = Field(
        default_factory=AssemblerConfig, description="Group assembly and dynamic sampling."
    )
    assembler_extra: dict[str, Any] = Field(
        default_factory=dict, description="Merged verbatim into the assembler's YAML."
    )
    learner: LearnerRunConfig = Field(default_factory=LearnerRunConfig, description="Learner.")
    eval: EvalConfig = Field(default_factory=EvalConfig, description="Held-out evaluation.")
    logging: TrackingConfig = Field(
        default_factory=TrackingConfig,
        description="Experiment tracking of the learner's per-step metrics: report_to "
        "[tensorboard, wandb, mlflow] (TensorBoard alone by default).",
    )
    budget: BudgetConfig = Field(default_factory=BudgetConfig, description="Stop conditions.")
    supervision: RestartPolicy = Field(
        default_factory=RestartPolicy,
        description="Restart of failed services: backoff, and how many restarts in a window "
        "before the run fails.",
    )

    @model_validator(mode="before")
    @classmethod
    def _shared(cls, data: Any) -> Any:
        return _derive_shared(data)

    @model_validator(mode="after")
    def _check(self) -> RunConfig:
        process = [w for w, _ in self.verifiers.refs() if w.endswith(".process")]
        if process and not self.learner.algo.process_weight:
            raise ValueError(
                f"{process[0]} is set but learner.algo.process_weight is 0: set a "
                f"process_weight > 0, or {process[0]}: null for an outcome-only run"
            )
        try:
            check_verifiers_config(self.verifiers)
            check_extra_blocks(self)
        except InvalidArgumentError as exc:
            raise ValueError(str(exc)) from None
        budget = self.budget.generated_tokens
        if budget and budget < self.job_worst_case_tokens:
            raise ValueError(
                f"budget.generated_tokens={budget} is less than one prompt job's worst case "
                f"{self.job_worst_case_tokens} tokens (generation.group_size "
                f"{self.generation.group_size} x generation.max_new_tokens "
                f"{self.generation.max_new_tokens} x (1 + {self.regeneration_rounds} "
                "regeneration rounds of assembler.dynamic_sampling)): no job could be fed; "
                f"set it to at least {self.job_worst_case_tokens}, or 0 for no bound"
            )
        return self

    @property
    def regeneration_rounds(self) -> int:
        """Most regeneration jobs one fed prompt job can cause: dynamic sampling's
        ``max_rounds`` when it regenerates rejected groups, else 0."""
        sampling = self.assembler.dynamic_sampling
        return sampling.max_rounds if sampling.regenerate else 0

    @property
    def job_worst_case_tokens(self) -> int:
        """W = G·L_max·(1 + regeneration rounds): the most tokens one fed prompt job can
        generate, its group and the groups regenerated from it (the unit of the token budget,
        ``grpo.services.driver.token_budget``)."""
        generation = self.generation
        return generation.group_size * generation.max_new_tokens * (1 + self.regeneration_rounds)


EXTRA_BLOCKS: dict[str, str] = {
    "generation.extra": "rollout-worker",
    "learner.extra": "learner",
    "assembler_extra": "assembler",
}
"""Config path of each free-form block -> the service whose settings it is merged into."""


def check_extra_blocks(config: RunConfig) -> None:
    """Validate ``generation.extra``, ``learner.extra`` and ``assembler_extra`` against the
    settings model of the service each is merged into (``EXTRA_BLOCKS``), at load time:
    an unknown key (named with the valid ones) or a bad value; settings the run derives itself
    (addresses, Redis) are not required here. ``verifiers.extra`` is checked by
    ``check_verifiers_config``.

    Raises:
        InvalidArgumentError: the message gives each problem's path under the block.
    """
    from pydantic import ValidationError

    from grpo.services.runtime.config import error_text
    from grpo.services.runtime.registry import load_settings_cls

    blocks = {
        "generation.extra": config.generation.extra,
        "learner.extra": config.learner.extra,
        "assembler_extra": config.assembler_extra,
    }
    for where, block in blocks.items():
        if not block:
            continue
        cls = load_settings_cls(EXTRA_BLOCKS[where])
        try:
            cls.model_validate(block)
        except ValidationError as exc:
            problems = [
                f"{where}.{error_text(cls, e)}" for e in exc.errors() if e["type"] != "missing"
            ]
            if problems:
                raise InvalidArgumentError("; ".join(problems)) from None


def load_run_config(
    path: Path,
    overrides: dict[str, Any] | None = None,
    *,
    environ: dict[str, str] | None = None,
) -> RunConfig:
    """Read a RunConfig from YAML with dotted-path ``overrides`` (``{"budget.steps": 3}``).

    Environment variables ``GRPO_RUN_<FIELD>`` (``__`` between levels) of ``environ`` (default
    ``os.environ``) override the file; one naming no field is logged and ignored.

    Raises:
        NotFoundError: the file does not exist.
        InvalidArgumentError: invalid values; the message lists each bad field's dotted path.
    """
    return load_settings(RunConfig, path, overrides, env_prefix="GRPO_RUN_", environ=environ)
