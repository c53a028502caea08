"""Each algorithm choice is declared once (grpo.learner.choices) and everything else is tied to
it: the config field's accepted values, the registry, the resolved-definition formulas and the
docs table. Adding a name to a Literal makes these tests name what is still missing."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from grpo.learner import choices, config
from grpo.learner.advantages import ESTIMATORS, STD_CONVENTIONS
from grpo.learner.config import LearnerAlgoConfig
from grpo.learner.kl import KL_ESTIMATORS
from grpo.learner.losses import LOSS_TYPES, REDUCTIONS
from grpo.learner.registry import Registry

DOCS = Path(__file__).resolve().parents[2] / "docs" / "learner-math.md"

# (config field, its Literal, the registry that implements it or None, formulas, doc row format)
CHOICES: list[tuple[str, Any, Registry | None, dict[str, str], str]] = [
    ("estimator", choices.EstimatorName, None, config._ADVANTAGE_FORMULAS, "`{}`"),
    ("reduction", choices.ReductionName, REDUCTIONS, config._REDUCTION_FORMULAS, "`{}`"),
    ("loss_type", choices.LossTypeName, LOSS_TYPES, config._LOSS_FORMULAS, "`loss_type: {}`"),
    ("kl_estimator", choices.KlEstimatorName, KL_ESTIMATORS, config._KL_FORMULAS, "`{}`"),
]


@pytest.mark.parametrize(("field", "literal", "registry", "formulas", "row"), CHOICES)
def test_config_formulas_and_docs_follow_the_declaration(
    field: str, literal: Any, registry: Registry | None, formulas: dict[str, str], row: str
) -> None:
    declared = choices.names(literal)
    assert choices.names(LearnerAlgoConfig.model_fields[field].annotation) == declared
    assert tuple(formulas) == declared, f"formulas of {field} differ from {declared}"
    if registry is not None:
        assert registry.names() == tuple(sorted(declared))
        assert registry.unregistered() == ()
    docs = DOCS.read_text()
    undocumented = [n for n in declared if f"| {row.format(n)} |" not in docs]
    assert not undocumented, f"{field}: no row in {DOCS.name} for {undocumented}"


def test_estimators_split_into_group_and_critic_and_both_are_implemented() -> None:
    group, critic = choices.names(choices.GroupEstimatorName), choices.CriticEstimatorName
    assert choices.names(choices.EstimatorName) == group + choices.names(critic)
    assert ESTIMATORS.names() == tuple(sorted(group)) and ESTIMATORS.unregistered() == ()
    from grpo.learner import value  # the critic estimators' implementation

    assert choices.names(critic) == ("gae",) and callable(value.gae_advantages)
    assert choices.names(choices.StdConvention) == STD_CONVENTIONS


def test_registry_refuses_an_undeclared_name_and_reports_a_missing_one() -> None:
    registry: Registry = Registry("reduction", choices.ReductionName)
    registry.register("token_mean")(lambda: None)
    with pytest.raises(ValueError, match=r"not declared.*grpo\.learner\.choices"):
        registry.register("seq_mean")(lambda: None)
    assert registry.unregistered() == ("response_mean", "fixed_budget")
    with pytest.raises(TypeError, match="not a Literal"):
        choices.names(str)


def test_config_rejects_an_undeclared_choice_naming_the_valid_ones() -> None:
    with pytest.raises(ValueError, match=re.escape("'token_mean', 'response_mean'")):
        LearnerAlgoConfig(reduction="seq_mean")  # type: ignore[arg-type]


def test_every_literal_field_of_the_configs_is_a_declared_choice() -> None:
    """No config field spells its own list of names: each ``Literal`` field is one of
    ``grpo.learner.choices``, and the modules that check a name at run time derive their
    tuple from the same declaration."""
    from typing import Literal, get_origin

    from grpo.learner.config import TrainerConfig
    from grpo.learner.losses import RATIO_LEVELS
    from grpo.learner.process import PROCESS_NORMALIZATIONS
    from grpo.learner.schedule import SCHEDULES
    from grpo.services.settings.run import SftConfig

    declared = [getattr(choices, n) for n in choices.__all__ if n != "names"]
    for model in (LearnerAlgoConfig, TrainerConfig, SftConfig):
        for name, field in model.model_fields.items():
            if get_origin(field.annotation) is Literal:
                assert any(field.annotation is d for d in declared), (
                    f"{model.__name__}.{name} spells a Literal of its own; declare it in "
                    "grpo.learner.choices"
                )
    assert RATIO_LEVELS == choices.names(choices.RatioLevel) == tuple(config._RATIO_FORMULAS)
    assert choices.names(choices.ProcessNormalization) == PROCESS_NORMALIZATIONS
    assert choices.names(choices.ScheduleName) == SCHEDULES
