"""Building the learner's models: π_θ (and π_ref when β > 0) from a model folder or hub id,
placed on the trainer's device and, with FSDP, sharded per decoder layer; wrapped in a
``Trainer``. The learner service calls ``build_trainer``; nothing here knows about gRPC or
Redis.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import torch

from grpo.devices import DTYPES, resolve_device
from grpo.learner.config import LearnerAlgoConfig, LoraConfig
from grpo.learner.trainer import Trainer, TrainerConfig

__all__ = ["build_trainer", "load_causal_lm"]


def load_causal_lm(path: str | Path, dtype: Literal["float32", "bfloat16", "float64"]) -> Any:
    """``AutoModelForCausalLM.from_pretrained(path)`` in ``dtype`` (a folder or a hub id).

    Raises:
        OSError: the folder cannot be read or the hub id cannot be resolved.
        KeyError: an unknown dtype name.
    """
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(path), dtype=DTYPES[dtype])


def build_trainer(
    model_path: str | Path,
    algo: LearnerAlgoConfig,
    config: TrainerConfig,
    *,
    dtype: Literal["float32", "bfloat16", "float64"] = "float32",
    torch_threads: int = 1,
    parallel: Any | None = None,
    lora: LoraConfig | None = None,
) -> tuple[Trainer, Any]:
    """Load π_θ (and π_ref when ``algo.kl_coef`` β > 0) and the tokenizer into a ``Trainer``.

    Args:
        model_path: ``save_pretrained`` folder or hub id of the initial policy.
        algo, config: the trainer's algorithm and optimizer settings.
        dtype: parameter dtype of π_θ and π_ref.
        torch_threads: torch intra-op threads of this process.
        parallel: ``grpo.learner.distributed.DataParallel`` of this rank, or None; with NCCL
            the model goes to this rank's CUDA device, with ``parallel.fsdp`` it is sharded
            (``grpo.learner.distributed.shard_model``).
        lora: LoRA adapters on π_θ (``grpo.learner.lora.apply_lora``): only they train, and
            π_ref (β > 0) is the same model with its adapters disabled (none loaded).

    Returns:
        ``(trainer, tokenizer)``.

    Raises:
        NotFoundError: a model folder without ``tokenizer.json``.
        OSError: the model cannot be read.
        InvalidArgumentError: ``lora`` with FSDP (adapters are not sharded), or a target
            module the model lacks.
    """
    from grpo.errors import InvalidArgumentError
    from grpo.model import load_tokenizer

    torch.set_num_threads(torch_threads)
    tokenizer = load_tokenizer(model_path)
    model = load_causal_lm(model_path, dtype)
    ref = load_causal_lm(model_path, dtype) if algo.kl_coef > 0 and lora is None else None
    if lora is not None:
        if parallel is not None and parallel.fsdp:
            raise InvalidArgumentError("model.lora with fsdp is not supported: use world_size 1")
        from grpo.learner.lora import apply_lora

        model = apply_lora(model, lora)
    device = config.device
    if parallel is not None and parallel.backend == "nccl":
        device = f"cuda:{torch.cuda.current_device()}"
    if parallel is not None and parallel.fsdp:
        from grpo.learner.distributed import shard_model

        model = shard_model(model, resolve_device(device))
    trainer = Trainer(
        model,
        algo,
        config.model_copy(update={"device": device}),
        pad_token_id=int(tokenizer.pad_token_id),
        eos_token_id=int(tokenizer.eos_token_id),
        ref_model=ref,
        parallel=parallel,
    )
    return trainer, tokenizer
