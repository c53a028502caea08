"""The learned critic of the ``gae`` estimator: a value model, its optimizer and LR schedule.

``ValueModel`` is a transformer backbone (the base model of a causal LM, without its LM head)
plus a scalar linear head: V(prompt, y_<t) is read from the hidden state at the position whose
logits predict token t, so ``values[:, t]`` lines up with the policy's ``logprobs[:, t]``.
By default the trainer builds it from a copy of the policy's own backbone, as verl and
OpenRLHF initialise their critic from the actor (or a reward model) and train it separately:
the policy's gradient never flows into the critic and vice versa. The head starts at zero
(every V = 0 before the first update; the backbone receives gradient from the second update
on).

``Critic`` holds the value model, its AdamW optimizer and the same warmup/decay schedule as the
policy (``grpo.learner.schedule``), so a checkpoint can save and restore all three
(``grpo.learner.checkpoint``). The math (GAE, value loss) is in ``grpo.learner.value``.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

__all__ = ["Critic", "ValueModel"]


class ValueModel(torch.nn.Module):
    """A causal-LM backbone with a scalar value head.

    Args:
        backbone: a transformers base model (e.g. ``Qwen2Model``) whose output has
            ``last_hidden_state`` [n, S, H].
        hidden_size: H.
    """

    def __init__(self, backbone: torch.nn.Module, hidden_size: int) -> None:
        super().__init__()
        self.backbone = backbone
        self.head = torch.nn.Linear(hidden_size, 1)
        torch.nn.init.zeros_(self.head.weight)
        torch.nn.init.zeros_(self.head.bias)

    @classmethod
    def from_policy(cls, policy: torch.nn.Module) -> ValueModel:
        """A value model on a deep copy of ``policy``'s backbone (``policy.base_model``).

        Raises:
            ValueError: ``policy`` has no ``base_model`` or ``config.hidden_size``.
        """
        base = getattr(policy, "base_model", None)
        hidden = getattr(getattr(policy, "config", None), "hidden_size", None)
        if base is None or base is policy or hidden is None:
            raise ValueError(
                "the policy has no separate base_model/config.hidden_size; pass a ValueModel "
                "built on a backbone explicitly"
            )
        backbone = copy.deepcopy(base)
        param = next(backbone.parameters())
        return cls(backbone, int(hidden)).to(device=param.device, dtype=param.dtype)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        position_ids: torch.Tensor,
        num_values: int,
    ) -> torch.Tensor:
        """Values of the last ``num_values`` response tokens' states.

        Args:
            input_ids, attention_mask, position_ids: int Tensor[n, S] of prompt + response
                (the layout of ``grpo.learner.batch.TrainingBatch``), the response in the
                last ``num_values`` columns.
            num_values: T, the response columns.

        Returns:
            float Tensor[n, T]: column t is V of the state before response token t (read at
            column S − T − 1 + t), in the head's dtype widened to float32.
        """
        out = self.backbone(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            use_cache=False,
        )
        hidden = out.last_hidden_state[:, -(num_values + 1) : -1]  # (n, T, H)
        values = self.head(hidden).squeeze(-1)
        return values.float() if values.dtype in (torch.float16, torch.bfloat16) else values


class Critic:
    """The value model with its AdamW optimizer and ``LambdaLR`` schedule.

    Args:
        model: the value model (moved to ``device``): a :class:`ValueModel`, or any module
            with its ``forward(input_ids, attention_mask, position_ids, num_values)``.
        lr: peak learning rate of the critic.
        lr_lambda: the schedule factor by optimizer step (the policy's schedule).
        betas, eps, weight_decay: AdamW settings.
        device: where the model lives.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        *,
        lr: float,
        lr_lambda: Any,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        device: torch.device | str = "cpu",
    ) -> None:
        self.model = model.to(device)
        self.model.eval()  # no dropout: old and new values are the same function
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(
            params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lr_lambda)

    def parameters_with_grad(self) -> list[torch.nn.Parameter]:
        """Parameters that received a gradient in this optimizer step."""
        return [p for p in self.model.parameters() if p.grad is not None]
