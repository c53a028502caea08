"""``LearnerAlgoConfig``: every choice of the learner math, named, validated and recorded;
``TrainerConfig``: the optimizer, schedule, batching and device settings of the trainer.

One frozen pydantic model; YAML, CLI flags and environment only feed it. Its
:meth:`LearnerAlgoConfig.resolved_definition` (the conventions with their formulas) goes into
every checkpoint's metadata and the run's config dump, so a run can always say which std, eps,
zero-variance rule, reduction, clip band and KL estimator produced its numbers. Paper
configurations are available as presets (:data:`PRESETS`, docs/learner-math.md). Neither
imports torch, so a run's configuration loads without it (``grpo run`` from a trained model).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from grpo.learner.choices import (
    AutocastName,
    EstimatorName,
    KlEstimatorName,
    LossTypeName,
    ProcessGroups,
    ProcessNormalization,
    RatioLevel,
    ReductionName,
    ScheduleName,
    StdConvention,
    ZeroVarianceRule,
)

__all__ = ["LORA_TARGETS", "PRESETS", "LearnerAlgoConfig", "LoraConfig", "TrainerConfig"]

_ADVANTAGE_FORMULAS = {
    "grpo": "A_i = (R_i - mean_g(R)) / std_g(R)",
    "rloo": "A_i = R_i - mean_{j != i}(R_j) = n/(n-1) * (R_i - mean_g(R))",
    "dr_grpo": "A_i = R_i - mean_g(R)",
    "gae": "delta_t = r_t + gamma V_{t+1} - V_t; A_t = delta_t + gamma lambda A_{t+1}; "
    "G_t = A_t + V_t (learned critic V)",
}
_LOSS_FORMULAS = {
    "ppo": "l_t = max(-A_t r_t, -A_t clip(r_t, 1-clip_low, 1+clip_high))"
    " [dual clip: A_t<0 -> min(l_t, -dual_clip*A_t)]",
    "cispo": "grad l_t = -sg(clip(r_t, 1-clip_low, 1+clip_high)) A_t grad log pi_theta(y_t)",
}
_RATIO_FORMULAS = {
    "token": "r_t = exp(log pi_theta(y_t) - log pi_old(y_t))",
    "sequence": "r_t = s_i = exp(mean_{t in y_i}(log pi_theta - log pi_old))",
}
_REDUCTION_FORMULAS = {
    "token_mean": "L = sum_{i,t} m l / num_tokens",
    "response_mean": "L = sum_i (sum_t m l / |y_i|) / num_responses",
    "fixed_budget": "L = sum_{i,t} m l / (num_responses * L_max)",
}
_KL_FORMULAS = {
    "k1": "k1 = log(pi_theta/pi_ref)",
    "k2": "k2 = 0.5 * log(pi_theta/pi_ref)^2",
    "k3": "k3 = pi_ref/pi_theta - 1 - log(pi_ref/pi_theta)",
}


class LearnerAlgoConfig(BaseModel):
    """The learner's algorithm choices (advantages, process credit, loss, KL)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    estimator: EstimatorName = Field(
        default="grpo",
        description="Advantage estimator: grpo (R-mean)/std (DeepSeekMath), rloo "
        "leave-one-out baseline (Ahmadian et al. 2024), dr_grpo R-mean (Liu et al. 2025), gae "
        "PPO with a learned critic and token-level GAE (Schulman et al. 2016).",
    )
    gamma: float = Field(
        default=1.0, ge=0, le=1, description="gae: discount gamma of the token rewards."
    )
    gae_lambda: float = Field(
        default=1.0, ge=0, le=1, description="gae: GAE lambda (1 = return-to-go minus V)."
    )
    value_clip: float | None = Field(
        default=0.5,
        gt=0,
        description="gae: clip the new value to old +- value_clip in the value loss (PPO2, "
        "verl's cliprange_value 0.5); null disables.",
    )
    whiten_advantages: bool = Field(
        default=True,
        description="gae: whiten the advantages over all loss tokens of the batch (verl's "
        "default for GAE).",
    )
    std: StdConvention = Field(
        default="population",
        description="Std convention of group (and process) normalization: population divides "
        "by n, sample by n-1 (Bessel).",
    )
    eps: float = Field(
        default=1e-6,
        gt=0,
        description="A group whose reward std is <= eps gets advantage 0 (threshold; eps is "
        "not added to the std).",
    )
    zero_variance_rule: ZeroVarianceRule = Field(
        default="zero_advantage",
        description="What a group whose valid rewards are all equal (max == min, decided "
        "exactly) or whose std <= eps yields: zero_advantage = every member gets exactly 0 "
        "(dropping such groups is the assembler's dynamic sampling).",
    )
    process_normalization: ProcessNormalization = Field(
        default="group",
        description="Normalization of process (step) rewards before token credit: group "
        "(mean/std over all steps of the group's responses, DeepSeekMath), response, none.",
    )
    outcome_weight: float = Field(
        default=1.0, ge=0, description="Weight of the outcome advantage in the token advantage."
    )
    process_weight: float = Field(
        default=1.0,
        ge=0,
        description="Weight of the process (step) advantage in the token advantage; used only "
        "when a process verifier is routed.",
    )
    process_groups: ProcessGroups = Field(
        default="all",
        description="Groups that get process credit: all, or mixed = only groups whose outcome "
        "advantages are not all 0 (an all-wrong or all-right group then has advantage 0, as "
        "with outcome only).",
    )
    loss_type: LossTypeName = Field(
        default="ppo",
        description="Per-token loss: ppo clipped surrogate, or cispo clipped detached IS "
        "weight times advantage times log-prob (MiniMax-M1 2025).",
    )
    ratio_level: RatioLevel = Field(
        default="token",
        description="Importance ratio per token, or GSPO's length-normalized sequence ratio "
        "(Zheng et al. 2025).",
    )
    clip_low: float = Field(
        default=0.2,
        ge=0,
        lt=1,
        description="Lower clip epsilon: ratios below 1-clip_low are clipped.",
    )
    clip_high: float = Field(
        default=0.2,
        ge=0,
        description="Upper clip epsilon: ratios above 1+clip_high are clipped (DAPO's "
        "clip-higher uses 0.28).",
    )
    dual_clip: float | None = Field(
        default=None,
        description="Dual clip constant c > 1 (Ye et al. 2020): the loss of a negative-advantage "
        "token is bounded by c*|A|; null disables.",
    )
    reduction: ReductionName = Field(
        default="token_mean",
        description="Loss reduction with global denominators: token_mean (DAPO), response_mean "
        "(original GRPO), fixed_budget (Dr. GRPO, num_responses * L_max).",
    )
    kl_estimator: KlEstimatorName = Field(
        default="k3", description="Per-token estimator of KL(pi_theta || pi_ref) (Schulman 2020)."
    )
    kl_coef: float = Field(
        default=0.0, ge=0, description="KL loss weight beta; 0 disables the reference model."
    )
    tis_cap: float | None = Field(
        default=None,
        description="Truncated importance weight cap: each token's policy-gradient loss is "
        "multiplied by min(pi_old/mu, tis_cap) (detached); null disables.",
    )
    mask_truncated: bool = Field(
        default=False,
        description="Drop responses cut at the length limit (no EOS) from the loss (DAPO's "
        "overlong filtering); they are still counted in diagnostics.",
    )

    @model_validator(mode="after")
    def _check_invariants(self) -> LearnerAlgoConfig:
        if self.dual_clip is not None:
            if self.dual_clip <= 1.0:
                raise ValueError(
                    f"dual_clip={self.dual_clip} must be > 1 (Ye et al. use 3.0) or null to "
                    "disable it"
                )
            if self.loss_type != "ppo":
                raise ValueError("dual_clip applies to loss_type='ppo' only; set dual_clip: null")
        if self.tis_cap is not None and self.tis_cap < 1.0:
            raise ValueError(
                f"tis_cap={self.tis_cap} < 1 would down-weight on-policy tokens; use a cap >= 1 "
                "(e.g. 2.0) or null"
            )
        if self.process_groups == "mixed" and self.estimator == "gae":
            raise ValueError(
                "process_groups='mixed' gates group advantages; estimator 'gae' has none "
                "(its step rewards enter the token rewards): use process_groups: all"
            )
        if self.process_groups == "mixed" and self.outcome_weight == 0:
            raise ValueError(
                "process_groups='mixed' with outcome_weight 0 would leave only the process "
                "credit of mixed groups while ignoring their outcome; set outcome_weight > 0"
            )
        if self.outcome_weight == 0 and self.process_weight == 0:
            raise ValueError(
                "outcome_weight and process_weight are both 0: no advantage would remain; set "
                "outcome_weight: 1.0"
            )
        return self

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> LearnerAlgoConfig:
        """A paper configuration from :data:`PRESETS`, with field overrides.

        Raises:
            ValueError: unknown preset (the message lists them) or an invalid override.
        """
        if name not in PRESETS:
            raise ValueError(f"unknown preset {name!r}; valid: {', '.join(sorted(PRESETS))}")
        return cls(**{**PRESETS[name], **overrides})

    def advantage_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``group_advantages`` (estimator, std, eps).

        Raises:
            ValueError: the estimator is ``gae`` (a critic estimator, not a group one).
        """
        if self.estimator == "gae":
            raise ValueError("estimator 'gae' has no group advantages; see grpo.learner.value")
        return {"estimator": self.estimator, "std": self.std, "eps": self.eps}

    def loss_kwargs(self, max_response_length: int | None = None) -> dict[str, Any]:
        """Keyword arguments of ``policy_loss`` from this config.

        Args:
            max_response_length: L_max in tokens (the generation limit); needed by
                ``fixed_budget``.

        Raises:
            ValueError: ``reduction='fixed_budget'`` without ``max_response_length``.
        """
        if self.reduction == "fixed_budget" and max_response_length is None:
            raise ValueError("reduction='fixed_budget' needs max_response_length (L_max)")
        return {
            "clip_low": self.clip_low,
            "clip_high": self.clip_high,
            "dual_clip": self.dual_clip,
            "ratio_level": self.ratio_level,
            "loss_type": self.loss_type,
            "reduction": self.reduction,
            "max_response_length": max_response_length,
            "tis_cap": self.tis_cap,
            "kl_coef": self.kl_coef,
            "kl_estimator": self.kl_estimator,
        }

    def resolved_definition(self) -> dict[str, Any]:
        """The conventions in force, with formulas, for checkpoint metadata and config dumps.

        Returns:
            A JSON-serializable dict: ``advantage``, ``process``, ``loss``, ``kl`` sections
            (each with the chosen names, their formulas and the pinned rules), ``fields``
            (every field's value) and ``definition_version``.
        """
        return {
            "definition_version": 1,
            "advantage": {
                "estimator": self.estimator,
                "formula": _ADVANTAGE_FORMULAS[self.estimator],
                "std": self.std,
                "std_formula": "sqrt(sum (R-mean)^2 / "
                + ("n)" if self.std == "population" else "(n-1))"),
                "eps": self.eps,
                "eps_rule": "std <= eps -> advantage 0 (threshold, not added to std)",
                "zero_variance_rule": self.zero_variance_rule,
                "zero_variance_test": "max == min over valid rewards (exact), or std <= eps",
                "missing_rewards": "masked out of mean and std; advantage 0; never filled with 0",
                "min_valid_per_group": 2,
                "statistics_dtype": "float64",
                **(
                    {
                        "gamma": self.gamma,
                        "gae_lambda": self.gae_lambda,
                        "token_rewards": "outcome R on the last loss token (terminal, also "
                        "when cut at the length limit); process step rewards on step ends",
                        "whiten_advantages": self.whiten_advantages,
                        "value_clip": self.value_clip,
                        "value_loss": "0.5 max((V-G)^2, (clip(V, V_old-c, V_old+c)-G)^2)",
                    }
                    if self.estimator == "gae"
                    else {}
                ),
            },
            "process": {
                "normalization": self.process_normalization,
                "credit": "A_t = sum of normalized step rewards of steps ending at or after t",
                "groups": self.process_groups,
                "outcome_weight": self.outcome_weight,
                "process_weight": self.process_weight,
                "combined": "A_t = outcome_weight * A_outcome + process_weight * A_process_t",
                "groups_rule": "mixed: A_process_t = 0 in groups whose outcome advantages "
                "are all 0",
            },
            "loss": {
                "loss_type": self.loss_type,
                "formula": _LOSS_FORMULAS[self.loss_type],
                "ratio_level": self.ratio_level,
                "ratio_formula": _RATIO_FORMULAS[self.ratio_level],
                "clip_low": self.clip_low,
                "clip_high": self.clip_high,
                "dual_clip": self.dual_clip,
                "reduction": self.reduction,
                "reduction_formula": _REDUCTION_FORMULAS[self.reduction],
                "denominators": "global over the batch (all micro-batches and ranks)",
                "tis_cap": self.tis_cap,
                "tis_formula": "w_t = min(exp(log pi_old - log mu), tis_cap), detached",
                "mask_truncated": self.mask_truncated,
            },
            "kl": {
                "estimator": self.kl_estimator,
                "formula": _KL_FORMULAS[self.kl_estimator],
                "coef": self.kl_coef,
                "placement": "per-token loss term kl_coef * k, same reduction as the loss",
            },
            "fields": self.model_dump(mode="json"),
        }


PRESETS: dict[str, dict[str, Any]] = {
    # DeepSeekMath GRPO: per-response mean, symmetric band, k3 KL in the loss (β = 0.04).
    "grpo": {"estimator": "grpo", "reduction": "response_mean", "kl_coef": 0.04},
    # Dr. GRPO: no std, no length normalization (G·L_max), no KL.
    "dr_grpo": {"estimator": "dr_grpo", "reduction": "fixed_budget", "kl_coef": 0.0},
    # DAPO: clip-higher, token-mean, no KL, overlong filtering (dynamic sampling: assembler).
    "dapo": {
        "estimator": "grpo",
        "reduction": "token_mean",
        "clip_low": 0.2,
        "clip_high": 0.28,
        "kl_coef": 0.0,
        "mask_truncated": True,
    },
    # GSPO: sequence-level ratio with its own small band, per-response mean.
    "gspo": {
        "ratio_level": "sequence",
        "clip_low": 3e-4,
        "clip_high": 4e-4,
        "reduction": "response_mean",
        "kl_coef": 0.0,
    },
    # CISPO: clipped detached IS weight, token-mean; the paper imposes no lower bound (large
    # ε_low); ε_high here is our choice.
    "cispo": {
        "loss_type": "cispo",
        "clip_low": 0.99,
        "clip_high": 0.28,
        "reduction": "token_mean",
        "kl_coef": 0.0,
    },
    # RLOO baseline with the PPO surrogate, per-response mean.
    "rloo": {"estimator": "rloo", "reduction": "response_mean", "kl_coef": 0.0},
}
"""Paper configurations by name: field values applied over the defaults."""


class TrainerConfig(BaseModel):
    """Optimizer, schedule, batching and device settings of the trainer."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    lr: float = Field(default=5e-5, gt=0, description="Peak AdamW learning rate.")
    warmup_steps: int = Field(
        default=5,
        ge=0,
        description="Optimizer steps of linear warmup from lr/warmup to lr (reached at the "
        "last warmup step).",
    )
    schedule: ScheduleName = Field(
        default="constant",
        description="LR after warmup: constant, or linear/cosine decay that starts after warmup.",
    )
    total_steps: int = Field(
        default=0,
        ge=0,
        description="Optimizer step at which linear/cosine decay reaches min_lr_ratio * lr "
        "(the decay spans steps warmup_steps..total_steps); 0 = no decay.",
    )
    min_lr_ratio: float = Field(
        default=0.1, ge=0, le=1, description="Final LR as a fraction of lr for linear/cosine."
    )
    weight_decay: float = Field(default=0.0, ge=0, description="AdamW decoupled weight decay.")
    adam_beta1: float = Field(default=0.9, ge=0, lt=1, description="AdamW beta1.")
    adam_beta2: float = Field(default=0.999, ge=0, lt=1, description="AdamW beta2.")
    adam_eps: float = Field(default=1e-8, gt=0, description="AdamW epsilon.")
    max_grad_norm: float = Field(
        default=1.0, ge=0, description="Clip the global gradient L2 norm to this; 0 disables."
    )
    ppo_epochs: int = Field(default=1, ge=1, description="Passes over each batch.")
    minibatches: int = Field(
        default=1, ge=1, description="Optimizer steps per epoch; the batch's rows are split evenly."
    )
    micro_batch_size: int = Field(
        default=32, ge=1, description="Rows per forward/backward (gradient accumulation unit)."
    )
    temperature: float = Field(
        default=1.0,
        gt=0,
        description="Sampler temperature; log-probs are taken at logits/temperature.",
    )
    max_response_length: int = Field(
        default=0, ge=0, description="L_max of the fixed_budget reduction (sampler max_new_tokens)."
    )
    device: str = Field(
        default="auto", description="'auto' (CUDA when present, else CPU), or a device."
    )
    seed: int = Field(default=0, description="Seed of torch's RNG at trainer construction.")
    critic_lr: float | None = Field(
        default=None,
        gt=0,
        description="estimator gae: peak AdamW learning rate of the critic (same schedule as "
        "the policy); null = lr.",
    )
    autocast: AutocastName = Field(
        default="off",
        description="Mixed precision: 'bfloat16' runs every model forward (and so its backward) "
        "under torch.autocast in bf16 while parameters, gradients and AdamW state stay in the "
        "parameter dtype (float32 master weights); 'off' computes in the parameter dtype.",
    )

    @model_validator(mode="after")
    def _check(self) -> TrainerConfig:
        if self.schedule != "constant" and self.total_steps == 0:
            raise ValueError(f"schedule={self.schedule!r} needs total_steps > 0")
        if self.schedule != "constant" and self.total_steps <= self.warmup_steps:
            raise ValueError(
                f"total_steps={self.total_steps} must exceed warmup_steps={self.warmup_steps}: "
                "the decay starts after warmup"
            )
        return self


LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
"""Every attention and MLP projection of a Qwen2/Llama-style decoder layer."""


class LoraConfig(BaseModel):
    """LoRA adapters on the policy (``grpo.learner.lora``, with peft): W x + (alpha / r) B A x.

    Only A and B are trained and checkpointed; generation gets the merged weights W + (alpha /
    r) B A; the reference policy is the base model with the adapters disabled.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    r: int = Field(default=16, ge=1, description="Rank of each adapter (rows of A).")
    alpha: float = Field(
        default=32.0, gt=0, description="Scale numerator: the update is (alpha / r) B A."
    )
    dropout: float = Field(
        default=0.0,
        ge=0,
        lt=1,
        description="Dropout on each adapter's input in gradient passes only; π_old and π_ref "
        "are computed without it (in a pass of their own when > 0).",
    )
    target_modules: list[str] = Field(
        default_factory=lambda: list(LORA_TARGETS),
        min_length=1,
        description="Names (last component) of the linear layers that get adapters.",
    )
