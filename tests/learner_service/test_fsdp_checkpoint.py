"""FSDP2 on CPU with gloo: a sharded learner checkpoints from the full state gathered on rank 0
and resumes from it, and checkpoints cross between sharded and plain runs.

Two ranks train the tiny model (float64) sharded per decoder layer on 5 groups (3 and 2 per
rank, unequal micro-batch counts), checkpoint, and fresh sharded trainers resume and take a
second step. One process without FSDP does the same two steps. Parameters and Adam moments
agree to 1e-6 at each checkpoint, whichever way each run resumed (sharded from sharded, sharded
from plain, plain from sharded).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

sys.path.insert(0, str(Path(__file__).parent))  # spawned children import fsdp_worker by name
import fsdp_worker

from grpo.learner.distributed import spawn


def _params(checkpoint: Path) -> dict[str, torch.Tensor]:
    return load_file(str(checkpoint / "model" / "model.safetensors"))


def _moments(checkpoint: Path, names: list[str]) -> dict[str, dict[str, torch.Tensor]]:
    """name -> {exp_avg, exp_avg_sq} whether the optimizer state is keyed by index or name."""
    saved = torch.load(checkpoint / "optimizer.pt", weights_only=False)
    state = saved["optimizer"]["state"]
    if not saved.get("by_name"):
        state = {names[i]: s for i, s in state.items()}
    return {n: {k: state[n][k] for k in ("exp_avg", "exp_avg_sq")} for n in names}


def _assert_same(a: Path, b: Path, names: list[str]) -> float:
    pa, pb = _params(a), _params(b)
    assert pa.keys() == pb.keys()
    worst = max(float((pa[k] - pb[k]).abs().max()) for k in pa)
    assert worst <= 1e-6, (a, b, worst)
    ma, mb = _moments(a, names), _moments(b, names)
    for n in names:
        for k in ("exp_avg", "exp_avg_sq"):
            torch.testing.assert_close(ma[n][k], mb[n][k], rtol=1e-6, atol=1e-12, msg=f"{n} {k}")
    return worst


@pytest.mark.slow  # 55-76 s on the shared 2-core machine (two spawned ranks, six trainers)
def test_fsdp_checkpoints_gather_the_full_state_and_resume(
    tiny_model_dir: Path, make_groups, tmp_path: Path
) -> None:
    first = make_groups(num_groups=5, group_size=4, seed=41, prefix="fsdp-a")
    second = make_groups(num_groups=5, group_size=4, seed=42, prefix="fsdp-b")
    plain = fsdp_worker.build(str(tiny_model_dir), None)
    names = [n for n, p in plain.model.named_parameters() if p.requires_grad]
    fsdp_worker.step(plain, first, 0, 1)
    plain1 = fsdp_worker.save(plain, tmp_path / "plain", None)
    fsdp_worker.step(plain, second, 0, 1)
    plain2 = fsdp_worker.save(plain, tmp_path / "plain", None)
    assert plain1 is not None and plain2 is not None

    spawn(
        fsdp_worker.run_rank,
        2,
        str(tmp_path / "rendezvous"),
        str(tiny_model_dir),
        [g.SerializeToString() for g in first],
        [g.SerializeToString() for g in second],
        str(plain1),
        str(tmp_path),
    )
    assert not (tmp_path / "refused").exists()  # nothing written for an ungathered model
    sharded1 = tmp_path / "fsdp" / "step-00000001"
    initial = load_file(str(tiny_model_dir / "model.safetensors"))
    moved = max(float((v.double() - _params(plain1)[k]).abs().max()) for k, v in initial.items())
    assert moved > 1e-4  # the step really trained
    _assert_same(sharded1, plain1, names)
    _assert_same(tmp_path / "fsdp-resumed" / "step-00000002", plain2, names)
    _assert_same(tmp_path / "from-plain" / "step-00000002", plain2, names)

    # A plain run resumes from the sharded checkpoint (optimizer state keyed by name).
    cross = fsdp_worker.build(str(tiny_model_dir), None)
    fsdp_worker.resume(cross, sharded1)
    fsdp_worker.step(cross, second, 0, 1)
    _assert_same(fsdp_worker.save(cross, tmp_path / "cross", None), plain2, names)
