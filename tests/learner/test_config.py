"""LearnerAlgoConfig: frozen, invariants with fix-it messages, presets, resolved definition."""

from __future__ import annotations

import json

import pydantic
import pytest
import torch

from grpo.learner.advantages import group_advantages
from grpo.learner.config import PRESETS, LearnerAlgoConfig
from grpo.learner.losses import policy_loss


def test_defaults_frozen_and_forbid_unknown_fields():
    cfg = LearnerAlgoConfig()
    assert (cfg.estimator, cfg.std, cfg.reduction, cfg.kl_estimator) == (
        "grpo",
        "population",
        "token_mean",
        "k3",
    )
    with pytest.raises(pydantic.ValidationError):
        cfg.eps = 1.0  # type: ignore[misc]
    with pytest.raises(pydantic.ValidationError, match="extra"):
        LearnerAlgoConfig(clip_ratio=0.2)  # type: ignore[call-arg]
    with pytest.raises(pydantic.ValidationError, match="'grpo', 'rloo', 'dr_grpo' or 'gae'"):
        LearnerAlgoConfig(estimator="ppo")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"dual_clip": 0.5}, "must be > 1"),
        ({"dual_clip": 3.0, "loss_type": "cispo"}, "loss_type='ppo' only"),
        ({"tis_cap": 0.5}, "cap >= 1"),
        ({"outcome_weight": 0.0, "process_weight": 0.0}, "set outcome_weight"),
        ({"clip_low": 1.0}, "less than 1"),
        ({"process_groups": "mixed", "estimator": "gae"}, "use process_groups: all"),
        ({"process_groups": "mixed", "outcome_weight": 0.0}, "set outcome_weight > 0"),
    ],
)
def test_invariants_say_how_to_fix(fields, message):
    with pytest.raises(pydantic.ValidationError, match=message):
        LearnerAlgoConfig(**fields)


def test_resolved_definition_records_every_convention():
    cfg = LearnerAlgoConfig(std="sample", reduction="fixed_budget", kl_coef=0.1, kl_estimator="k2")
    d = json.loads(json.dumps(cfg.resolved_definition()))
    assert d["advantage"]["std"] == "sample" and d["advantage"]["eps"] == 1e-6
    assert "(n-1)" in d["advantage"]["std_formula"]
    assert d["advantage"]["zero_variance_rule"] == "zero_advantage"
    assert d["loss"]["reduction"] == "fixed_budget" and "L_max" in d["loss"]["reduction_formula"]
    assert (d["loss"]["clip_low"], d["loss"]["clip_high"]) == (0.2, 0.2)
    assert d["kl"] == {
        "estimator": "k2",
        "formula": "k2 = 0.5 * log(pi_theta/pi_ref)^2",
        "coef": 0.1,
        "placement": "per-token loss term kl_coef * k, same reduction as the loss",
    }
    assert d["process"]["normalization"] == "group"
    assert LearnerAlgoConfig(**d["fields"]) == cfg  # the dump round-trips


def test_presets_and_kwargs_feed_the_math():
    assert set(PRESETS) == {"grpo", "dr_grpo", "dapo", "gspo", "cispo", "rloo"}
    for name in PRESETS:
        cfg = LearnerAlgoConfig.preset(name)
        rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0]])
        adv = group_advantages(rewards, **cfg.advantage_kwargs())
        lp = torch.zeros(4, 3, requires_grad=True)
        ref = None if cfg.kl_coef == 0 else torch.zeros(4, 3)
        loss, _ = policy_loss(
            lp,
            lp.detach(),
            adv.reshape(-1),
            torch.ones(4, 3),
            ref_logprobs=ref,
            **cfg.loss_kwargs(max_response_length=3),
        )
        assert torch.isfinite(loss)
    assert LearnerAlgoConfig.preset("dapo").clip_high == 0.28
    assert LearnerAlgoConfig.preset("gspo", clip_high=1e-3).clip_high == 1e-3
    with pytest.raises(ValueError, match="valid: cispo, dapo"):
        LearnerAlgoConfig.preset("ppo2")
    with pytest.raises(ValueError, match="max_response_length"):
        LearnerAlgoConfig.preset("dr_grpo").loss_kwargs()
