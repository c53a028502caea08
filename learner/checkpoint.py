"""Atomic learner checkpoints: model, optimizer, LR schedule, RNG, step, version, consumed ids.

A checkpoint is a folder ``<root>/step-<8 digits>`` holding

- ``model/``: a ``save_pretrained`` folder (``model.safetensors`` + ``config.json``), loadable by
  generation and evaluation as is; for a LoRA policy the adapters alone
  (``adapter_model.safetensors`` + ``adapter_config.json``: the base stays the run's
  ``model_path``; the merged weights are the published ``weights/v<N>`` folders);
- ``optimizer.pt``: optimizer and LR-scheduler state dicts (``torch.save``); a sharded (FSDP)
  model's optimizer state is keyed by parameter name (``"by_name": True``), a plain one's by
  parameter index (``Optimizer.state_dict``); either loads into a model with or without FSDP;
- ``rng.pt``: Python, torch CPU and CUDA RNG states;
- ``critic/`` (``estimator: gae`` only): ``model.safetensors`` (the value model's state dict)
  and ``optimizer.pt`` (its optimizer and LR-scheduler state dicts);
- ``meta.json``: step, policy version, the consumed group ids in training order, the
  precision (parameter/optimizer dtype, autocast, LoRA), the resolved config (with
  ``LearnerAlgoConfig.resolved_definition()``'s pinned definitions) and the code and
  dependency versions.

Atomicity: everything is written into ``<root>/.tmp-step-...`` and fsynced, then the folder is
renamed to its final name (``os.rename`` is atomic on one filesystem) and the root is fsynced.
A folder named ``step-*`` is therefore always complete; a crash leaves at most a ``.tmp-*``
folder, which the next save removes. Only the last ``keep_last`` checkpoints are kept.

Integrity: ``DIGESTS.json`` (``grpo.integrity``) records the size and SHA-256 of every file,
written before the rename. ``intact_checkpoint`` walks the checkpoints from the newest and
returns the newest whose files still match (a truncated file, bytes altered at rest); each
damaged one is moved aside to ``damaged-step-<8 digits>-<unix s>`` with a ``DAMAGED.txt``
saying why, so it is never loaded, never overwritten by the step that reaches its number
again, and kept for inspection. A checkpoint written before digests existed is trusted.

A sharded (FSDP2) model is saved from the full state dicts gathered on rank 0 beforehand
(``grpo.learner.distributed.gather_full_state``, a collective; pass them as ``full_state``) and
restored by every rank at once (``load_checkpoint`` reads the full tensors on each rank and
keeps its shard: ``grpo.learner.distributed.load_full_model_state``).

A checkpoint never holds NaN: ``save_checkpoint`` refuses parameters that are not finite (the
trainer skips any optimizer step whose loss or gradient is not finite, so this only fires on a
bug), and the previous checkpoint stays the newest.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, load_model, save_model

from grpo.errors import FailedPreconditionError, InvalidArgumentError, NotFoundError
from grpo.integrity import (
    DIGESTS_FILE,
    DamagedError,
    NoDigestsError,
    check_digests,
    record_digests,
    recorded_manifest,
    run_writes_digests,
    write_digests,
)
from grpo.learner.distributed import (
    FullModelView,
    FullState,
    is_sharded,
    load_full_model_state,
    load_full_optimizer_state,
)
from grpo.learner.lora import ADAPTER_FILE, is_lora, load_adapters

__all__ = [
    "DAMAGED_PREFIX",
    "CheckpointState",
    "intact_checkpoint",
    "latest_checkpoint",
    "load_checkpoint",
    "quarantine",
    "save_checkpoint",
]

_PREFIX = "step-"
_TMP_PREFIX = ".tmp-"
DAMAGED_PREFIX = "damaged-"
"""Prefix of a checkpoint folder moved aside as damaged (``quarantine``)."""


@dataclass(frozen=True)
class CheckpointState:
    """What a checkpoint records besides tensors.

    Attributes:
        step: optimizer steps taken.
        policy_version: latest policy version published from this training lineage.
        consumed_group_ids: ids of every group trained on, in training order.
        resolved_config: the run's resolved configuration (JSON-serialisable).
        extra: free-form JSON-serialisable counters (e.g. cumulative generated tokens).
        precision: the numerics the state was trained in (``Trainer.precision``: parameter
            and optimizer-state dtype, autocast, LoRA); {} when not recorded.
    """

    step: int
    policy_version: int
    consumed_group_ids: list[str] = field(default_factory=list)
    resolved_config: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    precision: dict[str, str] = field(default_factory=dict)


def _versions() -> dict[str, str]:
    out = {}
    for dist in ("grpo-pipeline", "torch", "transformers", "safetensors"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "unknown"
    return out


def _fsync_tree(folder: Path) -> None:
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            with open(path, "rb") as fh:
                os.fsync(fh.fileno())
    _fsync_dir(folder)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _check_finite(name: str, module: Any) -> None:
    for pname, param in module.named_parameters():
        if not bool(torch.isfinite(param.detach()).all()):
            raise FailedPreconditionError(
                f"refusing to checkpoint: {name} parameter {pname!r} is not finite (NaN/inf)"
            )


def _optimizer_state(optimizer: torch.optim.Optimizer, scheduler: Any | None) -> dict[str, Any]:
    return {
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict() if scheduler is not None else None,
    }


def save_checkpoint(
    root: str | Path,
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any | None,
    state: CheckpointState,
    keep_last: int = 3,
    critic: Any | None = None,
    full_state: FullState | None = None,
) -> Path:
    """Write a checkpoint atomically under ``root`` and prune old ones.

    Args:
        root: checkpoint folder (created if needed).
        model: a transformers ``PreTrainedModel`` (saved with ``save_pretrained``).
        optimizer: its state dict is saved.
        scheduler: LR scheduler with ``state_dict()``, or None.
        state: step, policy version, consumed group ids, resolved config.
        keep_last: how many most recent checkpoints to keep (>= 1).
        critic: the ``gae`` critic (``grpo.learner.critic.Critic``: ``model``, ``optimizer``,
            ``scheduler``), saved under ``critic/``; None without one.
        full_state: for an FSDP-sharded ``model``, the ``grpo.learner.distributed.FullState``
            (model and optimizer) every rank gathered just before (rank 0's copy); required
            then, None for a plain model.

    Returns:
        The final checkpoint folder ``root/step-<step>``.

    Raises:
        InvalidArgumentError: ``keep_last < 1``, a checkpoint of this step already exists, or a
            sharded model without ``full_state`` (or ``full_state`` without its optimizer).
        FailedPreconditionError: a parameter of ``model`` or the critic is NaN or inf
            (nothing is written).
    """
    if keep_last < 1:
        raise InvalidArgumentError(f"keep_last must be >= 1, got {keep_last}")
    saved: Any = model
    optimizer_state = _optimizer_state(optimizer, scheduler) if full_state is None else None
    if is_sharded(model) or full_state is not None:
        if full_state is None or full_state.optimizer is None or not full_state.model:
            raise InvalidArgumentError(
                "a sharded (FSDP) model is checkpointed from the full model and optimizer state "
                "gathered on rank 0 (grpo.learner.distributed.gather_full_state): pass it as "
                "full_state"
            )
        saved = FullModelView(model, full_state.model)
        optimizer_state = {
            "optimizer": full_state.optimizer,
            "scheduler": scheduler.state_dict() if scheduler is not None else None,
            "by_name": True,
        }
    _check_finite("policy", saved)
    if critic is not None:
        _check_finite("critic", critic.model)
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"{_PREFIX}{state.step:08d}"
    if final.exists():
        raise InvalidArgumentError(f"checkpoint {final} already exists; steps must increase")
    for stale in root.glob(f"{_TMP_PREFIX}*"):
        shutil.rmtree(stale, ignore_errors=True)
    tmp = root / f"{_TMP_PREFIX}{final.name}-{os.getpid()}"
    tmp.mkdir()
    saved.save_pretrained(tmp / "model")
    torch.save(optimizer_state, tmp / "optimizer.pt")
    if critic is not None:
        (tmp / "critic").mkdir()
        save_model(critic.model, str(tmp / "critic" / "model.safetensors"))
        torch.save(
            _optimizer_state(critic.optimizer, critic.scheduler), tmp / "critic" / "optimizer.pt"
        )
    torch.save(_rng_state(), tmp / "rng.pt")
    meta = {
        "step": state.step,
        "policy_version": state.policy_version,
        "consumed_group_ids": list(state.consumed_group_ids),
        "resolved_config": state.resolved_config,
        "extra": state.extra,
        "precision": state.precision,
        "versions": _versions(),
        "saved_unix_s": time.time(),
    }
    (tmp / "meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True))
    write_digests(tmp)  # last: it covers every file above
    _fsync_tree(tmp)
    os.rename(tmp, final)
    _fsync_dir(root)
    for old in sorted(root.glob(f"{_PREFIX}*"))[:-keep_last]:
        shutil.rmtree(old, ignore_errors=True)
    record_digests(final)  # the parent vouches for the manifest (grpo.integrity)
    return final


def latest_checkpoint(root: str | Path) -> Path | None:
    """The newest complete checkpoint folder under ``root``, or None when there is none
    (not checked against its digests: ``intact_checkpoint`` is). A ``step-*`` folder gets
    its name by an atomic rename once written, so one with a manifest (``DIGESTS.json``, or
    an entry in the parent's index) is complete as written even when a file of it, its
    ``meta.json`` included, is gone since: it is returned, and its check finds the damage
    (a folder without meta.json used to be passed over silently, and the learner then
    crash-looped when it reached that step again). In a run that records that it writes
    digests (``grpo.integrity.run_writes_digests``) every ``step-*`` folder is one."""
    root = Path(root)
    if not root.is_dir():
        return None
    done = sorted(
        p
        for p in root.glob(f"{_PREFIX}*")
        if (p / "meta.json").is_file()
        or (p / DIGESTS_FILE).is_file()
        or recorded_manifest(p) is not None
        or (p.is_dir() and run_writes_digests(p))
    )
    return done[-1] if done else None


def quarantine(path: Path, reason: str) -> Path:
    """Move a damaged checkpoint aside (``damaged-<name>-<unix s>``, with ``DAMAGED.txt``
    holding ``reason``) so it is never loaded nor overwritten; returns its new path."""
    dest = path.with_name(f"{DAMAGED_PREFIX}{path.name}-{int(time.time())}")
    os.rename(path, dest)
    (dest / "DAMAGED.txt").write_text(reason + "\n")
    return dest


def intact_checkpoint(root: str | Path) -> tuple[Path | None, list[tuple[Path, str]]]:
    """The newest checkpoint under ``root`` whose files match their recorded digests.

    Every newer one that does not is moved aside (``quarantine``).

    Returns:
        ``(checkpoint or None, [(moved-aside path, why), ...])``, newest damaged first.
    """
    skipped: list[tuple[Path, str]] = []
    while (path := latest_checkpoint(root)) is not None:
        try:
            check_digests(path)
        except NoDigestsError:
            return path, skipped  # written before digests existed: trusted as before
        except DamagedError as exc:
            skipped.append((quarantine(path, str(exc)), str(exc)))
            continue
        return path, skipped
    return None, skipped


def _state_by_name(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any]
) -> dict[str, Any]:
    """An index-keyed ``Optimizer.state_dict`` (a plain model's) keyed by parameter name.

    Indices number the parameters of ``optimizer.param_groups`` in order (torch's convention);
    the names are ``model``'s for the same parameter objects (FSDP2 keeps the names).
    """
    names = {id(p): n for n, p in model.named_parameters()}
    order = [names[id(p)] for g in optimizer.param_groups for p in g["params"]]
    groups = []
    for group in state["param_groups"]:
        groups.append({**group, "params": [order[i] for i in group["params"]]})
    return {"state": {order[i]: s for i, s in state["state"].items()}, "param_groups": groups}


def load_checkpoint(
    path: str | Path,
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: Any | None = None,
    restore_rng: bool = True,
    critic: Any | None = None,
) -> CheckpointState:
    """Restore model, optimizer, scheduler and RNG states in place from a checkpoint folder.

    For an FSDP-sharded ``model`` this is a collective: every rank calls it with its own copy of
    the folder (``grpo.learner.distributed.load_full_model_state``).

    Args:
        path: a ``step-*`` folder written by ``save_checkpoint``.
        model: module with the same architecture, sharded or not; weights are loaded onto its
            device.
        optimizer: restored when given (its parameters must be ``model``'s, in the same order).
        scheduler: restored when given.
        restore_rng: also restore the Python, torch and CUDA RNG states.
        critic: the ``gae`` critic (``model``, ``optimizer``, ``scheduler``) to restore in
            place from ``critic/``; None ignores a saved critic.

    Returns:
        The recorded ``CheckpointState``.

    Raises:
        NotFoundError: ``path`` is not a complete checkpoint.
        FailedPreconditionError: ``critic`` is given but the checkpoint has none (it was
            written by a run with another estimator).
    """
    path = Path(path)
    meta_file = path / "meta.json"
    if not meta_file.is_file():
        raise NotFoundError(f"{path} is not a complete checkpoint (no meta.json)")
    meta = json.loads(meta_file.read_text())
    device = next(model.parameters()).device
    opt = torch.load(path / "optimizer.pt", map_location=device, weights_only=False)
    by_name = bool(opt.get("by_name"))  # written from a sharded model
    adapters = (path / "model" / ADAPTER_FILE).is_file()
    if adapters or is_lora(model):
        if not adapters:
            raise FailedPreconditionError(
                f"{path} holds a full model but this learner trains LoRA adapters: resume "
                "without model.lora, or start the LoRA run from a fresh run_dir"
            )
        load_adapters(model, path / "model", device)
        if optimizer is not None:
            optimizer.load_state_dict(opt["optimizer"])
    elif is_sharded(model):  # a collective: every rank loads the full tensors, keeps its shard
        load_full_model_state(model, load_file(str(path / "model" / "model.safetensors")))
        if optimizer is not None:
            state = opt["optimizer"]
            state = state if by_name else _state_by_name(model, optimizer, state)
            load_full_optimizer_state(model, optimizer, state)
    else:
        load_model(model, str(path / "model" / "model.safetensors"), device=str(device))
        if optimizer is not None and by_name:
            load_full_optimizer_state(model, optimizer, opt["optimizer"])
        elif optimizer is not None:
            optimizer.load_state_dict(opt["optimizer"])
    if scheduler is not None and opt["scheduler"] is not None:
        scheduler.load_state_dict(opt["scheduler"])
    if critic is not None:
        folder = path / "critic"
        if not (folder / "model.safetensors").is_file():
            raise FailedPreconditionError(
                f"{path} has no critic/: it was written by a run without estimator 'gae'; "
                "start the gae run from a fresh run_dir"
            )
        critic_device = next(critic.model.parameters()).device
        load_model(critic.model, str(folder / "model.safetensors"), device=str(critic_device))
        copt = torch.load(folder / "optimizer.pt", map_location=critic_device, weights_only=False)
        critic.optimizer.load_state_dict(copt["optimizer"])
        if copt["scheduler"] is not None:
            critic.scheduler.load_state_dict(copt["scheduler"])
    if restore_rng:
        rng = torch.load(path / "rng.pt", weights_only=False)
        random.setstate(rng["python"])
        torch.set_rng_state(rng["torch"])
        if "cuda" in rng and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(rng["cuda"])
    return CheckpointState(
        step=int(meta["step"]),
        policy_version=int(meta["policy_version"]),
        consumed_group_ids=list(meta["consumed_group_ids"]),
        resolved_config=dict(meta["resolved_config"]),
        extra=dict(meta.get("extra", {})),
        precision=dict(meta.get("precision", {})),
    )
