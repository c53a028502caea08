"""Mixed precision (``trainer.autocast: bfloat16``): bf16 forwards over float32 master weights
and AdamW state, selectable, recorded in the checkpoint; the golden tests run with it off."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from grpo.learner.checkpoint import CheckpointState, load_checkpoint, save_checkpoint
from grpo.learner.config import LearnerAlgoConfig, TrainerConfig
from grpo.learner.loading import build_trainer
from grpo.services.learner.batch import group_rows


def _trainer(model_dir: Path, autocast: str, dtype: str = "float32"):  # type: ignore[no-untyped-def]
    config = TrainerConfig(lr=1e-3, warmup_steps=0, device="cpu", autocast=autocast)
    trainer, _ = build_trainer(model_dir, LearnerAlgoConfig(), config, dtype=dtype)  # type: ignore[arg-type]
    return trainer


def test_autocast_runs_bf16_matmuls_over_float32_master_weights(
    tiny_model_dir: Path, make_groups, tmp_path: Path
) -> None:
    rows = [group_rows(g) for g in make_groups(num_groups=3, group_size=4)]
    mixed, full = _trainer(tiny_model_dir, "bfloat16"), _trainer(tiny_model_dir, "off")
    seen: list[torch.dtype] = []
    proj = mixed.model.model.layers[0].self_attn.q_proj
    hook = proj.register_forward_hook(lambda m, i, out: seen.append(out.dtype))
    start = {n: p.detach().clone() for n, p in full.model.named_parameters()}
    m_mixed, m_full = mixed.step(rows), full.step(rows)
    hook.remove()
    assert seen and set(seen) == {torch.bfloat16}  # the forward computed in bf16
    assert all(p.dtype == torch.float32 for p in mixed.model.parameters())
    moments = [s["exp_avg"] for s in mixed.optimizer.state.values()]
    assert moments and all(m.dtype == torch.float32 for m in moments)
    # Same update up to bf16 rounding of the forward: the parameter steps point the same way.
    d_mixed = torch.cat(
        [(p.detach() - start[n]).flatten() for n, p in mixed.model.named_parameters()]
    )
    d_full = torch.cat(
        [(p.detach() - start[n]).flatten() for n, p in full.model.named_parameters()]
    )
    assert torch.nn.functional.cosine_similarity(d_mixed, d_full, dim=0) > 0.9
    assert m_mixed["loss/total"] == pytest.approx(m_full["loss/total"], abs=5e-2)

    assert mixed.precision == {"params": "float32", "autocast": "bfloat16", "lora": "off"}
    path = save_checkpoint(
        tmp_path, model=mixed.model, optimizer=mixed.optimizer, scheduler=mixed.scheduler,
        state=CheckpointState(step=1, policy_version=1, precision=mixed.precision),
    )  # fmt: skip
    assert load_checkpoint(path, model=full.model).precision["autocast"] == "bfloat16"


def test_bf16_weights_and_autocast_off_stay_selectable(tiny_model_dir: Path) -> None:
    bf16 = _trainer(tiny_model_dir, "off", dtype="bfloat16")
    assert bf16.precision == {"params": "bfloat16", "autocast": "off", "lora": "off"}
    from grpo.services.learner.settings import LearnerServiceSettings

    with pytest.raises(ValueError, match="float32 master weights"):
        LearnerServiceSettings(
            model_path=tiny_model_dir, dtype="bfloat16", trainer={"autocast": "bfloat16"}
        )
