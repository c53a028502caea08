"""LoRA on the policy with peft: adapters in, merged weights out, the base as π_ref.

LoRA (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models") replaces each
targeted linear layer's W x by W x + (alpha / r) B A dropout(x), A [r, in] (Kaiming-uniform
init), B [out, r] (zeros), so the adapted model starts equal to the base. peft
(``get_peft_model``) injects the layers; this module is the project's one place that knows:

- ``apply_lora(model, config)``: the base frozen, only A and B trainable;
- ``merged_state_dict(model)`` / ``merged_view(model)``: the full weights W + (alpha / r) B A
  under the base model's own names, computed without touching the training model (peft's
  ``merge_and_unload`` would rewrite it; merging in place and back adds rounding each time).
  Published weights and evaluation read this plain ``save_pretrained`` folder;
- ``adapters_disabled(model)``: π_ref as a module whose forward runs the same model with its
  adapters off (``PeftModel.disable_adapter``): the reference policy is the base, no second
  copy in memory;
- ``dropout_in_gradient_passes(model)``: the adapters' dropout active inside the block only
  (the trainer keeps the model in eval mode: π_old and π_ref never see dropout);
- checkpoints hold the adapters alone (``PeftModel.save_pretrained``: adapter_model.safetensors
  + adapter_config.json), restored with ``load_adapters``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch

from grpo.errors import FailedPreconditionError, InvalidArgumentError
from grpo.learner.config import LoraConfig
from grpo.learner.distributed import FullModelView

__all__ = [
    "ADAPTER_FILE",
    "AdaptersDisabled",
    "adapters_disabled",
    "apply_lora",
    "dropout_in_gradient_passes",
    "is_lora",
    "load_adapters",
    "lora_dropout",
    "merged_state_dict",
    "merged_view",
]

ADAPTER_FILE = "adapter_model.safetensors"
"""What ``PeftModel.save_pretrained`` writes the adapters to (a checkpoint's ``model/``)."""


def apply_lora(model: torch.nn.Module, config: LoraConfig) -> Any:
    """Wrap ``model`` with LoRA adapters on ``config.target_modules``; only they train.

    Args:
        model: a transformers causal LM (its parameters are frozen by peft).
        config: rank, alpha, dropout and target module names.

    Returns:
        The ``peft.PeftModel`` (same forward signature; ``save_pretrained`` saves adapters).

    Raises:
        FailedPreconditionError: peft is not installed.
        InvalidArgumentError: a target module name matches no layer of ``model``.
    """
    try:
        from peft import LoraConfig as PeftLoraConfig
        from peft import get_peft_model
    except ImportError as exc:
        raise FailedPreconditionError(
            f"model.lora needs peft ({exc}); pip install 'grpo-pipeline[learner]'"
        ) from exc
    linear = {
        n.rsplit(".", 1)[-1] for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)
    }
    missing = sorted(set(config.target_modules) - linear)
    if missing:
        raise InvalidArgumentError(
            f"lora.target_modules {missing} match no linear layer of the model (its linear "
            f"layers: {sorted(linear)})"
        )
    peft_config = PeftLoraConfig(
        r=config.r,
        lora_alpha=config.alpha,  # type: ignore[arg-type]  # peft annotates int; scaling is alpha / r
        lora_dropout=config.dropout,
        target_modules=list(config.target_modules),
        task_type="CAUSAL_LM",
        bias="none",
    )
    return get_peft_model(model, peft_config)


def is_lora(model: Any) -> bool:
    """True for a peft model (LoRA adapters applied by ``apply_lora``)."""
    try:
        from peft import PeftModel
    except ImportError:
        return False
    return isinstance(model, PeftModel)


def _lora_layers(model: Any) -> Iterator[tuple[str, Any]]:
    from peft.tuners.lora import LoraLayer

    for name, module in model.get_base_model().named_modules():
        if isinstance(module, LoraLayer):
            yield name, module


def lora_dropout(model: Any) -> float:
    """The adapters' dropout probability (0 for a model without adapters)."""
    if not is_lora(model):
        return 0.0
    config = model.peft_config[model.active_adapter]
    return float(config.lora_dropout)


@torch.no_grad()
def merged_state_dict(model: Any) -> dict[str, torch.Tensor]:
    """The full weights of an adapted model under the base model's names.

    Each adapted layer's weight is W + (alpha / r) B A (peft's ``get_delta_weight``, in W's
    dtype); every other tensor is the base's. The training model is not modified.

    Returns:
        name -> tensor (detached, on the model's device), as the base model's ``state_dict``.
    """
    base = model.get_base_model()
    adapter = model.active_adapter
    merged: dict[str, torch.Tensor] = {}
    for key, value in base.state_dict().items():
        if ".lora_" in key:
            continue
        merged[key.replace(".base_layer.", ".")] = value.detach()
    for name, layer in _lora_layers(model):
        if adapter not in layer.lora_A:
            continue
        key = f"{name}.weight"
        delta = layer.get_delta_weight(adapter)
        merged[key] = (merged[key] + delta.to(merged[key].dtype)).detach()
    return merged


def merged_view(model: Any) -> FullModelView:
    """A ``save_pretrained``-able view writing the merged weights as a plain model folder
    (the base model's class and config: what generation and evaluation load)."""
    return FullModelView(model.get_base_model(), merged_state_dict(model))


class AdaptersDisabled(torch.nn.Module):
    """π_ref for a LoRA policy: the same model run with its adapters off.

    Shares every parameter with the policy (nothing is copied, nothing frozen here: the
    trainer must not call ``requires_grad_(False)`` on it, which would freeze the adapters).
    """

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.policy = model

    def forward(self, **kwargs: Any) -> Any:
        """The base model's forward (``PeftModel.disable_adapter``), same arguments."""
        with self.policy.disable_adapter():
            return self.policy(**kwargs)


def adapters_disabled(model: Any) -> AdaptersDisabled:
    """``AdaptersDisabled(model)``: the reference policy of a LoRA policy."""
    return AdaptersDisabled(model)


@contextlib.contextmanager
def dropout_in_gradient_passes(model: Any) -> Iterator[None]:
    """Switch the adapters' dropout modules to training mode inside the block (the rest of
    the model stays in eval mode: no other dropout); a no-op without adapter dropout."""
    if lora_dropout(model) <= 0:
        yield
        return
    modules = [d for _, layer in _lora_layers(model) for d in layer.lora_dropout.values()]
    for m in modules:
        m.train()
    try:
        yield
    finally:
        for m in modules:
            m.eval()


def load_adapters(model: Any, folder: Path, device: torch.device) -> None:
    """Load a checkpoint's adapters (``folder/adapter_model.safetensors``) into ``model``.

    Raises:
        FailedPreconditionError: ``model`` has no adapters (the checkpoint was written by a
            run with ``model.lora``), or the file's keys do not match its adapters.
    """
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    if not is_lora(model):
        raise FailedPreconditionError(
            f"{folder} holds LoRA adapters but this learner has no model.lora: resume with the "
            "run's lora settings"
        )
    state: Mapping[str, torch.Tensor] = load_file(str(folder / ADAPTER_FILE), device=str(device))
    result = set_peft_model_state_dict(model, state)
    unexpected = list(getattr(result, "unexpected_keys", []) or [])
    if unexpected:
        raise FailedPreconditionError(
            f"{folder}'s adapters do not fit this model's (unexpected keys {unexpected[:5]}): "
            "resume with the run's lora settings"
        )
