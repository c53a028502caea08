"""The GRPO trainer: one ``step(groups)`` = prepare -> update loop -> metrics.

A plain class with no Redis or gRPC. It owns the policy model π_θ, its AdamW optimizer with a
linear warmup and a constant/linear/cosine schedule (``grpo.learner.schedule``: ``lr`` is the
peak, the decay starts after warmup), the reference model π_ref when the KL weight β > 0, and
with ``estimator: gae`` a learned critic (``grpo.learner.critic``, its one optional
collaborator). One call of ``step`` on B closed groups, read top to bottom in ``step``:

1. **prepare** (``_prepare``, a frozen ``StepPlan``):

   - builds the padded batch (``grpo.learner.batch``);
   - advantages: outcome (``group_advantages`` over rewards [P, G], missing rewards masked)
     and process credit (``process_token_advantages`` on step rewards placed at their
     step-end tokens), combined as ``outcome_weight * A_outcome + process_weight *
     A_process``; with ``gae`` the critic gives them instead (``Critic.targets``: token
     rewards and its values at batch start give GAE advantages and returns,
     ``grpo.learner.value``);
   - computes π_old log-probs without gradient, at the sampler's temperature and under the
     top-k/top-p truncation each rollout records (``token_logprobs(logits, ids, temperature,
     top_k=, top_p=)``; π_θ likewise, so the ratio and the TIS weight compare like with
     like), and π_ref's (full vocabulary, as the KL term's π_θ) when β > 0. The parameters do
     not move before the first minibatch's optimizer step, so the first epoch's gradient pass
     over the first minibatch computes π_θ = π_old of its rows: their π_old is that pass's
     detached log-probs, and the no-grad forward covers only the other minibatches' rows
     (none with one epoch and one minibatch). Same definition, one forward less per step for
     those rows (a quarter to a half of π_old's cost at 2 minibatches).

2. **update loop**: ``ppo_epochs`` passes over ``minibatches`` minibatches of rows; each
   minibatch is one optimizer step, accumulated over micro-batches of ``micro_batch_size``
   rows (``_micro_step``, one ``MicroResult`` each: the policy loss's forward and backward,
   and with ``gae`` the critic's clipped value loss with the same mask, reduction and
   denominators). Denominators (tokens, responses) are global over the whole minibatch and all
   ranks, so the gradient does not depend on the split (DESIGN.md "Reductions").

   - Behavior correction: with ``tis_cap`` set, each token's loss is weighted by the
     truncated importance weight min(π_old/μ, cap) (truncated IS, Yao et al. 2025 "Your
     efficient RL framework secretly brings you off-policy RL training"); the mismatch
     mean/max |log π_old − log μ| is always reported.
   - Numerics: an optimizer step whose loss or gradient norm (policy or critic) is not finite
     is skipped — gradients dropped, parameters, optimizer state and LR schedule untouched —
     with a warning and the count in ``optim/skipped_steps`` (``optim/skipped_steps_total``
     since the trainer was built), so NaN never reaches the parameters or a checkpoint.
   - No signal: a minibatch with nothing to follow (every loss token's advantage exactly 0,
     β = 0, no critic: groups all wrong or all right, kept with dynamic sampling off) takes no
     optimizer step either — AdamW would still move every parameter by its momentum — and is
     counted in ``optim/no_signal_steps``. In the same case the rows whose advantages are all
     0 are not passed through the model at all (their loss and gradient are exactly 0; their
     tokens stay in the denominators), so training on every group costs the passes of the
     informative rows only.

3. **metrics** (``_metrics``): the diagnostics of DESIGN.md over the batch and the update.

Data parallel: pass a ``grpo.learner.distributed.DataParallel``; every rank calls ``step`` with
its own whole groups; denominators, gradients and summed statistics are all-reduced, and under
FSDP every rank runs matching passes (``grpo.learner.distributed.fsdp_matched_passes``).
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from grpo.devices import resolve_device
from grpo.learner import metric_names as mn
from grpo.learner.batch import GroupRows, TrainingBatch, pad_batch
from grpo.learner.config import LearnerAlgoConfig, TrainerConfig
from grpo.learner.critic import CriticTargets, build_critic
from grpo.learner.distributed import fsdp_matched_passes
from grpo.learner.logprobs import entropy_from_logits
from grpo.learner.lora import adapters_disabled, dropout_in_gradient_passes, is_lora, lora_dropout
from grpo.learner.losses import LossDenominators, loss_denominators
from grpo.learner.schedule import lr_multiplier

__all__ = ["MicroResult", "StepPlan", "Trainer", "TrainerConfig"]

log = logging.getLogger(__name__)


def _lr_multiplier(config: TrainerConfig, step: int) -> float:
    """LR factor of optimizer update ``step`` (LambdaLR convention, step 0 = first update)."""
    return lr_multiplier(
        step,
        warmup_steps=config.warmup_steps,
        schedule=config.schedule,
        total_steps=config.total_steps,
        min_lr_ratio=config.min_lr_ratio,
    )


@dataclass(frozen=True)
class StepPlan:
    """What one ``step`` trains on, fixed by the prepare phase before the first update.

    Attributes:
        batch: the padded batch on the trainer's device: N rows, T response columns.
        mask: [N, T] bool, the loss tokens (response mask of rows with a valid reward).
        advantages: [N, T] token advantages.
        outcome_advantages: [P, G] each group member's advantage (the group diagnostics'):
            the outcome advantages, or with ``gae`` each response's at its first loss token.
        minibatches: [n_k] int64 row indices of each minibatch, one optimizer step each.
        live: [N] bool, the rows whose passes can move π_θ (``Trainer._rows_with_signal``).
        old_logprobs: [N, T] log π_old for every pass but the first minibatch's in epoch 0,
            or None with one epoch and one minibatch (no pass needs a stored π_old). The
            no-grad forward at batch start fills the other minibatches' live rows; the first
            minibatch's rows are written in by its epoch-0 gradient pass (nothing has moved
            yet, so π_θ = π_old there).
        ref_logprobs: [N, T] log π_ref (full vocabulary) when β > 0, else None.
        critic: the critic's values, returns and GAE advantages with ``gae``, else None.
    """

    batch: TrainingBatch
    mask: torch.Tensor
    advantages: torch.Tensor
    outcome_advantages: torch.Tensor
    minibatches: tuple[torch.Tensor, ...]
    live: torch.Tensor
    old_logprobs: torch.Tensor | None
    ref_logprobs: torch.Tensor | None
    critic: CriticTargets | None


@dataclass(frozen=True)
class MicroResult:
    """One micro-batch's forward and backward (``Trainer._micro_step``).

    Attributes:
        rows: [n] int64, the micro-batch's row indices.
        stats: its loss statistics (``policy_loss``'s, and the critic's ``critic/*``).
        entropy_sum: () float64, the entropy (nats) summed over its loss tokens.
        old_logprobs: [n, T_mb] the log π_old its loss used; T_mb is its longest response.
        finite: every loss it backpropagated was finite.
    """

    rows: torch.Tensor
    stats: dict[str, float]
    entropy_sum: torch.Tensor
    old_logprobs: torch.Tensor
    finite: bool

    @property
    def t_mb(self) -> int:
        """T_mb, the columns of the micro-batch's response tokens."""
        return int(self.old_logprobs.shape[1])


@dataclass(frozen=True)
class _Forward:
    """A model's forward over some rows' response tokens (``Trainer._forward_logprobs``).

    Attributes:
        logprobs: [n, T_mb] under each row's recorded top-k/top-p when truncation was asked.
        kl_logprobs: [n, T_mb] full-vocabulary log-probs when truncation changed them and
            β > 0 (the KL term's π_θ), else None.
        logits: [n, T_mb, V] at temperature 1; columns beyond a row's response are padding.
    """

    logprobs: torch.Tensor
    kl_logprobs: torch.Tensor | None
    logits: torch.Tensor

    @property
    def t_mb(self) -> int:
        """T_mb, the longest response among the rows."""
        return int(self.logprobs.shape[1])


@dataclass(frozen=True)
class _Update:
    """One minibatch's optimizer step: the gradient norm before clipping of each trained
    model (``Trainer._trained`` order; 0 when not taken) and what happened: applied, skipped
    (a loss or norm not finite) or no_signal."""

    grad_norms: tuple[float, ...]
    outcome: Literal["applied", "skipped", "no_signal"]


@dataclass
class _Tally:
    """What the update loop accumulates for the metrics.

    Attributes:
        old_logprobs: [N, T] log π_old of the rows run in epoch 0 (0 elsewhere).
        ran: [N] bool, the rows whose passes ran.
        entropy_sum: () float64, entropy summed over the loss tokens of epoch 0's passes.
        parts: every micro-batch's loss statistics, to merge.
        updates: every optimizer step's ``_Update``.
    """

    old_logprobs: torch.Tensor
    ran: torch.Tensor
    entropy_sum: torch.Tensor
    parts: list[dict[str, float]] = field(default_factory=list)
    updates: list[_Update] = field(default_factory=list)

    @classmethod
    def start(cls, plan: StepPlan) -> _Tally:
        """An empty tally for ``plan``'s batch."""
        batch = plan.batch
        return cls(
            old_logprobs=torch.zeros_like(batch.behavior_logprobs),
            ran=torch.zeros_like(batch.row_valid),
            entropy_sum=torch.zeros((), dtype=torch.float64, device=batch.row_valid.device),
        )

    def add(self, micro: MicroResult, *, first_epoch: bool) -> None:
        """Count a micro-batch: its statistics always, its π_old and entropy in epoch 0."""
        self.parts.append(micro.stats)
        if first_epoch:
            self.old_logprobs[micro.rows, : micro.t_mb] = micro.old_logprobs.to(
                self.old_logprobs.dtype
            )
            self.entropy_sum += micro.entropy_sum
            self.ran[micro.rows] = True

    def count(self, outcome: str) -> int:
        """Optimizer steps with this ``_Update.outcome``."""
        return sum(u.outcome == outcome for u in self.updates)


class Trainer:
    """Holds π_θ, its optimizer and schedule, π_ref (β > 0), the critic (``gae``); ``step(groups)``
    trains one batch.

    Args:
        model: a causal LM (transformers ``PreTrainedModel``); moved to the config's device.
        algo: ``grpo.learner.config.LearnerAlgoConfig`` (estimator, std, clip band, reduction,
            KL estimator and weight β, process normalization, TIS cap, GAE settings).
        config: optimizer/batching/device settings.
        pad_token_id, eos_token_id: the tokenizer's ids (see ``pad_batch``).
        ref_model: π_ref, required when β > 0 (frozen, eval mode, no gradient); for a LoRA
            policy (``grpo.learner.lora``) leave it None: π_ref is the same model with its
            adapters disabled (no second copy).
        parallel: data-parallel context; None for a single process.
        value_model: the critic's ``ValueModel`` for ``estimator: gae``; default a copy of the
            policy's backbone with a zero-initialised value head.

    Raises:
        InvalidArgumentError: β > 0 without ``ref_model``; ``gae`` under FSDP (the critic is
            not sharded); ``value_model`` given for another estimator.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        algo: LearnerAlgoConfig,
        config: TrainerConfig,
        *,
        pad_token_id: int,
        eos_token_id: int,
        ref_model: torch.nn.Module | None = None,
        parallel: Any | None = None,
        value_model: torch.nn.Module | None = None,
    ) -> None:
        from grpo.errors import InvalidArgumentError

        self.algo = algo
        self.config = config
        self.device = resolve_device(config.device)
        self.pad_token_id = pad_token_id
        self.eos_token_id = eos_token_id
        self.parallel = parallel
        torch.manual_seed(config.seed)
        self.model = model.to(self.device)
        # Dropout off: π_θ (with grad) and π_old (no grad) must be the same function.
        self.model.eval()
        self.beta = float(algo.kl_coef)
        self.lora = is_lora(self.model)
        if self.lora and ref_model is not None:
            raise InvalidArgumentError(
                "a LoRA policy's reference is its base with the adapters disabled: pass no "
                "ref_model"
            )
        if self.beta > 0 and ref_model is None and not self.lora:
            raise InvalidArgumentError("kl_coef > 0 needs a reference model (ref_model=...)")
        self.ref_model: torch.nn.Module | None = None
        if self.beta > 0 and self.lora:
            self.ref_model = adapters_disabled(self.model)  # shares (and never freezes) θ
        elif ref_model is not None:
            self.ref_model = ref_model.to(self.device).eval()
            self.ref_model.requires_grad_(False)
        # LoRA dropout (gradient passes only) makes π_θ's pass differ from π_old's: π_old
        # then always comes from a no-grad pass of its own.
        self._stochastic = lora_dropout(self.model) > 0
        params = [p for p in self.model.parameters() if p.requires_grad]
        # The fused kernel is the same AdamW update in one pass over all parameters: 1.6
        # against 5.4 ms per optimizer step on the main job's CPU model (one thread). Sharded
        # (FSDP) parameters keep the per-tensor loop.
        self.optimizer = torch.optim.AdamW(
            params,
            lr=config.lr,
            betas=(config.adam_beta1, config.adam_beta2),
            eps=config.adam_eps,
            weight_decay=config.weight_decay,
            fused=self.device.type in ("cpu", "cuda") and not self._distributed,
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: _lr_multiplier(config, s)
        )
        self.critic = build_critic(
            algo,
            config,
            self.model,
            value_model=value_model,
            sharded=bool(getattr(parallel, "fsdp", False)),
            lr_lambda=lambda s: _lr_multiplier(config, s),
            device=self.device,
        )
        self.step_count = 0
        self.skipped_steps_total = 0

    @property
    def _distributed(self) -> bool:
        # Collectives only with an explicit data-parallel context, whatever the global state.
        return self.parallel is not None and self.parallel.world_size > 1

    @property
    def _trained(self) -> list[tuple[torch.nn.Module, torch.optim.Optimizer, Any]]:
        """(model, optimizer, LR schedule) of each model an optimizer step updates: π_θ, then
        the critic with ``gae``."""
        trained: list[tuple[torch.nn.Module, torch.optim.Optimizer, Any]] = [
            (self.model, self.optimizer, self.scheduler)
        ]
        if self.critic is not None:
            trained.append((self.critic.model, self.critic.optimizer, self.critic.scheduler))
        return trained

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        """bf16 autocast around a forward when ``autocast: bfloat16`` (parameters, gradients
        and AdamW state keep their dtype: float32 master weights), else nothing."""
        if self.config.autocast == "off":
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)

    @property
    def precision(self) -> dict[str, str]:
        """What a checkpoint records of the numerics: the parameters' dtype (the optimizer
        state's too), the forwards' autocast and whether π_θ is a LoRA adapter."""
        dtype = next(self.model.parameters()).dtype
        return {
            "params": str(dtype).removeprefix("torch."),
            "autocast": self.config.autocast,
            "lora": "on" if self.lora else "off",
        }

    # ------------------------------------------------------------------ the step
    def step(self, groups: Sequence[GroupRows]) -> dict[str, float]:
        """Train on one batch of closed groups; returns the step's metrics.

        Args:
            groups: this rank's whole groups (B / world_size of them under data parallel), as
                rows (``grpo.services.learner.batch.group_rows`` reads them from protos).

        Returns:
            Flat dict of floats: ``batch_diagnostics`` names plus ``loss/*`` (merged over
            micro-batches, minibatches and ranks), ``entropy/mean`` (nats/token),
            ``behavior/abs_logprob_diff_mean``/``_max`` (|log π_old − log μ|),
            ``optim/grad_norm`` (before clipping), ``optim/lr``, ``optim/skipped_steps``
            (optimizer steps skipped for a non-finite loss or gradient) and
            ``optim/skipped_steps_total``, ``optim/no_signal_steps`` (minibatches without a
            nonzero advantage, not stepped), ``optim/zero_advantage_rows_skipped`` (rows
            whose passes were skipped, see ``_rows_with_signal``), ``time/*_s`` (seconds);
            with ``gae`` also
            ``critic/value_loss``, ``critic/value_clip_frac``, ``critic/value_mean``,
            ``critic/return_mean`` (token means), ``critic/explained_variance`` (of the
            values at batch start), ``critic/grad_norm``, ``critic/lr``.

        Raises:
            InvalidArgumentError / ContractError: malformed groups (see ``pad_batch``).
            ValueError: a configuration the loss rejects (see ``policy_loss``).

        Prepare (``_prepare``: the frozen ``StepPlan``), then the update loop below, then the
        metrics (``_metrics``); the module docstring describes each phase.
        """
        t_start = time.perf_counter()
        plan = self._prepare(groups)
        t_old = time.perf_counter()
        tally = _Tally.start(plan)
        for epoch in range(self.config.ppo_epochs):
            for index, minibatch in enumerate(plan.minibatches):
                # no optimizer step yet: π_θ = π_old (unless LoRA dropout makes them differ)
                first_pass = epoch == 0 and index == 0 and not self._stochastic
                old = None if first_pass else plan.old_logprobs
                # Global denominators of this optimizer step: all micro-batches and ranks.
                denom = loss_denominators(plan.mask[minibatch], distributed=self._distributed)
                self._zero_grad()
                finite = True
                todo = minibatch[plan.live[minibatch]]
                with self._matched_passes(plan.batch, todo, backward=True):
                    for rows in self._micro_slices(plan.batch, todo):
                        micro = self._micro_step(plan, rows, denom, old=old)
                        if first_pass and plan.old_logprobs is not None:  # for later passes
                            plan.old_logprobs[rows, : micro.t_mb] = micro.old_logprobs.to(
                                plan.old_logprobs.dtype
                            )
                        finite &= micro.finite
                        tally.add(micro, first_epoch=epoch == 0)
                tally.updates.append(self._update(plan, minibatch, finite))
        if not tally.parts:  # no row with a signal in the whole batch: stats of one pass, no step
            tally.add(self._stats_pass(plan), first_epoch=True)
        self.step_count += 1
        self.skipped_steps_total += tally.count("skipped")
        return self._metrics(plan, tally, t_start, t_old)

    # ------------------------------------------------------------------ prepare
    def _prepare(self, groups: Sequence[GroupRows]) -> StepPlan:
        """The prepare phase: the padded batch, its advantages (the critic's targets with
        ``gae``), the minibatches, the rows with a signal, and π_old and π_ref without
        gradient (module docstring, 1.)."""
        cfg = self.config
        batch = pad_batch(
            groups,
            pad_token_id=self.pad_token_id,
            eos_token_id=self.eos_token_id,
            mask_truncated=self.algo.mask_truncated,
        ).to(self.device)
        mask = batch.response_mask & batch.row_valid[:, None]  # (N, T) tokens in the loss
        rows_all = torch.arange(batch.num_rows, device=self.device)
        critic = None
        if self.critic is not None:
            micro_batches = self._micro_slices(batch, rows_all)
            critic = self.critic.targets(batch, mask, micro_batches, distributed=self._distributed)
            adv, outcome_adv = critic.advantages, critic.member_advantages
        else:
            adv, outcome_adv = self.advantages(batch)
        minibatches = rows_all.tensor_split(cfg.minibatches)
        live = self._rows_with_signal(adv, mask)  # (N,) rows whose passes can move π_θ
        # π_old of the first minibatch's rows comes from its epoch-0 gradient pass; the no-grad
        # forward covers the rest. One pass in all: no π_old tensor.
        separate = minibatches if self._stochastic else minibatches[1:]
        old = (
            None
            if cfg.ppo_epochs == 1 and cfg.minibatches == 1 and not self._stochastic
            else self._logprobs_no_grad(
                self.model,
                batch,
                truncate=True,
                rows=torch.cat([m[live[m]] for m in separate] or [rows_all[:0]]),
            )
        )
        ref = (
            self._logprobs_no_grad(self.ref_model, batch, truncate=False)
            if self.ref_model is not None
            else None
        )
        return StepPlan(batch, mask, adv, outcome_adv, tuple(minibatches), live, old, ref, critic)

    def advantages(self, batch: TrainingBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """Token advantages [N, T] and the outcome advantages per group member [P, G].

        A_{i,t} = outcome_weight · A_i + process_weight · A^process_{i,t} (the algo config's
        weights; the process term only when the batch carries step rewards). With
        ``process_groups: mixed`` the process term is 0 in every group whose outcome
        advantages are all 0 (its valid rewards tied, e.g. all wrong or all right, or fewer
        than 2 of them), so with β = 0 such a group adds nothing to the update.

        Raises:
            ValueError: the estimator is ``gae`` (its advantages need the critic:
                ``grpo.learner.critic.Critic.targets``).
        """
        from grpo.learner.advantages import group_advantages
        from grpo.learner.process import combine_advantages, process_token_advantages

        algo = self.algo
        outcome = group_advantages(
            batch.rewards, valid=batch.reward_valid, **algo.advantage_kwargs()
        )
        n, t = batch.response_ids.shape
        row_adv = outcome[batch.row_prompt, batch.row_slot]  # (N,)
        if not (algo.process_weight > 0 and batch.has_process_rewards):
            return (algo.outcome_weight * row_adv)[:, None].expand(n, t).clone(), outcome
        proc = process_token_advantages(
            batch.step_rewards,
            batch.step_ends,
            batch.generated_lengths.tolist(),
            group_index=batch.row_prompt.tolist(),
            num_tokens=t,
            normalization=algo.process_normalization,
            std=algo.std,
            eps=algo.eps,
        ).to(row_adv)
        if algo.process_groups == "mixed":
            contrast = (outcome != 0).any(dim=1)  # (P,) groups with an outcome signal
            proc = torch.where(contrast[batch.row_prompt][:, None], proc, 0.0)
        adv = combine_advantages(
            row_adv, proc, outcome_weight=algo.outcome_weight, process_weight=algo.process_weight
        )
        return adv, outcome

    def _rows_with_signal(self, adv: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """[N] bool: rows whose forward and backward passes are run.

        With no KL term (β = 0) and no critic, the policy loss of a token with advantage exactly
        0 is exactly 0 for every loss type (each is A_t times a weight) and so is its gradient:
        a row whose loss tokens all have advantage 0 (a group all wrong or all right, kept with
        dynamic sampling off) adds nothing to any optimizer step but its tokens and response
        in the global denominators, which stay counted. Its passes (π_old and gradient) are
        skipped, so training on every group costs the passes of the informative ones only
        (``optim/zero_advantage_rows_skipped`` rows this step); parameters move exactly as if
        they were run. Entropy and the behavior mismatch are reported over the rows run.
        Under data parallel (every rank must run matching passes and stats) and with β > 0 or
        a critic every row is run.
        """
        if self.beta > 0 or self.critic is not None or self._distributed:
            return torch.ones(adv.shape[0], dtype=torch.bool, device=adv.device)
        return ((adv != 0) & mask).any(dim=1)

    # ------------------------------------------------------------------ forward passes
    def _micro_slices(self, batch: TrainingBatch, rows: torch.Tensor) -> Iterator[torch.Tensor]:
        """``rows`` in micro-batches of at most ``micro_batch_size``, cut from the rows sorted
        by response length when there is more than one, so each micro-batch pads to a shorter
        T_mb (fewer padded columns in its forward and backward). The update is the same:
        micro-batches accumulate into one optimizer step over global denominators."""
        size = self.config.micro_batch_size
        if rows.numel() > size:
            rows = rows[torch.argsort(batch.generated_lengths[rows], stable=True)]
        for start in range(0, rows.numel(), size):
            yield rows[start : start + size]

    def _matched_passes(
        self, batch: TrainingBatch, rows: torch.Tensor, *, backward: bool
    ) -> contextlib.AbstractContextManager[None]:
        """Around the policy's passes over ``rows``: under FSDP, the padding passes (on row 0)
        that match the busiest rank's (``grpo.learner.distributed.fsdp_matched_passes``)."""
        return fsdp_matched_passes(
            self.parallel,
            rows.numel(),
            self.config.micro_batch_size,
            self.device,
            lambda: (
                self._forward_logprobs(self.model, batch, batch.response_ids.new_zeros(1)).logprobs
            ),
            backward=backward,
        )

    def _forward_logprobs(
        self,
        model: torch.nn.Module,
        batch: TrainingBatch,
        rows: torch.Tensor,
        *,
        truncate: bool = True,
    ) -> _Forward:
        """Log-probs and logits of the response tokens of ``rows`` under ``model`` (columns
        and T_mb from ``TrainingBatch.columns``; the sampler's truncation when ``truncate``)."""
        from grpo.learner.logprobs import token_logprobs

        cols, t_mb = batch.columns(rows)
        with self._autocast():
            out = model(
                input_ids=batch.input_ids[rows, cols],
                attention_mask=batch.attention_mask[rows, cols],
                position_ids=batch.position_ids[rows, cols],
                use_cache=False,
                logits_to_keep=t_mb + 1,
            )
        logits = out.logits[:, :-1]  # (n, T_mb, V): position P_mb-1+t predicts token t
        if logits.dtype in (torch.float16, torch.bfloat16):
            logits = logits.float()
        ids = batch.response_ids[rows, :t_mb]
        temp = self.config.temperature
        top_k, top_p = batch.sampling_top_k[rows], batch.sampling_top_p[rows]
        vocab = logits.shape[-1]
        truncated = bool((((top_k > 0) & (top_k < vocab)) | (top_p < 1)).any())
        if not (truncate and truncated):
            return _Forward(token_logprobs(logits, ids, temp), None, logits)
        lp = token_logprobs(logits, ids, temp, top_k=top_k, top_p=top_p)
        full = token_logprobs(logits, ids, temp) if self.beta > 0 else None
        return _Forward(lp, full, logits)

    @torch.no_grad()
    def _logprobs_no_grad(
        self,
        model: torch.nn.Module,
        batch: TrainingBatch,
        *,
        truncate: bool,
        rows: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """[N, T] log-probs of the response tokens of ``rows`` (default: every row) under
        ``model``; 0 beyond each response and in the other rows. Float64 for a float64 model,
        else float32 (the logits' dtype after ``_forward_logprobs``)."""
        if rows is None:
            rows = torch.arange(batch.num_rows, device=self.device)
        dtype = torch.float64 if next(model.parameters()).dtype == torch.float64 else torch.float32
        out = torch.zeros(batch.response_ids.shape, dtype=dtype, device=self.device)
        policy = model is self.model  # π_ref is not sharded: no passes to match
        with (
            self._matched_passes(batch, rows, backward=False)
            if policy
            else contextlib.nullcontext()
        ):
            for micro in self._micro_slices(batch, rows):
                fwd = self._forward_logprobs(model, batch, micro, truncate=truncate)
                out[micro, : fwd.t_mb] = fwd.logprobs.to(dtype)
        return out

    # ------------------------------------------------------------------ update loop
    def _micro_step(
        self,
        plan: StepPlan,
        rows: torch.Tensor,
        denom: LossDenominators,
        *,
        old: torch.Tensor | None,
    ) -> MicroResult:
        """Forward and backward of one micro-batch: the policy loss, and with ``gae`` the
        critic's value loss.

        Args:
            plan: the step's plan.
            rows: [n] the micro-batch's row indices.
            denom: the global denominators of its optimizer step.
            old: [N, T] log π_old, or None when the rows' own detached log-probs are π_old
                (the first minibatch in epoch 0, before any optimizer step).
        """
        from grpo.learner.losses import policy_loss

        with dropout_in_gradient_passes(self.model):
            fwd = self._forward_logprobs(self.model, plan.batch, rows)
        t_mb = fwd.t_mb
        old_mb = fwd.logprobs.detach() if old is None else old[rows, :t_mb]
        mask = plan.mask[rows, :t_mb]
        ref = plan.ref_logprobs
        loss, stats = policy_loss(
            fwd.logprobs,
            old_mb,
            plan.advantages[rows, :t_mb],
            mask,
            num_tokens=denom.num_tokens,
            num_responses=denom.num_responses,
            behavior_logprobs=plan.batch.behavior_logprobs[rows, :t_mb],
            ref_logprobs=None if ref is None else ref[rows, :t_mb],
            kl_logprobs=fwd.kl_logprobs,
            **self._loss_options(),
        )
        scale = self.parallel.loss_scale if self.parallel is not None else 1.0
        (loss * scale).backward()
        finite = bool(torch.isfinite(loss.detach()))
        if plan.critic is not None and self.critic is not None:
            critic_stats, critic_finite = self.critic.backward(
                plan.batch, rows, plan.mask, plan.critic, denom
            )
            stats.update(critic_stats)
            finite &= critic_finite
        with torch.no_grad():
            ent = entropy_from_logits(fwd.logits.detach(), self.config.temperature)
            ent_sum = torch.where(mask, ent.double(), 0.0).sum()
        return MicroResult(rows, stats, ent_sum, old_mb, finite)

    def _stats_pass(self, plan: StepPlan) -> MicroResult:
        """With no row to train on in the whole batch: one pass of the first micro-batch, its
        gradients dropped, so the step still reports its loss statistics, entropy and π_old."""
        self._zero_grad()
        first = plan.minibatches[0]
        rows = next(self._micro_slices(plan.batch, first))
        micro = self._micro_step(
            plan, rows, loss_denominators(plan.mask[first], distributed=False), old=None
        )
        self._zero_grad()
        return micro

    def _update(self, plan: StepPlan, minibatch: torch.Tensor, finite_loss: bool) -> _Update:
        """The minibatch's optimizer step, taken when it has a gradient to follow."""
        if not self._has_signal(plan.advantages, plan.mask, minibatch):
            self._zero_grad()
            return _Update((0.0,) * len(self._trained), "no_signal")
        return self._optimizer_step(finite_loss)

    def _has_signal(self, adv: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor) -> bool:
        """Whether the minibatch ``rows`` has any gradient to follow (on any rank).

        With no KL term (β = 0) and no critic, a minibatch whose loss tokens all have advantage
        exactly 0 (groups that were all wrong or all right, kept with dynamic sampling off)
        has an exactly zero gradient; AdamW would still move every parameter by its momentum
        (m / sqrt(v)) and advance the LR schedule, so such an optimizer step is not taken:
        parameters, moments and schedule keep their values (``optim/no_signal_steps``).
        """
        if self.beta > 0 or self.critic is not None:
            return True
        has = bool(((adv[rows] != 0) & mask[rows]).any())
        if self._distributed and self.parallel is not None:
            flag = torch.tensor([1.0 if has else 0.0], dtype=torch.float64, device=self.device)
            has = float(self.parallel.all_reduce(flag, "max")[0]) > 0
        return has

    def _zero_grad(self) -> None:
        for _, optimizer, _ in self._trained:
            optimizer.zero_grad(set_to_none=True)

    def _optimizer_step(self, finite_loss: bool) -> _Update:
        """Reduce, clip and apply the accumulated gradients unless something is not finite.

        A non-finite loss (on any rank) or gradient norm skips the step of every trained model
        (outcome ``skipped``): gradients are dropped, parameters, optimizer states and
        schedules keep their values, and a warning is logged.
        """
        self._all_reduce_grads()
        norms = tuple(self._clip_grads(model) for model, _, _ in self._trained)
        bad = not (finite_loss and all(math.isfinite(n) for n in norms))
        if self._distributed and self.parallel is not None:
            flag = torch.tensor([1.0 if bad else 0.0], dtype=torch.float64, device=self.device)
            bad = float(self.parallel.all_reduce(flag, "max")[0]) > 0
        if bad:
            self._zero_grad()
            log.warning(
                "non-finite loss or gradient: optimizer step skipped",
                extra={
                    "step": self.step_count,
                    "grad_norm": norms[0],
                    "critic_grad_norm": norms[1] if len(norms) > 1 else 0.0,
                    "finite_loss": finite_loss,
                    "skipped_steps_total": self.skipped_steps_total + 1,
                },
            )
            return _Update(norms, "skipped")
        for _, optimizer, scheduler in self._trained:
            optimizer.step()
            scheduler.step()
        return _Update(norms, "applied")

    def _loss_options(self) -> dict[str, Any]:
        """Keyword options of ``policy_loss`` from the algorithm config."""
        opts: dict[str, Any] = self.algo.loss_kwargs(self.config.max_response_length or None)
        opts["kl_coef"] = self.beta
        return opts

    def _all_reduce_grads(self) -> None:
        """Sum gradients over ranks (each rank's loss is its share of the global loss)."""
        if not self._distributed or self.parallel is None:
            return
        for model, _, _ in self._trained:
            self.parallel.all_reduce_grads(model)

    def _clip_grads(self, model: torch.nn.Module) -> float:
        """Global gradient L2 norm before clipping (clipped to ``max_grad_norm`` when > 0)."""
        params = [p for p in model.parameters() if p.grad is not None]
        if not params:
            return 0.0
        max_norm = self.config.max_grad_norm if self.config.max_grad_norm > 0 else float("inf")
        return float(torch.nn.utils.clip_grad_norm_(params, max_norm))

    # ------------------------------------------------------------------ metrics
    def _metrics(
        self, plan: StepPlan, tally: _Tally, t_start: float, t_old: float
    ) -> dict[str, float]:
        """The step's metrics: the diagnostics (``_diagnostics``), the optimizer's and the
        times (seconds since ``t_start``; ``t_old``: the end of the prepare phase)."""
        t_end = time.perf_counter()
        metrics = self._diagnostics(plan, tally)
        metrics["optim/zero_advantage_rows_skipped"] = float(
            (~tally.ran & plan.batch.row_valid).sum()
        )
        last = tally.updates[-1].grad_norms  # π_θ's, then the critic's
        finite_norms = [u.grad_norms[0] for u in tally.updates if math.isfinite(u.grad_norms[0])]
        metrics[mn.OPTIM_GRAD_NORM] = last[0]
        metrics[mn.OPTIM_GRAD_NORM_MAX] = max(finite_norms or [last[0]])
        metrics[mn.OPTIM_LR] = float(self.scheduler.get_last_lr()[0])
        metrics[mn.OPTIM_SKIPPED_STEPS] = float(tally.count("skipped"))
        metrics["optim/skipped_steps_total"] = float(self.skipped_steps_total)
        metrics[mn.OPTIM_NO_SIGNAL_STEPS] = float(tally.count("no_signal"))
        if plan.critic is not None and self.critic is not None:
            metrics.update(self.critic.metrics(plan.critic, grad_norm=last[1]))
        metrics["time/old_logprobs_s"] = t_old - t_start
        metrics["time/step_s"] = t_end - t_start
        return metrics

    def _diagnostics(self, plan: StepPlan, tally: _Tally) -> dict[str, float]:
        """Every diagnostic of DESIGN.md via ``batch_diagnostics``, plus the behavior mismatch.

        Loss statistics, entropy and the mismatch are world-level under data parallel and cover
        the rows whose passes ran (``tally.ran``, see ``_rows_with_signal``); group,
        advantage and length diagnostics describe all of this rank's groups.
        """
        from grpo.learner.diagnostics import batch_diagnostics
        from grpo.learner.losses import merge_loss_stats

        batch, mask = plan.batch, plan.mask
        loss_stats = merge_loss_stats(tally.parts)
        seen = mask & tally.ran[:, None]  # (N, T) loss tokens whose π_old and entropy were computed
        diff = (tally.old_logprobs - batch.behavior_logprobs).abs()  # (N, T) |log π_old − log μ|
        mism_sum = torch.where(seen, diff.double(), 0.0).sum()
        mism_max = torch.where(seen, diff, 0.0).max() if seen.any() else diff.new_zeros(())
        sums = torch.stack([seen.sum().double(), tally.entropy_sum.double(), mism_sum])
        mx = mism_max.double().reshape(1)
        if self.parallel is not None and self.parallel.world_size > 1:
            sums = self.parallel.all_reduce(sums, "sum")
            mx = self.parallel.all_reduce(mx, "max")
            keys = list(dict.fromkeys(k for part in tally.parts for k in part))
            loss_stats = self.parallel.merge_stats(loss_stats, keys)
        tokens = float(sums[0])  # loss tokens seen (0: the means below are not written)
        rows_meta = [batch.group_metadata[int(p)] for p in batch.row_prompt.tolist()]
        slices = {"task": [batch.task_types[int(p)] for p in batch.row_prompt.tolist()]}
        if any("difficulty" in m for m in rows_meta):
            slices["difficulty"] = [m.get("difficulty", "unknown") for m in rows_meta]
        a = self.algo
        metrics = batch_diagnostics(
            batch.rewards,
            plan.outcome_advantages,
            mask,
            valid=batch.reward_valid,
            correct_rewards=batch.correct_rewards,
            row_prompt=batch.row_prompt,
            row_slot=batch.row_slot,
            token_advantages=plan.advantages,
            lengths=batch.generated_lengths,
            truncated=batch.truncated,
            std=a.std,
            eps=a.eps,
            estimator=a.estimator,
            reduction=a.reduction,
            max_response_length=self.config.max_response_length or int(mask.shape[1]),
            slices=slices,
            loss_stats=loss_stats,
            entropy_mean=float(sums[1]) / tokens if tokens else None,
            timings={
                "straggler_wait_mean_s": float(batch.straggler_wait_s.mean()),
                "straggler_wait_max_s": float(batch.straggler_wait_s.max()),
            },
        )
        if tokens:  # |log π_old − log μ| over no token is not written
            metrics[mn.BEHAVIOR_ABS_LOGPROB_DIFF_MEAN] = float(sums[2]) / tokens
            metrics["behavior/abs_logprob_diff_max"] = float(mx[0])
        metrics["behavior/policy_version_min"] = float(batch.policy_versions.min())
        return metrics
