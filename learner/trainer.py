"""The GRPO trainer: one ``step(groups)`` = batch -> π_old -> advantages -> clipped updates.

A plain class with no Redis or gRPC. It owns the policy model π_θ, its AdamW optimizer with a
linear warmup and a constant/linear/cosine schedule (``grpo.learner.schedule``: ``lr`` is the
peak, the decay starts after warmup), the reference model π_ref when the KL weight β > 0, and
with ``estimator: gae`` a learned critic (``grpo.learner.critic``). One call of ``step`` on B
closed groups:

1. builds the padded batch (``grpo.learner.batch``);
2. computes π_old log-probs at batch start without gradient, at the sampler's temperature and
   under the top-k/top-p truncation each rollout records (``token_logprobs(logits, ids,
   temperature, top_k=, top_p=)``; π_θ likewise, so the ratio and the TIS weight compare like
   with like), and π_ref's (full vocabulary, as the KL term's π_θ) when β > 0. The parameters
   do not move before the first minibatch's optimizer step, so the first epoch's gradient pass
   over the first minibatch computes π_θ = π_old of its rows: their π_old is that pass's
   detached log-probs, and the no-grad forward covers only the other minibatches' rows (none
   with one epoch and one minibatch). Same definition, one forward less per step for those
   rows (a quarter to a half of π_old's cost at 2 minibatches);
3. advantages: outcome (``group_advantages`` over rewards [P, G], missing rewards masked) and
   process credit (``process_token_advantages`` on step rewards placed at their step-end
   tokens), combined as ``outcome_weight * A_outcome + process_weight * A_process``; with
   ``gae``, token rewards and the critic's values at batch start give GAE advantages and
   returns (``grpo.learner.value``), and the critic is trained on the same minibatches with
   the clipped value loss, the same mask, reduction and global denominators;
4. ``ppo_epochs`` passes over ``minibatches`` minibatches of rows; each minibatch is one
   optimizer step, accumulated over micro-batches of ``micro_batch_size`` rows. Denominators
   (tokens, responses) are global over the whole minibatch and all ranks, so the gradient does
   not depend on the split (DESIGN.md "Reductions");
5. behavior correction: with ``tis_cap`` set, each token's loss is weighted by the truncated
   importance weight min(π_old/μ, cap) (truncated IS, Yao et al. 2025 "Your efficient RL
   framework secretly brings you off-policy RL training"); the mismatch
   mean/max |log π_old − log μ| is always reported;
6. numerics: an optimizer step whose loss or gradient norm (policy or critic) is not finite is
   skipped — gradients dropped, parameters, optimizer state and LR schedule untouched — with a
   warning and the count in ``optim/skipped_steps`` (``optim/skipped_steps_total`` since the
   trainer was built), so NaN never reaches the parameters or a checkpoint. A minibatch with
   nothing to follow (every loss token's advantage exactly 0, β = 0, no critic: groups all wrong
   or all right, kept with dynamic sampling off) takes no optimizer step either — AdamW would
   still move every parameter by its momentum — and is counted in ``optim/no_signal_steps``.
   In the same case the rows whose advantages are all 0 are not passed through the model at
   all (their loss and gradient are exactly 0; their tokens stay in the denominators), so
   training on every group costs the passes of the informative rows only.

Data parallel: pass a ``grpo.learner.distributed.DataParallel``; every rank calls ``step`` with
its own whole groups; denominators, gradients and summed statistics are all-reduced.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from grpo.devices import resolve_device
from grpo.learner import metric_names as mn
from grpo.learner.batch import GroupRows, TrainingBatch, pad_batch
from grpo.learner.config import LearnerAlgoConfig, TrainerConfig
from grpo.learner.logprobs import entropy_from_logits
from grpo.learner.schedule import lr_multiplier

__all__ = ["Trainer", "TrainerConfig"]

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


class Trainer:
    """Holds π_θ, its optimizer and schedule, π_ref (β > 0), the critic (``gae``); ``step(groups)``
    trains one batch.

    Args:
        model: a causal LM (transformers ``PreTrainedModel``); moved to the config's device.
        algo: ``grpo.learner.config.LearnerAlgoConfig`` (estimator, std, clip band, reduction,
            KL estimator and weight β, process normalization, TIS cap, GAE settings).
        config: optimizer/batching/device settings.
        pad_token_id, eos_token_id: the tokenizer's ids (see ``pad_batch``).
        ref_model: π_ref, required when β > 0 (frozen, eval mode, no gradient).
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
        if self.beta > 0 and ref_model is None:
            raise InvalidArgumentError("kl_coef > 0 needs a reference model (ref_model=...)")
        self.ref_model = ref_model.to(self.device).eval() if ref_model is not None else None
        if self.ref_model is not None:
            self.ref_model.requires_grad_(False)
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
        self.critic = self._build_critic(value_model)
        self.step_count = 0
        self.skipped_steps_total = 0

    def _build_critic(self, value_model: torch.nn.Module | None) -> Any:
        from grpo.errors import InvalidArgumentError
        from grpo.learner.critic import Critic, ValueModel

        if self.algo.estimator != "gae":
            if value_model is not None:
                raise InvalidArgumentError(
                    f"value_model is only used by estimator 'gae', not {self.algo.estimator!r}"
                )
            return None
        if self.parallel is not None and getattr(self.parallel, "fsdp", False):
            raise InvalidArgumentError(
                "estimator 'gae' with fsdp is not supported: the critic is not sharded"
            )
        cfg = self.config
        return Critic(
            value_model if value_model is not None else ValueModel.from_policy(self.model),
            lr=cfg.critic_lr if cfg.critic_lr is not None else cfg.lr,
            lr_lambda=lambda s: _lr_multiplier(cfg, s),
            betas=(cfg.adam_beta1, cfg.adam_beta2),
            eps=cfg.adam_eps,
            weight_decay=cfg.weight_decay,
            device=self.device,
        )

    # ------------------------------------------------------------------ forward passes
    def _micro_slices(self, batch: TrainingBatch, rows: torch.Tensor) -> Iterator[torch.Tensor]:
        """``rows`` in micro-batches of at most ``micro_batch_size``, cut from the rows sorted
        by response length when there is more than one, so each micro-batch pads to a shorter
        T_mb (fewer padded columns in its forward and backward). The update is the same:
        micro-batches accumulate into one optimizer step over global denominators."""
        size = self.config.micro_batch_size
        if rows.numel() > size:
            lengths = batch.attention_mask[rows, batch.prompt_len :].sum(dim=1)
            rows = rows[torch.argsort(lengths, stable=True)]
        for start in range(0, rows.numel(), size):
            yield rows[start : start + size]

    def _fsdp_padding_passes(self, rows: torch.Tensor) -> int:
        """How many extra forward (and backward) passes this rank runs after its micro-batches
        of ``rows``: under FSDP every pass of the sharded model is a collective (all-gather,
        reduce-scatter), so every rank runs as many as the rank with the most micro-batches
        (its whole groups may hold more rows). 0 without FSDP. A collective itself: call it
        before the passes."""
        if not (self.parallel is not None and getattr(self.parallel, "fsdp", False)):
            return 0
        size = self.config.micro_batch_size
        mine = (rows.numel() + size - 1) // size
        most = torch.tensor([float(mine)], dtype=torch.float64, device=self.device)
        return int(self.parallel.all_reduce(most, "max")[0]) - mine

    def _padding_pass(self, batch: TrainingBatch, *, backward: bool) -> None:
        """A pass of the sharded model on row 0 that changes nothing: no output is kept, and
        its backward (of 0 × the log-probs) adds exact zeros to the gradients."""
        with torch.set_grad_enabled(backward):
            lp, _, _, _ = self._forward_logprobs(self.model, batch, batch.response_ids.new_zeros(1))
            if backward:
                (lp.sum() * 0.0).backward()

    @staticmethod
    def _columns(batch: TrainingBatch, rows: torch.Tensor) -> tuple[slice, int]:
        """Columns of ``rows``' longest prompt and response, and T_mb (longest response)."""
        p = batch.prompt_len
        att = batch.attention_mask[rows]
        p_mb = int(att[:, :p].sum(dim=1).max())
        t_mb = max(1, int(att[:, p:].sum(dim=1).max()))
        return slice(p - p_mb, p + t_mb), t_mb

    def _forward_logprobs(
        self,
        model: torch.nn.Module,
        batch: TrainingBatch,
        rows: torch.Tensor,
        *,
        truncate: bool = True,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor, int]:
        """Log-probs and logits of the response tokens of ``rows``.

        Returns:
            (logprobs [n, T_mb] — under each row's recorded top-k/top-p when ``truncate`` —,
            full-vocabulary logprobs [n, T_mb] when truncation changed them and β > 0 (the KL
            term's π_θ) else None, logits [n, T_mb, V] at temperature 1, T_mb) where T_mb is
            the longest response among ``rows``; columns beyond a row's response are padding.
        """
        from grpo.learner.logprobs import token_logprobs

        cols, t_mb = self._columns(batch, rows)
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
            return token_logprobs(logits, ids, temp), None, logits, t_mb
        lp = token_logprobs(logits, ids, temp, top_k=top_k, top_p=top_p)
        full = token_logprobs(logits, ids, temp) if self.beta > 0 else None
        return lp, full, logits, t_mb

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
        padding = self._fsdp_padding_passes(rows) if model is self.model else 0
        for micro in self._micro_slices(batch, rows):
            lp, _, _, t_mb = self._forward_logprobs(model, batch, micro, truncate=truncate)
            out[micro, :t_mb] = lp.to(dtype)
        for _ in range(padding):
            self._padding_pass(batch, backward=False)
        return out

    def _values(self, batch: TrainingBatch, rows: torch.Tensor) -> tuple[torch.Tensor, int]:
        """Critic values [n, T_mb] of ``rows`` (with gradient when enabled) and T_mb."""
        cols, t_mb = self._columns(batch, rows)
        values = self.critic.model(
            batch.input_ids[rows, cols],
            batch.attention_mask[rows, cols],
            batch.position_ids[rows, cols],
            t_mb,
        )
        return values, t_mb

    @torch.no_grad()
    def _values_no_grad(self, batch: TrainingBatch) -> torch.Tensor:
        """[N, T] critic values at batch start (0 beyond each response)."""
        out = torch.zeros(batch.response_ids.shape, device=self.device)
        rows_all = torch.arange(batch.num_rows, device=self.device)
        for rows in self._micro_slices(batch, rows_all):
            values, t_mb = self._values(batch, rows)
            out = out.to(values.dtype)
            out[rows, :t_mb] = values
        return out

    # ------------------------------------------------------------------ advantages
    def advantages(self, batch: TrainingBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """Token advantages [N, T] and the outcome advantages per group member [P, G].

        A_{i,t} = outcome_weight · A_i + process_weight · A^process_{i,t} (the algo config's
        weights; the process term only when the batch carries step rewards). With
        ``process_groups: mixed`` the process term is 0 in every group whose outcome
        advantages are all 0 (its valid rewards tied, e.g. all wrong or all right, or fewer
        than 2 of them), so with β = 0 such a group adds nothing to the update.

        Raises:
            ValueError: the estimator is ``gae`` (its advantages need the critic: ``step``).
        """
        from grpo.learner.advantages import group_advantages
        from grpo.learner.process import combine_advantages, process_token_advantages

        algo = self.algo
        outcome = group_advantages(
            batch.rewards, valid=batch.reward_valid, **algo.advantage_kwargs()
        )
        n, t = batch.response_ids.shape
        row_adv = outcome[batch.row_prompt, batch.row_slot]  # (N,)
        if algo.process_weight > 0 and batch.has_process_rewards:
            lengths = batch.attention_mask[:, batch.prompt_len :].sum(dim=1)
            proc = process_token_advantages(
                batch.step_rewards,
                batch.step_ends,
                lengths.tolist(),
                group_index=batch.row_prompt.tolist(),
                num_tokens=t,
                normalization=algo.process_normalization,
                std=algo.std,
                eps=algo.eps,
            )
            proc = proc.to(row_adv)
            if algo.process_groups == "mixed":
                contrast = (outcome != 0).any(dim=1)  # (P,) groups with an outcome signal
                proc = torch.where(contrast[batch.row_prompt][:, None], proc, 0.0)
            adv = combine_advantages(
                row_adv,
                proc,
                outcome_weight=algo.outcome_weight,
                process_weight=algo.process_weight,
            )
        else:
            adv = (algo.outcome_weight * row_adv)[:, None].expand(n, t).clone()
        return adv, outcome

    def gae_advantages(
        self, batch: TrainingBatch, mask: torch.Tensor, values: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """GAE token advantages [N, T], returns [N, T] and per-member advantages [P, G].

        Token rewards: outcome on the last loss token, process steps (``process_weight``) on
        their end tokens (``grpo.learner.value.token_rewards``). The per-member advantage
        (for the group diagnostics) is each response's advantage at its first loss token
        (R − V(prompt) with γ = λ = 1 and no whitening), 0 for members without loss tokens.
        """
        from grpo.learner.value import gae_advantages, masked_whiten, token_rewards

        algo = self.algo
        outcome = batch.rewards[batch.row_prompt, batch.row_slot]  # (N,) NaN where missing
        rewards = token_rewards(
            outcome,
            mask,
            step_ends=batch.step_ends if batch.has_process_rewards else None,
            step_rewards=batch.step_rewards if batch.has_process_rewards else None,
            outcome_weight=algo.outcome_weight,
            process_weight=algo.process_weight,
        )
        adv, returns = gae_advantages(rewards, values, mask, gamma=algo.gamma, lam=algo.gae_lambda)
        if algo.whiten_advantages:
            adv = masked_whiten(adv, mask, distributed=self._distributed)
        dtype = batch.behavior_logprobs.dtype
        first = mask.int().argmax(1)  # (N,) first loss token
        has = mask.any(1)
        per_row = torch.where(has, adv.gather(1, first[:, None]).squeeze(1), 0.0)
        per_member = torch.zeros(batch.rewards.shape, dtype=dtype, device=adv.device)
        per_member[batch.row_prompt, batch.row_slot] = per_row.to(dtype)
        return adv.to(dtype), returns.to(dtype), per_member

    @property
    def _distributed(self) -> bool:
        # Collectives only with an explicit data-parallel context, whatever the global state.
        return self.parallel is not None and self.parallel.world_size > 1

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
        """
        from grpo.learner.losses import loss_denominators

        t_start = time.perf_counter()
        cfg = self.config
        batch = pad_batch(
            groups,
            pad_token_id=self.pad_token_id,
            eos_token_id=self.eos_token_id,
            mask_truncated=self.algo.mask_truncated,
        ).to(self.device)
        mask = batch.response_mask & batch.row_valid[:, None]  # (N, T) tokens in the loss
        critic_targets = None
        extra: dict[str, float] = {}
        if self.critic is not None:
            from grpo.learner.value import explained_variance

            old_values = self._values_no_grad(batch)
            adv, returns, outcome_adv = self.gae_advantages(batch, mask, old_values)
            critic_targets = (old_values, returns)
            extra["critic/explained_variance"] = explained_variance(
                old_values, returns, mask, distributed=self._distributed
            )
        else:
            adv, outcome_adv = self.advantages(batch)
        rows_all = torch.arange(batch.num_rows, device=self.device)
        minibatches = rows_all.tensor_split(cfg.minibatches)
        live = self._rows_with_signal(adv, mask)  # (N,) rows whose passes can move π_θ
        # π_old of the first minibatch's rows comes from its epoch-0 gradient pass (module
        # docstring, 2.); the no-grad forward covers the rest. One pass in all: no π_old tensor.
        old = (
            None
            if cfg.ppo_epochs == 1 and cfg.minibatches == 1
            else self._logprobs_no_grad(
                self.model,
                batch,
                truncate=True,
                rows=torch.cat([m[live[m]] for m in minibatches[1:]] or [rows_all[:0]]),
            )
        )
        ref = (
            self._logprobs_no_grad(self.ref_model, batch, truncate=False)
            if self.ref_model is not None
            else None
        )
        t_old = time.perf_counter()

        old_full = torch.zeros_like(batch.behavior_logprobs)  # (N, T) log π_old for diagnostics
        parts: list[dict[str, float]] = []
        entropy_sum = torch.zeros((), dtype=torch.float64, device=self.device)
        norms: list[tuple[float, float]] = []
        skipped = 0
        no_signal = 0
        for epoch in range(cfg.ppo_epochs):
            for index, mb in enumerate(minibatches):
                first_pass = epoch == 0 and index == 0  # no optimizer step yet: π_θ = π_old
                # Global denominators of this optimizer step: all micro-batches and ranks.
                denom = loss_denominators(mask[mb], distributed=self._distributed)
                self._zero_grad()
                finite_loss = True
                todo = mb[live[mb]]
                padding = self._fsdp_padding_passes(todo)
                for rows in self._micro_slices(batch, todo):
                    stats, ent, old_mb, t_mb, ok = self._micro_step(
                        batch,
                        rows,
                        mask,
                        adv,
                        None if first_pass else old,
                        ref,
                        denom,
                        critic_targets,
                    )
                    if first_pass and old is not None:  # π_old of these rows, for later passes
                        old[rows, :t_mb] = old_mb.to(old.dtype)
                    finite_loss &= ok
                    parts.append(stats)
                    if epoch == 0:
                        old_full[rows, :t_mb] = old_mb.to(old_full.dtype)
                        entropy_sum += ent
                for _ in range(padding):
                    self._padding_pass(batch, backward=True)
                if self._has_signal(adv, mask, mb):
                    norm, critic_norm, applied = self._optimizer_step(finite_loss)
                    norms.append((norm, critic_norm))
                    skipped += 0 if applied else 1
                else:
                    self._zero_grad()
                    norms.append((0.0, 0.0))
                    no_signal += 1
        if not parts:  # no row with a signal in the whole batch: stats of one pass, no step
            self._zero_grad()
            rows = next(self._micro_slices(batch, minibatches[0]))
            stats, ent, old_mb, t_mb, _ = self._micro_step(
                batch,
                rows,
                mask,
                adv,
                None,
                ref,
                loss_denominators(mask[minibatches[0]], distributed=False),
                None,
            )
            self._zero_grad()
            parts.append(stats)
            old_full[rows, :t_mb] = old_mb.to(old_full.dtype)
            entropy_sum += ent
            live[rows] = True
        self.step_count += 1
        self.skipped_steps_total += skipped
        t_end = time.perf_counter()
        metrics = self._metrics(batch, outcome_adv, adv, mask, live, old_full, parts, entropy_sum)
        metrics["optim/zero_advantage_rows_skipped"] = float((~live & batch.row_valid).sum())
        metrics.update(extra)
        finite_norms = [n for n, _ in norms if math.isfinite(n)] or [norms[-1][0]]
        metrics["optim/grad_norm"] = norms[-1][0]
        metrics["optim/grad_norm_max"] = max(finite_norms)
        metrics["optim/lr"] = float(self.scheduler.get_last_lr()[0])
        metrics["optim/skipped_steps"] = float(skipped)
        metrics["optim/skipped_steps_total"] = float(self.skipped_steps_total)
        metrics["optim/no_signal_steps"] = float(no_signal)
        if self.critic is not None:
            metrics["critic/grad_norm"] = norms[-1][1]
            metrics["critic/lr"] = float(self.critic.scheduler.get_last_lr()[0])
        metrics["time/old_logprobs_s"] = t_old - t_start
        metrics["time/step_s"] = t_end - t_start
        return metrics

    def _micro_step(
        self,
        batch: TrainingBatch,
        rows: torch.Tensor,
        mask: torch.Tensor,
        adv: torch.Tensor,
        old: torch.Tensor | None,
        ref: torch.Tensor | None,
        denom: Any,
        critic_targets: tuple[torch.Tensor, torch.Tensor] | None,
    ) -> tuple[dict[str, float], torch.Tensor, torch.Tensor, int, bool]:
        """Forward and backward of one micro-batch (policy, and critic with ``gae``).

        Returns:
            (loss stats, summed entropy over its loss tokens, its log π_old [n, T_mb], T_mb,
            whether every loss was finite).
        """
        from grpo.learner.losses import policy_loss

        lp, lp_full, logits, t_mb = self._forward_logprobs(self.model, batch, rows)
        old_mb = lp.detach() if old is None else old[rows, :t_mb]
        m = mask[rows, :t_mb]
        loss, stats = policy_loss(
            lp,
            old_mb,
            adv[rows, :t_mb],
            m,
            num_tokens=denom.num_tokens,
            num_responses=denom.num_responses,
            behavior_logprobs=batch.behavior_logprobs[rows, :t_mb],
            ref_logprobs=None if ref is None else ref[rows, :t_mb],
            kl_logprobs=lp_full,
            **self._loss_options(),
        )
        scale = self.parallel.loss_scale if self.parallel is not None else 1.0
        (loss * scale).backward()
        ok = bool(torch.isfinite(loss.detach()))
        if critic_targets is not None:
            from grpo.learner.value import value_loss

            old_values, returns = critic_targets
            values, _ = self._values(batch, rows)
            vloss, vstats = value_loss(
                values,
                old_values[rows, :t_mb],
                returns[rows, :t_mb],
                m,
                value_clip=self.algo.value_clip,
                reduction=self.algo.reduction,
                num_tokens=denom.num_tokens,
                num_responses=denom.num_responses,
                max_response_length=self.config.max_response_length or None,
            )
            vloss.backward()
            ok &= bool(torch.isfinite(vloss.detach()))
            stats.update({k: v for k, v in vstats.items() if k.startswith("critic/")})
        with torch.no_grad():
            ent = entropy_from_logits(logits.detach(), self.config.temperature)
            ent_sum = torch.where(m, ent.double(), 0.0).sum()
        return stats, ent_sum, old_mb, t_mb, ok

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
        self.optimizer.zero_grad(set_to_none=True)
        if self.critic is not None:
            self.critic.optimizer.zero_grad(set_to_none=True)

    def _optimizer_step(self, finite_loss: bool) -> tuple[float, float, bool]:
        """Reduce, clip and apply the accumulated gradients unless something is not finite.

        Returns:
            (policy grad norm, critic grad norm (0 without a critic), whether the step was
            applied). A non-finite loss (on any rank) or gradient norm skips the step of both
            models: gradients are dropped, parameters, optimizer states and schedules keep
            their values, and a warning is logged.
        """
        self._all_reduce_grads()
        norm = self._clip_grads(self.model)
        critic_norm = self._clip_grads(self.critic.model) if self.critic is not None else 0.0
        bad = not (finite_loss and math.isfinite(norm) and math.isfinite(critic_norm))
        if self._distributed and self.parallel is not None:
            flag = torch.tensor([1.0 if bad else 0.0], dtype=torch.float64, device=self.device)
            bad = float(self.parallel.all_reduce(flag, "max")[0]) > 0
        if bad:
            self._zero_grad()
            log.warning(
                "non-finite loss or gradient: optimizer step skipped",
                extra={
                    "step": self.step_count,
                    "grad_norm": norm,
                    "critic_grad_norm": critic_norm,
                    "finite_loss": finite_loss,
                    "skipped_steps_total": self.skipped_steps_total + 1,
                },
            )
            return norm, critic_norm, False
        self.optimizer.step()
        self.scheduler.step()
        if self.critic is not None:
            self.critic.optimizer.step()
            self.critic.scheduler.step()
        return norm, critic_norm, True

    def _loss_options(self) -> dict[str, Any]:
        """Keyword options of ``policy_loss`` from the algorithm config."""
        opts: dict[str, Any] = self.algo.loss_kwargs(self.config.max_response_length or None)
        opts["kl_coef"] = self.beta
        return opts

    def _all_reduce_grads(self) -> None:
        """Sum gradients over ranks (each rank's loss is its share of the global loss)."""
        if not self._distributed or self.parallel is None:
            return
        self.parallel.all_reduce_grads(self.model)
        if self.critic is not None:
            self.parallel.all_reduce_grads(self.critic.model)

    def _clip_grads(self, model: torch.nn.Module) -> float:
        """Global gradient L2 norm before clipping (clipped to ``max_grad_norm`` when > 0)."""
        params = [p for p in model.parameters() if p.grad is not None]
        if not params:
            return 0.0
        max_norm = self.config.max_grad_norm if self.config.max_grad_norm > 0 else float("inf")
        return float(torch.nn.utils.clip_grad_norm_(params, max_norm))

    def _metrics(
        self,
        batch: TrainingBatch,
        outcome_adv: torch.Tensor,
        adv: torch.Tensor,
        mask: torch.Tensor,
        run: torch.Tensor,
        old: torch.Tensor,
        parts: list[dict[str, float]],
        entropy_sum: torch.Tensor,
    ) -> dict[str, float]:
        """Every diagnostic of DESIGN.md via ``batch_diagnostics``, plus the behavior mismatch.

        Loss statistics, entropy and the mismatch are world-level under data parallel and cover
        the rows whose passes ran (``run`` [N] bool, see ``_rows_with_signal``); group,
        advantage and length diagnostics describe all of this rank's groups.
        """
        from grpo.learner.diagnostics import batch_diagnostics
        from grpo.learner.losses import merge_loss_stats

        loss_stats = merge_loss_stats(parts)
        seen = mask & run[:, None]  # (N, T) loss tokens whose π_old and entropy were computed
        diff = (old - batch.behavior_logprobs).abs()  # (N, T) |log π_old − log μ|
        mism_sum = torch.where(seen, diff.double(), 0.0).sum()
        mism_max = torch.where(seen, diff, 0.0).max() if seen.any() else diff.new_zeros(())
        sums = torch.stack([seen.sum().double(), entropy_sum.double(), mism_sum])
        mx = mism_max.double().reshape(1)
        if self.parallel is not None and self.parallel.world_size > 1:
            sums = self.parallel.all_reduce(sums, "sum")
            mx = self.parallel.all_reduce(mx, "max")
            loss_stats = self.parallel.merge_stats(loss_stats)
        tokens = max(float(sums[0]), 1.0)
        rows_meta = [batch.group_metadata[int(p)] for p in batch.row_prompt.tolist()]
        slices = {"task": [batch.task_types[int(p)] for p in batch.row_prompt.tolist()]}
        if any("difficulty" in m for m in rows_meta):
            slices["difficulty"] = [m.get("difficulty", "unknown") for m in rows_meta]
        lengths = batch.attention_mask[:, batch.prompt_len :].sum(dim=1)
        a = self.algo
        metrics = batch_diagnostics(
            batch.rewards,
            outcome_adv,
            mask,
            valid=batch.reward_valid,
            row_prompt=batch.row_prompt,
            row_slot=batch.row_slot,
            token_advantages=adv,
            lengths=lengths,
            truncated=batch.truncated,
            std=a.std,
            eps=a.eps,
            estimator=a.estimator,
            reduction=a.reduction,
            max_response_length=self.config.max_response_length or int(mask.shape[1]),
            slices=slices,
            loss_stats=loss_stats,
            entropy_mean=float(sums[1]) / tokens,
            timings={
                "straggler_wait_mean_s": float(batch.straggler_wait_s.mean()),
                "straggler_wait_max_s": float(batch.straggler_wait_s.max()),
            },
        )
        metrics[mn.BEHAVIOR_ABS_LOGPROB_DIFF_MEAN] = float(sums[2]) / tokens
        metrics["behavior/abs_logprob_diff_max"] = float(mx[0])
        metrics["behavior/policy_version_min"] = float(batch.policy_versions.min())
        return metrics
