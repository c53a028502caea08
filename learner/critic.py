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
(``grpo.learner.checkpoint``). It is the trainer's one optional collaborator
(``build_critic``: None for the group estimators): in a step's prepare phase it computes the
values at batch start and from them the GAE advantages and returns (``Critic.targets``), in
every micro-batch it adds the clipped value loss's gradient (``Critic.backward``), and it
steps with the policy. The math (GAE, value loss) is in ``grpo.learner.value``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch

from grpo.learner.batch import TrainingBatch
from grpo.learner.choices import CriticEstimatorName, names
from grpo.learner.config import LearnerAlgoConfig, TrainerConfig
from grpo.learner.losses import LossDenominators

__all__ = ["Critic", "CriticTargets", "ValueModel", "build_critic"]


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


@dataclass(frozen=True)
class CriticTargets:
    """What the critic fixes at batch start (``Critic.targets``).

    Attributes:
        advantages: [N, T] GAE token advantages (whitened when configured), in the batch's
            float dtype.
        member_advantages: [P, G] each response's advantage at its first loss token (for the
            group diagnostics), 0 for members without loss tokens.
        old_values: [N, T] the values at batch start (0 beyond each response).
        returns: [N, T] G_t = A_t + V_t (before whitening), the value loss's targets.
        explained_variance: of ``old_values`` for ``returns`` over the loss tokens (all ranks).
    """

    advantages: torch.Tensor
    member_advantages: torch.Tensor
    old_values: torch.Tensor
    returns: torch.Tensor
    explained_variance: float


class Critic:
    """The value model with its AdamW optimizer and ``LambdaLR`` schedule.

    Args:
        model: the value model (moved to ``device``): a :class:`ValueModel`, or any module
            with its ``forward(input_ids, attention_mask, position_ids, num_values)``.
        algo: the algorithm config (GAE γ and λ, whitening, reward weights, value clip,
            reduction).
        config: the trainer config (peak ``critic_lr``, else ``lr``; AdamW settings;
            ``max_response_length``).
        lr_lambda: the schedule factor by optimizer step (the policy's schedule).
        device: where the model lives.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        algo: LearnerAlgoConfig,
        config: TrainerConfig,
        *,
        lr_lambda: Callable[[int], float],
        device: torch.device | str = "cpu",
    ) -> None:
        self.algo = algo
        self.config = config
        self.model = model.to(device)
        self.model.eval()  # no dropout: old and new values are the same function
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(
            params,
            lr=config.critic_lr if config.critic_lr is not None else config.lr,
            betas=(config.adam_beta1, config.adam_beta2),
            eps=config.adam_eps,
            weight_decay=config.weight_decay,
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lr_lambda)

    def parameters_with_grad(self) -> list[torch.nn.Parameter]:
        """Parameters that received a gradient in this optimizer step."""
        return [p for p in self.model.parameters() if p.grad is not None]

    def values(self, batch: TrainingBatch, rows: torch.Tensor) -> tuple[torch.Tensor, int]:
        """Values [n, T_mb] of ``rows`` (with gradient when enabled) and T_mb, over the same
        columns as the policy's forward of those rows (``TrainingBatch.columns``)."""
        cols, t_mb = batch.columns(rows)
        values = self.model(
            batch.input_ids[rows, cols],
            batch.attention_mask[rows, cols],
            batch.position_ids[rows, cols],
            t_mb,
        )
        return values, t_mb

    @torch.no_grad()
    def values_at_start(
        self, batch: TrainingBatch, micro_batches: Iterable[torch.Tensor]
    ) -> torch.Tensor:
        """[N, T] values of every row, one forward per micro-batch of row indices (together
        they cover every row); 0 beyond each response."""
        out = torch.zeros(batch.response_ids.shape, device=batch.response_ids.device)
        for rows in micro_batches:
            values, t_mb = self.values(batch, rows)
            out = out.to(values.dtype)
            out[rows, :t_mb] = values
        return out

    def targets(
        self,
        batch: TrainingBatch,
        mask: torch.Tensor,
        micro_batches: Iterable[torch.Tensor],
        *,
        distributed: bool,
    ) -> CriticTargets:
        """The values at batch start and the GAE advantages and returns built on them.

        Token rewards: outcome (× ``outcome_weight``) on the last loss token, process steps
        (× ``process_weight``) on their end tokens (``grpo.learner.value.token_rewards``);
        GAE with γ, λ over the loss tokens ``mask`` [N, T]; whitening and the explained
        variance over every rank when ``distributed``. The per-member advantage is R − V(prompt)
        with γ = λ = 1 and no whitening.
        """
        from grpo.learner.value import (
            explained_variance,
            gae_advantages,
            masked_whiten,
            token_rewards,
        )

        algo = self.algo
        old_values = self.values_at_start(batch, micro_batches)
        outcome = batch.rewards[batch.row_prompt, batch.row_slot]  # (N,) NaN where missing
        steps = batch.has_process_rewards
        rewards = token_rewards(
            outcome,
            mask,
            step_ends=batch.step_ends if steps else None,
            step_rewards=batch.step_rewards if steps else None,
            outcome_weight=algo.outcome_weight,
            process_weight=algo.process_weight,
        )
        adv, returns = gae_advantages(
            rewards, old_values, mask, gamma=algo.gamma, lam=algo.gae_lambda
        )
        if algo.whiten_advantages:
            adv = masked_whiten(adv, mask, distributed=distributed)
        dtype = batch.behavior_logprobs.dtype
        first = mask.int().argmax(1)  # (N,) first loss token
        per_row = torch.where(mask.any(1), adv.gather(1, first[:, None]).squeeze(1), 0.0)
        per_member = torch.zeros(batch.rewards.shape, dtype=dtype, device=adv.device)
        per_member[batch.row_prompt, batch.row_slot] = per_row.to(dtype)
        returns = returns.to(dtype)
        return CriticTargets(
            advantages=adv.to(dtype),
            member_advantages=per_member,
            old_values=old_values,
            returns=returns,
            explained_variance=explained_variance(
                old_values, returns, mask, distributed=distributed
            ),
        )

    def backward(
        self,
        batch: TrainingBatch,
        rows: torch.Tensor,
        mask: torch.Tensor,
        targets: CriticTargets,
        denominators: LossDenominators,
    ) -> tuple[dict[str, float], bool]:
        """Forward and backward of the clipped value loss of the micro-batch ``rows``.

        Args:
            batch, rows: the batch and the micro-batch's row indices [n].
            mask: [N, T] loss tokens.
            targets: this step's ``targets``.
            denominators: the policy loss's global ``LossDenominators`` of this optimizer step.

        Returns:
            (the ``critic/*`` statistics of ``grpo.learner.value.value_loss``, whether the loss
            was finite).
        """
        from grpo.learner.value import value_loss

        values, t_mb = self.values(batch, rows)
        loss, stats = value_loss(
            values,
            targets.old_values[rows, :t_mb],
            targets.returns[rows, :t_mb],
            mask[rows, :t_mb],
            value_clip=self.algo.value_clip,
            reduction=self.algo.reduction,
            num_tokens=denominators.num_tokens,
            num_responses=denominators.num_responses,
            max_response_length=self.config.max_response_length or None,
        )
        loss.backward()
        critic_stats = {k: v for k, v in stats.items() if k.startswith("critic/")}
        return critic_stats, bool(torch.isfinite(loss.detach()))

    def metrics(self, targets: CriticTargets, *, grad_norm: float) -> dict[str, float]:
        """The critic's step metrics besides its loss statistics (``backward``'s).

        Args:
            targets: this step's ``targets``.
            grad_norm: the gradient L2 norm before clipping of its last optimizer step.

        Returns:
            ``critic/explained_variance`` (of the values at batch start), ``critic/grad_norm``
            and ``critic/lr`` (of the last optimizer step).
        """
        return {
            "critic/explained_variance": targets.explained_variance,
            "critic/grad_norm": grad_norm,
            "critic/lr": float(self.scheduler.get_last_lr()[0]),
        }


def build_critic(
    algo: LearnerAlgoConfig,
    config: TrainerConfig,
    policy: torch.nn.Module,
    *,
    value_model: torch.nn.Module | None,
    sharded: bool,
    lr_lambda: Callable[[int], float],
    device: torch.device,
) -> Critic | None:
    """The critic of a critic estimator (``gae``); None for the group estimators.

    Args:
        algo, config, lr_lambda, device: as :class:`Critic`.
        policy: the policy; by default the value model is a copy of its backbone
            (``ValueModel.from_policy``).
        value_model: the value model to train instead, or None.
        sharded: the policy is sharded with FSDP.

    Raises:
        InvalidArgumentError: ``value_model`` given for a group estimator, or a critic
            estimator under FSDP (the critic is not sharded).
    """
    from grpo.errors import InvalidArgumentError

    if algo.estimator not in names(CriticEstimatorName):
        if value_model is not None:
            raise InvalidArgumentError(
                f"value_model is only used by estimator 'gae', not {algo.estimator!r}"
            )
        return None
    if sharded:
        raise InvalidArgumentError(
            "estimator 'gae' with fsdp is not supported: the critic is not sharded"
        )
    model = value_model if value_model is not None else ValueModel.from_policy(policy)
    return Critic(model, algo, config, lr_lambda=lr_lambda, device=device)
