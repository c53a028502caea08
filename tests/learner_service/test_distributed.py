"""Data parallel: one step on 2 gloo processes leaves the same parameters as on 1 process."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))  # spawned children import dp_worker by name
import dp_worker

from grpo.learner.distributed import spawn


def test_two_gloo_ranks_match_one_process(tiny_model_dir: Path, make_groups, tmp_path) -> None:
    # 5 groups of unequal response lengths: ranks get 3 and 2 groups, different padding.
    groups = make_groups(num_groups=5, group_size=4, seed=3)
    single = dp_worker.train_one_step(str(tiny_model_dir), groups, None)
    spawn(
        dp_worker.run_rank,
        2,
        str(tmp_path / "rendezvous"),
        str(tiny_model_dir),
        [g.SerializeToString() for g in groups],
        str(tmp_path),
    )
    rank0 = torch.load(tmp_path / "rank0.pt")
    rank1 = torch.load(tmp_path / "rank1.pt")
    start = dp_worker.train_one_step.__defaults__  # noqa: F841  (documentation only)
    moved = 0.0
    from transformers import AutoModelForCausalLM

    init = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float64).state_dict()
    for name, value in single.items():
        torch.testing.assert_close(rank0[name], value, rtol=0, atol=1e-6, msg=name)
        torch.testing.assert_close(rank1[name], rank0[name], rtol=0, atol=0, msg=name)
        moved = max(moved, float((value - init[name]).abs().max()))
    assert moved > 1e-4  # the step really changed the parameters
