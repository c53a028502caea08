"""The learner's algorithm choices, each list of names declared once.

Every choice (advantage estimator, loss reduction, per-token loss type, ratio level, KL
estimator, std convention, zero-variance rule, process normalization and groups, LR schedule,
the SFT warm start's schedule) is one ``Literal`` here; no other module spells its names. The
config fields (``LearnerAlgoConfig``, ``TrainerConfig``) are typed with these; each registry is
created with its ``Literal`` (``Registry(kind, declared=...)``), so registering an undeclared
name raises; the modules that check a name at run time derive their tuple with :func:`names`;
and ``tests/learner/test_choices.py`` checks that every config field's ``Literal`` is declared
here and that every declared name is registered, has a formula in the resolved definition and
a row in the docs table (docs/learner-math.md). Adding a choice is one name added to its
``Literal`` here, plus its implementation (the registered function) and its docs row, which
the test asks for.

Torch-free, so the config and anything that validates a run config can import it cheaply.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

__all__ = [
    "AutocastName",
    "CriticEstimatorName",
    "EstimatorName",
    "GroupEstimatorName",
    "KlEstimatorName",
    "LossTypeName",
    "ProcessGroups",
    "ProcessNormalization",
    "RatioLevel",
    "ReductionName",
    "ScheduleName",
    "SftScheduleName",
    "StdConvention",
    "ZeroVarianceRule",
    "names",
]

GroupEstimatorName = Literal["grpo", "rloo", "dr_grpo"]
"""Group-relative outcome estimators (``grpo.learner.advantages.ESTIMATORS``)."""
CriticEstimatorName = Literal["gae"]
"""Estimators with a learned critic (``grpo.learner.value``)."""
EstimatorName = Literal[GroupEstimatorName, CriticEstimatorName]
"""Every advantage estimator ``LearnerAlgoConfig.estimator`` accepts."""
ReductionName = Literal["token_mean", "response_mean", "fixed_budget"]
"""Loss reductions (``grpo.learner.losses.REDUCTIONS``)."""
LossTypeName = Literal["ppo", "cispo"]
"""Per-token loss types (``grpo.learner.losses.LOSS_TYPES``)."""
KlEstimatorName = Literal["k1", "k2", "k3"]
"""KL estimators (``grpo.learner.kl.KL_ESTIMATORS``)."""
RatioLevel = Literal["token", "sequence"]
"""Importance ratio per token, or GSPO's length-normalized sequence ratio
(``grpo.learner.losses.policy_loss``)."""
StdConvention = Literal["population", "sample"]
"""Group std: population (divide by n) or sample (n − 1, Bessel)."""
ZeroVarianceRule = Literal["zero_advantage"]
"""What a group whose valid rewards are all equal yields (``grpo.learner.advantages``)."""
ProcessNormalization = Literal["group", "response", "none"]
"""Normalization of process step rewards (``grpo.learner.process``)."""
ProcessGroups = Literal["all", "mixed"]
"""Groups that get process credit: all, or only those with an outcome contrast."""
ScheduleName = Literal["constant", "linear", "cosine"]
"""LR after warmup (``grpo.learner.schedule.lr_multiplier``)."""
AutocastName = Literal["off", "bfloat16"]
"""Mixed precision of the trainer's forwards (``grpo.learner.trainer``): none, or bf16
autocast over parameters kept in their own dtype (float32 master weights)."""
SftScheduleName = Literal["cosine", "constant"]
"""LR after the SFT warm start's warmup (``grpo.learner.sft.run_sft``): cosine to 10% or
constant."""


def names(choice: Any) -> tuple[str, ...]:
    """The names of a ``Literal`` (nested ``Literal``s flattened), in declaration order.

    Raises:
        TypeError: ``choice`` is not a ``Literal`` of strings.
    """
    out: list[str] = []
    args = get_args(choice)
    if not args:
        raise TypeError(f"{choice!r} is not a Literal")
    for arg in args:
        if isinstance(arg, str):
            out.append(arg)
        else:
            out.extend(names(arg))
    return tuple(out)
