"""Worker of the data-parallel test: one rank trains one step on its shard and saves params.

Lives in its own module so ``torch.multiprocessing.spawn`` can import it by name in children.
"""

from __future__ import annotations

from pathlib import Path

import torch

from grpo.v1 import common_pb2


def train_one_step(
    model_dir: str,
    groups: list[common_pb2.Group],
    parallel: object | None,
    dtype: torch.dtype = torch.float64,
) -> dict[str, torch.Tensor]:
    """One trainer step on ``groups`` from the model in ``model_dir``; returns the new params."""
    from transformers import AutoModelForCausalLM

    from grpo.learner.config import LearnerAlgoConfig
    from grpo.learner.trainer import Trainer, TrainerConfig
    from grpo.model import load_tokenizer
    from grpo.services.learner.batch import group_rows

    torch.set_num_threads(1)
    tok = load_tokenizer(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype)
    trainer = Trainer(
        model,
        LearnerAlgoConfig(clip_high=0.28, process_weight=0.5, tis_cap=2.0),
        TrainerConfig(lr=1e-3, warmup_steps=0, micro_batch_size=3),
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        parallel=parallel,
    )
    trainer.step([group_rows(g) for g in groups])
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def run_rank(
    rank: int, world_size: int, init_file: str, model_dir: str, blobs: list[bytes], out_dir: str
) -> None:
    """Spawn target: join the gloo world, train on this rank's whole groups, save params."""
    from grpo.learner.distributed import init_data_parallel, shard_groups

    parallel = init_data_parallel(rank, world_size, f"file://{init_file}", backend="gloo")
    groups = [common_pb2.Group.FromString(b) for b in blobs]
    params = train_one_step(model_dir, shard_groups(groups, rank, world_size), parallel)
    torch.save(params, Path(out_dir) / f"rank{rank}.pt")
    import torch.distributed as dist

    dist.destroy_process_group()
