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

Rank 0 alone reads groups from Redis, publishes weights and writes checkpoints; it drives the
other ranks with ``broadcast_command`` (a ``RankCommand``: train this batch, heartbeat, join a
full-state gather, stop; the batch as serialized protobufs). All ranks hold identical
parameters and optimizer states, so every rank restores the same checkpoint.

Failure: ``init_data_parallel(timeout_s=...)`` bounds every collective (and the rendezvous).
gloo reports a peer whose process died (its sockets closed) at once and a peer that is
unreachable or stuck (a lost node, a stopped process) after the timeout; either way the
collective raises on the survivors, which exit non-zero so the whole world restarts from
rank 0's last checkpoint. Rank 0 sends a heartbeat command (then a barrier) whenever it has
had no batch for the others for a while, so a follower never waits longer than the timeout for
a healthy rank 0 and rank 0 notices a dead or hung follower while it idles.

Matched passes: under FSDP every forward and backward of the sharded model is a collective
(all-gather, reduce-scatter), so every rank must run as many as the busiest rank, whose whole
groups may hold more rows. ``fsdp_matched_passes`` counts the passes a rank is short (itself a
collective) before its own and runs that many padding passes after them: a pass on one row
whose output is dropped and whose backward (of 0 × the output) adds exact zeros to the
gradients.

FSDP (``wrap_fsdp``) shards parameters, gradients and optimizer state for a model that does not
fit one device, with torch's ``fully_shard`` (FSDP2; it runs on CPU with gloo too, as the tests
do). FSDP reduce-scatters *averaged* gradients, so under FSDP the trainer multiplies each loss
by the world size (``loss_scale``) and skips the manual all-reduce. A sharded model is saved
from a full state dict gathered on rank 0 (``gather_full_state``, a collective every rank
joins; ``FullModelView`` gives it ``save_pretrained``) and restored with
``load_full_model_state`` / ``load_full_optimizer_state`` (every rank reads the full tensors
and keeps its shard). Optimizer states of a sharded model are keyed by parameter name
(``torch.distributed.checkpoint.state_dict``); a checkpoint written with or without FSDP loads
into either (``grpo.learner.checkpoint``).
"""

from __future__ import annotations

import contextlib
import datetime
import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
import torch.distributed as dist

from grpo.errors import InvalidArgumentError
from grpo.learner import metric_names as mn
from grpo.learner.collectives import all_reduce
from grpo.v1 import common_pb2

__all__ = [
    "DataParallel",
    "FullModelView",
    "FullState",
    "RankCommand",
    "broadcast_folder",
    "fsdp_matched_passes",
    "fsdp_padding_passes",
    "gather_full_state",
    "init_data_parallel",
    "is_sharded",
    "load_full_model_state",
    "load_full_optimizer_state",
    "shard_groups",
    "spawn",
    "wrap_fsdp",
]

_SUMMED = ("loss/total", "loss/tokens", "loss/responses")
_MIN = (mn.LOSS_RATIO_MIN,)
_MAX = (mn.LOSS_RATIO_MAX,)


CommandKind = Literal["train", "heartbeat", "gather_weights", "gather_checkpoint", "stop"]
_KINDS = ("train", "heartbeat", "gather_weights", "gather_checkpoint", "stop")


@dataclass(frozen=True)
class RankCommand:
    """What rank 0 tells the other ranks to do next (``DataParallel.broadcast_command``).

    Attributes:
        kind: ``train`` (step on your shard of ``groups``), ``heartbeat`` (rank 0 is alive and idle:
            every rank joins a barrier), ``gather_weights`` / ``gather_checkpoint`` (join
            ``gather_full_state`` of the model / model and optimizer: rank 0 publishes or
            checkpoints a sharded model), ``stop`` (rank 0 stopped cleanly: leave the loop).
        groups: the whole batch for ``train`` (every rank takes ``shard_groups`` of it);
            empty otherwise.

    Raises:
        InvalidArgumentError: an unknown kind, or ``train`` without groups.
    """

    kind: CommandKind
    groups: list[common_pb2.Group] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise InvalidArgumentError(f"unknown rank command {self.kind!r}; one of {_KINDS}")
        if self.kind == "train" and not self.groups:
            raise InvalidArgumentError("a train command needs at least one group")


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

    def merge_stats(
        self, stats: Mapping[str, float], keys: Sequence[str] | None = None
    ) -> dict[str, float]:
        """Merge a rank's loss statistics into world-level ones.

        ``loss/total``, ``loss/tokens``, ``loss/responses`` are summed; ``loss/ratio_min``/``max``
        reduced with min/max; every other entry is the mean weighted by ``loss/tokens`` (as
        ``grpo.learner.losses.merge_loss_stats`` does across micro-batches). Every rank must
        pass the same ``keys`` (default: the keys of ``stats``); a key a rank's ``stats``
        lacks (its rank had no loss token: ``merge_loss_stats`` leaves its means out) counts
        with weight 0. With no loss token on any rank only the sums are returned.
        """
        names = sorted(keys if keys is not None else stats)
        tokens = float(stats.get("loss/tokens", 0.0))
        weighted = torch.tensor(
            [
                stats.get(k, 0.0) if k in _SUMMED else stats.get(k, 0.0) * tokens if tokens else 0.0
                for k in names
            ]
            + [tokens],
            dtype=torch.float64,
        )
        self.all_reduce(weighted, "sum")
        mins = torch.tensor([stats.get(k, math.inf) for k in _MIN], dtype=torch.float64)
        maxs = torch.tensor([stats.get(k, -math.inf) for k in _MAX], dtype=torch.float64)
        self.all_reduce(mins, "min")
        self.all_reduce(maxs, "max")
        total_tokens = float(weighted[-1])
        out = {
            k: float(weighted[i]) if k in _SUMMED else float(weighted[i]) / total_tokens
            for i, k in enumerate(names)
            if k in _SUMMED or total_tokens > 0
        }
        out.update({k: float(mins[i]) for i, k in enumerate(_MIN) if math.isfinite(mins[i])})
        out.update({k: float(maxs[i]) for i, k in enumerate(_MAX) if math.isfinite(maxs[i])})
        return out

    def broadcast_command(self, command: RankCommand | None = None) -> RankCommand:
        """Rank 0 sends ``command`` to every rank; the others receive it (one collective).

        Args:
            command: what every rank does next, on rank 0; ignored (None) on other ranks.

        Returns:
            The command rank 0 sent (on every rank).

        Raises:
            InvalidArgumentError: rank 0 passed no command.
            RuntimeError: the collective failed: a rank died, or none answered within the
                process group's timeout.
        """
        payload: list[Any] = [None]
        if self.is_main:
            if command is None:
                raise InvalidArgumentError("rank 0 must pass the command to broadcast")
            payload = [(command.kind, [g.SerializeToString() for g in command.groups])]
        dist.broadcast_object_list(payload, src=0)
        kind, blobs = payload[0]
        return RankCommand(kind, [common_pb2.Group.FromString(b) for b in blobs])

    def barrier(self) -> None:
        """Wait for every rank."""
        dist.barrier()


def fsdp_padding_passes(
    parallel: Any, num_rows: int, micro_batch_size: int, device: torch.device
) -> int:
    """How many extra passes this rank runs after its micro-batches of ``num_rows`` rows.

    Under FSDP every pass of the sharded model is a collective, so every rank runs as many as
    the rank with the most micro-batches. A collective itself (a max over ranks, a float64
    tensor on ``device``): call it on every rank, before the passes.

    Args:
        parallel: this rank's ``DataParallel``, or None for a single process.
        num_rows: the rows this rank passes, in micro-batches of ``micro_batch_size``.
        device: where the collective's tensor lives (the CUDA device under NCCL).

    Returns:
        The busiest rank's micro-batches minus this rank's; 0 without FSDP.
    """
    if not (parallel is not None and getattr(parallel, "fsdp", False)):
        return 0
    mine = (num_rows + micro_batch_size - 1) // micro_batch_size
    most = torch.tensor([float(mine)], dtype=torch.float64, device=device)
    return int(parallel.all_reduce(most, "max")[0]) - mine


@contextlib.contextmanager
def fsdp_matched_passes(
    parallel: Any,
    num_rows: int,
    micro_batch_size: int,
    device: torch.device,
    padding_forward: Callable[[], torch.Tensor],
    *,
    backward: bool,
) -> Iterator[None]:
    """Run the body's passes, then as many padding passes as this rank is short under FSDP.

    Args:
        parallel, num_rows, micro_batch_size, device: as :func:`fsdp_padding_passes`.
        padding_forward: a forward of the sharded model on one row, returning any tensor
            computed from its output (e.g. log-probs [1, T]); its value is dropped.
        backward: the body's passes have a backward; the padding passes then run one too
            (of 0 × the output: exact zeros added to the gradients).
    """
    missing = fsdp_padding_passes(parallel, num_rows, micro_batch_size, device)
    yield
    for _ in range(missing):
        with torch.set_grad_enabled(backward):
            out = padding_forward()
            if backward:
                (out.sum() * 0.0).backward()


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
    timeout_s: float | None = None,
) -> DataParallel:
    """Join the process group and return this rank's ``DataParallel``.

    Args:
        rank: 0 <= rank < world_size.
        world_size: number of processes.
        init_method: rendezvous URL, e.g. ``file:///tmp/x``, ``tcp://127.0.0.1:29500`` or
            ``env://`` ($MASTER_ADDR, $MASTER_PORT).
        backend: ``auto`` = NCCL when CUDA is available, else gloo. With NCCL each rank uses
            ``cuda:<rank % device_count>``.
        fsdp: the model will be wrapped with ``wrap_fsdp``.
        timeout_s: the longest wait of the rendezvous and of every collective (seconds); a
            collective that waits longer raises (gloo) or aborts the process (NCCL, whose
            default async error handling tears the process down). None = torch's default
            (30 min gloo, 10 min NCCL).

    Raises:
        ValueError: rank outside [0, world_size) or a timeout that is not positive.
        RuntimeError / torch.distributed.DistError: the rendezvous failed or timed out.
    """
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must lie in [0, {world_size}), got {rank}")
    if timeout_s is not None and not timeout_s > 0:
        raise ValueError(f"timeout_s must be > 0 seconds, got {timeout_s}")
    chosen = backend if backend != "auto" else ("nccl" if torch.cuda.is_available() else "gloo")
    if chosen == "nccl":
        torch.cuda.set_device(rank % torch.cuda.device_count())
    timeout = None if timeout_s is None else datetime.timedelta(seconds=timeout_s)
    dist.init_process_group(
        chosen, init_method=init_method, rank=rank, world_size=world_size, timeout=timeout
    )
    return DataParallel(fsdp=fsdp)


def wrap_fsdp(model: torch.nn.Module, *, layer_classes: tuple[type, ...] = ()) -> Any:
    """Shard ``model`` with FSDP2 (``torch.distributed.fsdp.fully_shard``).

    Each module of ``layer_classes`` (e.g. the decoder layer class) becomes its own shard unit,
    then the root. Runs on CPU with gloo as on GPUs with NCCL.

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


def is_sharded(model: torch.nn.Module) -> bool:
    """True when ``model`` is sharded with FSDP2 (``fully_shard``: its parameters are DTensors)."""
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


@dataclass
class FullState:
    """Full (unsharded) state dicts of a sharded model, on CPU; empty on ranks other than 0.

    Attributes:
        model: parameter and buffer name -> tensor (the shapes of the unsharded model).
        optimizer: ``{"state": {name: {...}}, "param_groups": [{..., "params": [name, ...]}]}``
            (``torch.distributed.checkpoint.state_dict``'s full optimizer state dict, keyed by
            parameter name), or None when not gathered.
    """

    model: dict[str, torch.Tensor]
    optimizer: dict[str, Any] | None = None


def gather_full_state(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer | None = None
) -> FullState:
    """Gather a sharded model's (and its optimizer's) full state dicts onto rank 0's CPU.

    A collective: every rank of the world must call it at the same point (the followers do on
    rank 0's ``gather_weights`` / ``gather_checkpoint`` command). Uses
    ``torch.distributed.checkpoint.state_dict.get_model_state_dict`` /
    ``get_optimizer_state_dict`` with ``full_state_dict=True, cpu_offload=True``.

    Args:
        model: the FSDP2-sharded model.
        optimizer: its optimizer, or None for the model alone (publishing weights).

    Returns:
        The full states on rank 0 (a tied parameter under its first name only, as
        ``save_pretrained`` writes it); empty ones (``model == {}``) on every other rank.

    Raises:
        InvalidArgumentError: ``model`` is not sharded.
        RuntimeError: a collective failed (a rank died or timed out).
    """
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        get_model_state_dict,
        get_optimizer_state_dict,
    )

    if not is_sharded(model):
        raise InvalidArgumentError("gather_full_state needs an FSDP-sharded model")
    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    tensors = get_model_state_dict(model, options=options)
    aliases = _tied_aliases(model)  # saved once, as save_pretrained does for a plain model
    state = FullState(
        model={k: v for k, v in tensors.items() if isinstance(v, torch.Tensor) and k not in aliases}
    )
    if optimizer is not None:
        state.optimizer = dict(get_optimizer_state_dict(model, optimizer, options=options))
    return state


def load_full_model_state(model: torch.nn.Module, state: Mapping[str, torch.Tensor]) -> None:
    """Load a full (unsharded) model state dict into a sharded or plain model.

    For a sharded model a collective: every rank calls it with the full tensors and keeps its
    shard (``torch.distributed.checkpoint.state_dict.set_model_state_dict``,
    ``full_state_dict=True``); for a plain model a local copy. A tied parameter (e.g.
    ``lm_head.weight`` sharing the embedding) may be absent (``save_pretrained`` drops it).

    Args:
        model: the model (FSDP2-sharded or not).
        state: parameter and buffer name -> full tensor.

    Raises:
        InvalidArgumentError: ``state`` lacks a parameter that is not a tied alias, or holds
            names the model does not have.
        RuntimeError: a shape mismatch, or a collective failed.
    """
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

    result = set_model_state_dict(
        model, dict(state), options=StateDictOptions(full_state_dict=True, strict=False)
    )
    missing = sorted(set(result.missing_keys) - _tied_aliases(model))
    if missing or result.unexpected_keys:
        raise InvalidArgumentError(
            f"model state does not match the model: missing {missing[:5]}, "
            f"unexpected {sorted(result.unexpected_keys)[:5]}"
        )


def load_full_optimizer_state(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer, state: Mapping[str, Any]
) -> None:
    """Load a name-keyed full optimizer state dict (``FullState.optimizer``) into ``optimizer``.

    Works for a sharded model (a collective: every rank calls it; each keeps its shard of the
    moments) and for a plain one (``set_optimizer_state_dict``, ``full_state_dict=True``).

    Raises:
        KeyError / ValueError: the state names parameters ``model`` does not have.
        RuntimeError: a collective failed.
    """
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        set_optimizer_state_dict,
    )

    set_optimizer_state_dict(
        model, optimizer, dict(state), options=StateDictOptions(full_state_dict=True)
    )


def _tied_aliases(model: torch.nn.Module) -> set[str]:
    """Names of parameters that are the same tensor as an earlier-named one (tied weights)."""
    first = {n for n, _ in model.named_parameters()}
    return {n for n, _ in model.named_parameters(remove_duplicate=False)} - first


class FullModelView:
    """A sharded model's ``save_pretrained`` from its gathered full state dict (rank 0).

    ``grpo.services.learner.publish.publish_weights`` and ``save_checkpoint`` call
    ``model.save_pretrained(folder)``; on a sharded model that needs the full tensors, which
    ``gather_full_state`` collected beforehand (a collective). This view writes them.

    Args:
        model: the sharded transformers model (its config and class drive the files).
        state: the full model state dict from ``gather_full_state`` (rank 0).
    """

    def __init__(self, model: Any, state: Mapping[str, torch.Tensor]) -> None:
        self.model = model
        self.state = dict(state)

    def save_pretrained(self, folder: str | Path) -> None:
        """``model.save_pretrained(folder, state_dict=<the full state>)``."""
        self.model.save_pretrained(folder, state_dict=self.state)

    def named_parameters(self) -> Any:
        """(name, full tensor) of every tensor of the full state (for finiteness checks)."""
        return iter(self.state.items())


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
