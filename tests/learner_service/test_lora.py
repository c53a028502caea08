"""LoRA on the policy (``grpo.learner.lora`` through ``build_trainer``): only the adapters
train and are checkpointed, generation gets the merged weights, π_ref is the base with the
adapters disabled (no second model), adapter dropout stays out of π_old."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from grpo.errors import FailedPreconditionError, InvalidArgumentError
from grpo.learner.checkpoint import CheckpointState, load_checkpoint, save_checkpoint
from grpo.learner.config import LearnerAlgoConfig, LoraConfig, TrainerConfig
from grpo.learner.loading import build_trainer
from grpo.learner.lora import AdaptersDisabled, merged_view
from grpo.services.learner.batch import group_rows

LORA = LoraConfig(r=4, alpha=8)
CONFIG = TrainerConfig(lr=1e-2, warmup_steps=0, device="cpu")


def _rows(make_groups):  # type: ignore[no-untyped-def]
    return [group_rows(g) for g in make_groups(num_groups=3, group_size=4)]


def _snapshot(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def test_only_the_adapters_train_and_the_merged_export_is_the_adapted_model(
    tiny_model_dir: Path, make_groups, tmp_path: Path
) -> None:
    trainer, tok = build_trainer(tiny_model_dir, LearnerAlgoConfig(), CONFIG, lora=LORA)
    before = _snapshot(trainer.model)
    trained = {n for n, p in trainer.model.named_parameters() if p.requires_grad}
    assert trained and all(".lora_A." in n or ".lora_B." in n for n in trained)
    opt_params = [p for g in trainer.optimizer.param_groups for p in g["params"]]
    assert len(opt_params) == len(trained)  # AdamW state for the adapters alone
    metrics = trainer.step(_rows(make_groups))
    assert metrics["optim/grad_norm"] > 0
    after = _snapshot(trainer.model)
    moved = {n for n in before if not torch.equal(before[n], after[n])}
    assert moved and moved <= trained  # the base is bitwise untouched
    assert any(".lora_B." in n for n in moved)

    # The published folder is a plain model with W + (alpha/r) B A: same logits.
    merged_view(trainer.model).save_pretrained(tmp_path / "merged")
    plain = AutoModelForCausalLM.from_pretrained(tmp_path / "merged").eval()
    assert not any("lora" in n for n, _ in plain.named_parameters())
    ids = torch.tensor([tok("12+34=46", add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        want = trainer.model(input_ids=ids).logits
        got = plain(input_ids=ids).logits
    assert torch.allclose(got, want, atol=1e-5, rtol=1e-5)
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    with torch.no_grad():
        assert not torch.allclose(base(input_ids=ids).logits, want, atol=1e-4)


def test_the_reference_is_the_base_with_adapters_disabled(
    tiny_model_dir: Path, make_groups
) -> None:
    algo = LearnerAlgoConfig(kl_coef=0.1)
    trainer, _ = build_trainer(tiny_model_dir, algo, CONFIG, lora=LORA)
    assert isinstance(trainer.ref_model, AdaptersDisabled)
    assert trainer.ref_model.policy is trainer.model  # no second copy of the weights
    first = trainer.step(_rows(make_groups))
    assert first["kl/ref_mean"] == 0.0  # B = 0: the adapted model is the base
    assert any(p.requires_grad for p in trainer.model.parameters())  # adapters not frozen
    second = trainer.step(_rows(make_groups))
    assert second["kl/ref_mean"] > 0  # the adapters moved π_θ away from the base


def test_checkpoints_hold_the_adapters_alone_and_restore_them(
    tiny_model_dir: Path, make_groups, tmp_path: Path
) -> None:
    trainer, _ = build_trainer(tiny_model_dir, LearnerAlgoConfig(), CONFIG, lora=LORA)
    trainer.step(_rows(make_groups))
    state = CheckpointState(step=1, policy_version=1, precision=trainer.precision)
    path = save_checkpoint(
        tmp_path / "ckpt", model=trainer.model, optimizer=trainer.optimizer,
        scheduler=trainer.scheduler, state=state,
    )  # fmt: skip
    files = {p.name for p in (path / "model").iterdir()}
    assert {"adapter_model.safetensors", "adapter_config.json"} <= files
    assert "model.safetensors" not in files
    adapter_bytes = (path / "model" / "adapter_model.safetensors").stat().st_size
    assert adapter_bytes < (tiny_model_dir / "model.safetensors").stat().st_size / 4

    fresh, _ = build_trainer(tiny_model_dir, LearnerAlgoConfig(), CONFIG, lora=LORA)
    restored = load_checkpoint(
        path, model=fresh.model, optimizer=fresh.optimizer, scheduler=fresh.scheduler
    )
    assert restored.precision == {"params": "float32", "autocast": "off", "lora": "on"}
    want, got = _snapshot(trainer.model), _snapshot(fresh.model)
    assert all(torch.equal(want[n], got[n]) for n in want)
    a = trainer.optimizer.state_dict()["state"]
    b = fresh.optimizer.state_dict()["state"]
    assert all(torch.equal(a[i]["exp_avg"], b[i]["exp_avg"]) for i in a)

    full, _ = build_trainer(tiny_model_dir, LearnerAlgoConfig(), CONFIG)
    with pytest.raises(FailedPreconditionError, match=r"no model\.lora"):
        load_checkpoint(path, model=full.model, optimizer=full.optimizer)
    full_path = save_checkpoint(
        tmp_path / "full", model=full.model, optimizer=full.optimizer, scheduler=None,
        state=CheckpointState(step=1, policy_version=1),
    )  # fmt: skip
    with pytest.raises(FailedPreconditionError, match="holds a full model"):
        load_checkpoint(full_path, model=fresh.model, optimizer=fresh.optimizer)


def test_adapter_dropout_stays_out_of_pi_old(tiny_model_dir: Path, make_groups) -> None:
    lora = LoraConfig(r=4, alpha=8, dropout=0.5)
    trainer, _ = build_trainer(tiny_model_dir, LearnerAlgoConfig(), CONFIG, lora=lora)
    rows = _rows(make_groups)
    trainer.step(rows)  # B != 0 afterwards: the adapters' dropout changes their output
    plan = trainer._prepare(rows)
    # π_old comes from a no-grad pass of its own, without dropout: twice the same values.
    assert plan.old_logprobs is not None
    again = trainer._prepare(rows).old_logprobs
    assert torch.equal(plan.old_logprobs, again)
    metrics = trainer.step(rows)
    # dropout in the gradient pass only: the ratio is not exactly 1 (without dropout the first
    # pass's π_old is its own detached π_θ and every ratio is 1)
    assert metrics["loss/ratio_max"] > 1.0 or metrics["loss/ratio_min"] < 1.0
    assert not any(m.training for m in trainer.model.modules())  # eval mode restored


def test_bad_lora_settings_name_the_problem(tiny_model_dir: Path) -> None:
    with pytest.raises(InvalidArgumentError, match=r"\['wq'\] match no linear layer"):
        build_trainer(
            tiny_model_dir, LearnerAlgoConfig(), CONFIG, lora=LoraConfig(target_modules=["wq"])
        )
    from grpo.services.learner.settings import LearnerServiceSettings

    with pytest.raises(ValueError, match="lora with fsdp"):
        LearnerServiceSettings(model_path=tiny_model_dir, lora=LORA, fsdp=True, world_size=2)
    with pytest.raises(ValueError, match="lora with estimator gae"):
        LearnerServiceSettings(
            model_path=tiny_model_dir, lora=LORA, algo=LearnerAlgoConfig(estimator="gae")
        )
