"""Data-parallel learner over ``torch.distributed``: gloo on CPU, NCCL on GPUs.

Each rank trains on whole groups (``shard_groups``: rank r takes groups r, r + W, ...), so group
statistics never cross ranks. What crosses ranks:

- loss denominators (tokens, responses): ``grpo.learner.losses.loss_denominators`` sums them
  over the world whenever a process group is initialised, so every rank's loss is its share
  of the global loss;
- gradients: summed over ranks after accumulation (``DataParallel.all_reduce_grads``, one
  flattened all-reduce per optimizer step). Sum, not mean, because the per-rank losses already
  carry the global denominators; the result equals the gradient of the whole batch on one
  process, so one step on W processes leaves the same parameters as on one;
- step statistics: token-weighted means, sums, min and max (``merge_stats``).

Rank 0 alone reads groups from Redis, publishes weights and writes checkpoints; it hands every
batch to the other ranks with ``broadcast_groups`` (serialized protobufs). All ranks hold
identical parameters and optimizer states, so every rank restores the same checkpoint.

FSDP (``wrap_fsdp``) shards parameters, gradients and optimizer state for a model that does not
fit one device, with torch's ``fully_shard`` (FSDP2). FSDP reduce-scatters *averaged*
gradients, so under FSDP the trainer multiplies each loss by the world size
(``loss_scale``) and skips the manual all-reduce. Written against torch's documented API and
not exercised by this repository's tests (CPU only here); checkpoints of a sharded model need
a full state dict gathered on rank 0 before ``save_pretrained``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import torch
import torch.distributed as dist

from grpo.learner.collectives import all_reduce
from grpo.v1 import common_pb2

__all__ = [
    "DataParallel",
    "broadcast_folder",
    "init_data_parallel",
    "shard_groups",
    "spawn",
    "wrap_fsdp",
]

_SUMMED = ("loss/total", "loss/tokens", "loss/responses")
_MIN = ("loss/ratio_min",)
_MAX = ("loss/ratio_max",)


def shard_groups(
    groups: Sequence[common_pb2.Group], rank: int, world_size: int
) -> list[common_pb2.Group]:
    """This rank's whole groups: ``groups[rank::world_size]`` (order kept)."""
    return list(groups[rank::world_size])


class DataParallel:
    """Collectives of one rank of an initialised ``torch.distributed`` world.

    Args:
        fsdp: the model is wrapped with ``wrap_fsdp`` (gradients are reduced by FSDP).

    Raises:
        RuntimeError: ``torch.distributed`` is not initialised.
    """

    def __init__(self, *, fsdp: bool = False) -> None:
        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError("init_data_parallel(...) must run before DataParallel()")
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()
        self.fsdp = fsdp
        self.backend = str(dist.get_backend())

    @property
    def is_main(self) -> bool:
        """True on rank 0 (reads groups, publishes weights, writes checkpoints)."""
        return self.rank == 0

    @property
    def loss_scale(self) -> float:
        """Factor on each rank's loss: W under FSDP (which averages gradients), else 1."""
        return float(self.world_size) if self.fsdp else 1.0

    def all_reduce(self, tensor: torch.Tensor, op: Literal["sum", "min", "max"]) -> torch.Tensor:
        """Reduce ``tensor`` over ranks in place (see ``grpo.learner.collectives``)."""
        return all_reduce(tensor, op, distributed=True)

    def all_reduce_grads(self, model: torch.nn.Module) -> None:
        """Sum every parameter's gradient over ranks (one flattened all-reduce; no-op on FSDP).

        Parameters without a gradient on this rank take part with zeros, so ranks agree on the
        buffer layout.
        """
        if self.fsdp:
            return
        params = [p for p in model.parameters() if p.requires_grad]
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        offset = 0
        for p in params:
            n = p.numel()
            p.grad = flat[offset : offset + n].view_as(p).clone()
            offset += n

    def merge_stats(self, stats: Mapping[str, float]) -> dict[str, float]:
        """Merge a rank's loss statistics into world-level ones.

        ``loss/total``, ``loss/tokens``, ``loss/responses`` are summed; ``loss/ratio_min``/``max``
        reduced with min/max; every other entry is the mean weighted by ``loss/tokens`` (as
        ``grpo.learner.losses.merge_loss_stats`` does across micro-batches). Every rank must
        pass the same keys.
        """
        keys = sorted(stats)
        tokens = float(stats.get("loss/tokens", 0.0))
        weighted = torch.tensor(
            [stats[k] if k in _SUMMED else stats[k] * tokens for k in keys] + [tokens],
            dtype=torch.float64,
        )
        self.all_reduce(weighted, "sum")
        mins = torch.tensor([stats.get(k, math.inf) for k in _MIN], dtype=torch.float64)
        maxs = torch.tensor([stats.get(k, -math.inf) for k in _MAX], dtype=torch.float64)
        self.all_reduce(mins, "min")
        self.all_reduce(maxs, "max")
        total_tokens = max(float(weighted[-1]), 1.0)
        out = {
            k: float(weighted[i]) if k in _SUMMED else float(weighted[i]) / total_tokens
            for i, k in enumerate(keys)
        }
        out.update({k: float(mins[i]) for i, k in enumerate(_MIN) if k in stats})
        out.update({k: float(maxs[i]) for i, k in enumerate(_MAX) if k in stats})
        return out

    def broadcast_groups(
        self, groups: Sequence[common_pb2.Group] | None
    ) -> list[common_pb2.Group] | None:
        """Rank 0 sends its batch to every rank; None (from rank 0) means "stop".

        Args:
            groups: the batch on rank 0; ignored on other ranks.

        Returns:
            The batch (every rank), or None when rank 0 sent the stop signal.
        """
        payload: list[Any] = [None]
        if self.is_main:
            payload = [None if groups is None else [g.SerializeToString() for g in groups]]
        dist.broadcast_object_list(payload, src=0)
        if payload[0] is None:
            return None
        return [common_pb2.Group.FromString(b) for b in payload[0]]

    def barrier(self) -> None:
        """Wait for every rank."""
        dist.barrier()


_FOLDER_CHUNK_BYTES = 64 << 20


def broadcast_folder(parallel: DataParallel, source: Path | None, dest: Path) -> Path | None:
    """Copy rank 0's folder ``source`` to ``dest`` on every other rank, over the process group.

    For ranks in separate pods, which share no filesystem: the initial model folder and the
    checkpoint to resume from live on rank 0's volume only. Rank 0 broadcasts the file list
    (relative paths and sizes), then each file's bytes as uint8 tensors of at most 64 MiB
    (on the CUDA device under NCCL); receivers write them under ``dest`` (emptied first).

    Args:
        parallel: this rank's ``DataParallel``.
        source: the folder on rank 0 (None = nothing to share); ignored on other ranks.
        dest: where other ranks write the copy; ignored on rank 0.

    Returns:
        ``source`` on rank 0; ``dest`` on other ranks; None everywhere when rank 0 sent None.

    Raises:
        RuntimeError: a collective failed (a rank died).
    """
    import shutil

    listing: list[Any] = [None]
    if parallel.is_main and source is not None:
        files = sorted(p for p in Path(source).rglob("*") if p.is_file())
        listing = [[(str(p.relative_to(source)), p.stat().st_size) for p in files]]
    dist.broadcast_object_list(listing, src=0)
    if listing[0] is None:
        return None
    device = (
        torch.device("cuda", torch.cuda.current_device()) if parallel.backend == "nccl" else None
    )
    if not parallel.is_main:
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
    root = Path(source) if source is not None else dest
    for relative, size in listing[0]:
        handle = (root / relative).open("rb") if parallel.is_main else None
        out = None
        if not parallel.is_main:
            (dest / relative).parent.mkdir(parents=True, exist_ok=True)
            out = (dest / relative).open("wb")
        try:
            for offset in range(0, size, _FOLDER_CHUNK_BYTES):
                n = min(_FOLDER_CHUNK_BYTES, size - offset)
                if handle is not None:
                    chunk = torch.frombuffer(bytearray(handle.read(n)), dtype=torch.uint8)
                else:
                    chunk = torch.empty(n, dtype=torch.uint8)
                if device is not None:
                    chunk = chunk.to(device)
                dist.broadcast(chunk, src=0)
                if out is not None:
                    out.write(chunk.cpu().numpy().tobytes())
        finally:
            for fh in (handle, out):
                if fh is not None:
                    fh.close()
    return root if parallel.is_main else dest


def init_data_parallel(
    rank: int,
    world_size: int,
    init_method: str,
    *,
    backend: Literal["auto", "gloo", "nccl"] = "auto",
    fsdp: bool = False,
) -> DataParallel:
    """Join the process group and return this rank's ``DataParallel``.

    Args:
        rank: 0 <= rank < world_size.
        world_size: number of processes.
        init_method: rendezvous URL, e.g. ``file:///tmp/x`` or ``tcp://127.0.0.1:29500``.
        backend: ``auto`` = NCCL when CUDA is available, else gloo. With NCCL each rank uses
            ``cuda:<rank % device_count>``.
        fsdp: the model will be wrapped with ``wrap_fsdp``.

    Raises:
        ValueError: rank outside [0, world_size).
    """
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must lie in [0, {world_size}), got {rank}")
    chosen = backend if backend != "auto" else ("nccl" if torch.cuda.is_available() else "gloo")
    if chosen == "nccl":
        torch.cuda.set_device(rank % torch.cuda.device_count())
    dist.init_process_group(chosen, init_method=init_method, rank=rank, world_size=world_size)
    return DataParallel(fsdp=fsdp)


def wrap_fsdp(model: torch.nn.Module, *, layer_classes: tuple[type, ...] = ()) -> Any:
    """Shard ``model`` with FSDP2 (``torch.distributed.fsdp.fully_shard``).

    Each module of ``layer_classes`` (e.g. the decoder layer class) becomes its own shard unit,
    then the root. Not exercised here (see the module docstring).

    Raises:
        RuntimeError: ``torch.distributed`` is not initialised.
    """
    from torch.distributed.fsdp import fully_shard

    if not dist.is_initialized():
        raise RuntimeError("wrap_fsdp needs an initialised process group")
    for module in model.modules():
        if layer_classes and isinstance(module, layer_classes):
            fully_shard(module)
    fully_shard(model)
    return model


def shard_model(model: torch.nn.Module, device: torch.device) -> Any:
    """Move ``model`` to ``device`` and shard it with FSDP2, one unit per decoder layer (every
    module whose class name ends in ``DecoderLayer``) plus the root (``wrap_fsdp``).

    Raises:
        RuntimeError: ``torch.distributed`` is not initialised.
    """
    torch.nn.Module.to(model, device)  # shard from the target device
    layers = {type(m) for m in model.modules() if type(m).__name__.endswith("DecoderLayer")}
    return wrap_fsdp(model, layer_classes=tuple(layers))


def spawn(target: Callable[..., None], world_size: int, *args: Any) -> None:
    """Run ``target(rank, world_size, *args)`` in ``world_size`` fresh processes and wait.

    Uses ``torch.multiprocessing.spawn`` (start method "spawn"); each child gets one torch
    thread unless ``OMP_NUM_THREADS`` says otherwise. ``target`` must be importable by name.

    Raises:
        torch.multiprocessing.ProcessRaisedException: a rank failed (its traceback attached).
    """
    import torch.multiprocessing as mp

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    mp.spawn(target, args=(world_size, *args), nprocs=world_size, join=True)
