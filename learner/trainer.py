"""The GRPO trainer: one ``step(groups)`` = batch -> π_old -> advantages -> clipped updates.

A plain class with no Redis or gRPC. It owns the policy model π_θ, its AdamW optimizer with a
linear warmup and a constant/linear/cosine schedule, and the reference model π_ref when the
KL weight β > 0. One call of ``step`` on B closed groups:

1. builds the padded batch (``grpo.learner.batch``);
2. computes π_old log-probs at batch start without gradient, at the sampler's temperature
   (``token_logprobs(logits, ids, temperature)``), and π_ref's when β > 0. With one PPO epoch
   and one minibatch the parameters do not move before every token's ratio is formed, so
   π_old is the detached π_θ of the gradient pass itself and the extra forward is skipped;
3. advantages: outcome (``group_advantages`` over rewards [P, G], missing rewards masked) and
   process credit (``process_token_advantages`` on step rewards placed at their step-end
   tokens), combined as ``outcome_weight * A_outcome + process_weight * A_process``;
4. ``ppo_epochs`` passes over ``minibatches`` minibatches of rows; each minibatch is one
   optimizer step, accumulated over micro-batches of ``micro_batch_size`` rows. Denominators
   (tokens, responses) are global over the whole minibatch and all ranks, so the gradient does
   not depend on the split (DESIGN.md "Reductions");
5. behavior correction: with ``tis_cap`` set, each token's loss is weighted by the truncated
   importance weight min(π_old/μ, cap) (truncated IS, Yao et al. 2025 "Your efficient RL
   framework secretly brings you off-policy RL training"); the mismatch
   mean/max |log π_old − log μ| is always reported.

Data parallel: pass a ``grpo.learner.distributed.DataParallel``; every rank calls ``step`` with
its own whole groups; denominators, gradients and summed statistics are all-reduced.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Sequence
from typing import Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field, model_validator

from grpo.devices import resolve_device
from grpo.learner import metric_names as mn
from grpo.learner.batch import GroupRows, TrainingBatch, pad_batch
from grpo.learner.config import LearnerAlgoConfig
from grpo.learner.logprobs import entropy_from_logits

__all__ = ["Trainer", "TrainerConfig"]


class TrainerConfig(BaseModel):
    """Optimizer, schedule, batching and device settings of the trainer."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    lr: float = Field(default=5e-5, gt=0, description="Peak AdamW learning rate.")
    warmup_steps: int = Field(
        default=5, ge=0, description="Optimizer steps of linear warmup from lr/warmup to lr."
    )
    schedule: Literal["constant", "linear", "cosine"] = Field(
        default="constant", description="LR after warmup: constant, or linear/cosine decay."
    )
    total_steps: int = Field(
        default=0,
        ge=0,
        description="Optimizer steps the decay spans (linear/cosine); 0 = no decay.",
    )
    min_lr_ratio: float = Field(
        default=0.1, ge=0, le=1, description="Final LR as a fraction of lr for linear/cosine."
    )
    weight_decay: float = Field(default=0.0, ge=0, description="AdamW decoupled weight decay.")
    adam_beta1: float = Field(default=0.9, ge=0, lt=1, description="AdamW beta1.")
    adam_beta2: float = Field(default=0.999, ge=0, lt=1, description="AdamW beta2.")
    adam_eps: float = Field(default=1e-8, gt=0, description="AdamW epsilon.")
    max_grad_norm: float = Field(
        default=1.0, ge=0, description="Clip the global gradient L2 norm to this; 0 disables."
    )
    ppo_epochs: int = Field(default=1, ge=1, description="Passes over each batch.")
    minibatches: int = Field(
        default=1, ge=1, description="Optimizer steps per epoch; the batch's rows are split evenly."
    )
    micro_batch_size: int = Field(
        default=32, ge=1, description="Rows per forward/backward (gradient accumulation unit)."
    )
    temperature: float = Field(
        default=1.0,
        gt=0,
        description="Sampler temperature; log-probs are taken at logits/temperature.",
    )
    max_response_length: int = Field(
        default=0, ge=0, description="L_max of the fixed_budget reduction (sampler max_new_tokens)."
    )
    device: str = Field(
        default="auto", description="'auto' (CUDA when present, else CPU), or a device."
    )
    seed: int = Field(default=0, description="Seed of torch's RNG at trainer construction.")

    @model_validator(mode="after")
    def _check(self) -> TrainerConfig:
        if self.schedule != "constant" and self.total_steps == 0:
            raise ValueError(f"schedule={self.schedule!r} needs total_steps > 0")
        return self


def _lr_multiplier(config: TrainerConfig, step: int) -> float:
    """LR factor after ``step`` optimizer steps (LambdaLR convention, step 0 = first update)."""
    warm = min(1.0, (step + 1) / config.warmup_steps) if config.warmup_steps else 1.0
    if config.schedule == "constant":
        return warm
    frac = min(1.0, step / config.total_steps)
    linear = config.schedule == "linear"
    decay = 1.0 - frac if linear else 0.5 * (1.0 + math.cos(math.pi * frac))
    return warm * (config.min_lr_ratio + (1.0 - config.min_lr_ratio) * decay)


class Trainer:
    """Holds π_θ, its optimizer and schedule, π_ref (β > 0); ``step(groups)`` trains one batch.

    Args:
        model: a causal LM (transformers ``PreTrainedModel``); moved to the config's device.
        algo: ``grpo.learner.config.LearnerAlgoConfig`` (estimator, std, clip band, reduction,
            KL estimator and weight β, process normalization, TIS cap).
        config: optimizer/batching/device settings.
        pad_token_id, eos_token_id: the tokenizer's ids (see ``pad_batch``).
        ref_model: π_ref, required when β > 0 (frozen, eval mode, no gradient).
        parallel: data-parallel context; None for a single process.
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
        self.optimizer = torch.optim.AdamW(
            params,
            lr=config.lr,
            betas=(config.adam_beta1, config.adam_beta2),
            eps=config.adam_eps,
            weight_decay=config.weight_decay,
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: _lr_multiplier(config, s)
        )
        self.step_count = 0

    # ------------------------------------------------------------------ forward passes
    def _micro_slices(self, rows: torch.Tensor) -> Iterator[torch.Tensor]:
        size = self.config.micro_batch_size
        for start in range(0, rows.numel(), size):
            yield rows[start : start + size]

    def _forward_logprobs(
        self, model: torch.nn.Module, batch: TrainingBatch, rows: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, int]:
        """Log-probs and logits of the response tokens of ``rows``.

        Returns:
            (logprobs [n, T_mb], logits [n, T_mb, V] at temperature 1, T_mb) where T_mb is the
            longest response among ``rows``; columns beyond a row's response are padding.
        """
        from grpo.learner.logprobs import token_logprobs

        p = batch.prompt_len
        att = batch.attention_mask[rows]
        p_mb = int(att[:, :p].sum(dim=1).max())
        t_mb = max(1, int(att[:, p:].sum(dim=1).max()))
        cols = slice(p - p_mb, p + t_mb)
        out = model(
            input_ids=batch.input_ids[rows, cols],
            attention_mask=att[:, cols],
            position_ids=batch.position_ids[rows, cols],
            use_cache=False,
            logits_to_keep=t_mb + 1,
        )
        logits = out.logits[:, :-1]  # (n, T_mb, V): position P_mb-1+t predicts token t
        if logits.dtype in (torch.float16, torch.bfloat16):
            logits = logits.float()
        ids = batch.response_ids[rows, :t_mb]
        return token_logprobs(logits, ids, self.config.temperature), logits, t_mb

    @torch.no_grad()
    def _logprobs_no_grad(self, model: torch.nn.Module, batch: TrainingBatch) -> torch.Tensor:
        """[N, T] log-probs of every response token under ``model`` (0 beyond each response)."""
        out: torch.Tensor | None = None
        rows_all = torch.arange(batch.num_rows, device=self.device)
        for rows in self._micro_slices(rows_all):
            lp, _, t_mb = self._forward_logprobs(model, batch, rows)
            if out is None:
                out = lp.new_zeros(batch.response_ids.shape)
            out[rows, :t_mb] = lp
        assert out is not None  # a batch has at least one row
        return out

    # ------------------------------------------------------------------ advantages
    def advantages(self, batch: TrainingBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """Token advantages [N, T] and the outcome advantages per group member [P, G].

        A_{i,t} = outcome_weight · A_i + process_weight · A^process_{i,t} (the algo config's
        weights; the process term only when the batch carries step rewards).
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
            adv = combine_advantages(
                row_adv,
                proc.to(row_adv),
                outcome_weight=algo.outcome_weight,
                process_weight=algo.process_weight,
            )
        else:
            adv = (algo.outcome_weight * row_adv)[:, None].expand(n, t).clone()
        return adv, outcome

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
            ``optim/grad_norm`` (before clipping), ``optim/lr``, ``time/*_s`` (seconds).

        Raises:
            InvalidArgumentError / ContractError: malformed groups (see ``pad_batch``).
            ValueError: a configuration the loss rejects (see ``policy_loss``).
        """
        from grpo.learner.losses import loss_denominators, policy_loss

        t_start = time.perf_counter()
        cfg = self.config
        batch = pad_batch(
            groups,
            pad_token_id=self.pad_token_id,
            eos_token_id=self.eos_token_id,
            mask_truncated=self.algo.mask_truncated,
        ).to(self.device)
        adv, outcome_adv = self.advantages(batch)
        mask = batch.response_mask & batch.row_valid[:, None]  # (N, T) tokens in the loss
        reuse_old = cfg.ppo_epochs == 1 and cfg.minibatches == 1
        old = None if reuse_old else self._logprobs_no_grad(self.model, batch)
        ref = self._logprobs_no_grad(self.ref_model, batch) if self.ref_model is not None else None
        t_old = time.perf_counter()

        rows_all = torch.arange(batch.num_rows, device=self.device)
        minibatches = list(rows_all.tensor_split(cfg.minibatches))
        old_full = torch.zeros_like(batch.behavior_logprobs)  # (N, T) log π_old for diagnostics
        parts: list[dict[str, float]] = []
        scale = self.parallel.loss_scale if self.parallel is not None else 1.0
        # Collectives only with an explicit data-parallel context, whatever the global state.
        distributed = self.parallel is not None and self.parallel.world_size > 1
        entropy_sum = torch.zeros((), dtype=torch.float64, device=self.device)
        grad_norms: list[float] = []
        for epoch in range(cfg.ppo_epochs):
            for mb in minibatches:
                # Global denominators of this optimizer step: all micro-batches and ranks.
                denom = loss_denominators(mask[mb], distributed=distributed)
                self.optimizer.zero_grad(set_to_none=True)
                for rows in self._micro_slices(mb):
                    lp, logits, t_mb = self._forward_logprobs(self.model, batch, rows)
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
                        **self._loss_options(),
                    )
                    (loss * scale).backward()
                    parts.append(stats)
                    if epoch == 0:
                        old_full[rows, :t_mb] = old_mb.to(old_full.dtype)
                        with torch.no_grad():
                            ent = entropy_from_logits(logits.detach(), cfg.temperature)
                            entropy_sum += torch.where(m, ent.double(), 0.0).sum()
                self._all_reduce_grads()
                grad_norms.append(self._clip_grads())
                self.optimizer.step()
                self.scheduler.step()
        self.step_count += 1
        t_end = time.perf_counter()
        metrics = self._metrics(batch, outcome_adv, adv, mask, old_full, parts, entropy_sum)
        metrics["optim/grad_norm"] = grad_norms[-1]
        metrics["optim/grad_norm_max"] = max(grad_norms)
        metrics["optim/lr"] = float(self.scheduler.get_last_lr()[0])
        metrics["time/old_logprobs_s"] = t_old - t_start
        metrics["time/step_s"] = t_end - t_start
        return metrics

    def _loss_options(self) -> dict[str, Any]:
        """Keyword options of ``policy_loss`` from the algorithm config."""
        opts: dict[str, Any] = self.algo.loss_kwargs(self.config.max_response_length or None)
        opts["kl_coef"] = self.beta
        return opts

    def _all_reduce_grads(self) -> None:
        """Sum gradients over ranks (each rank's loss is its share of the global loss)."""
        if self.parallel is None or self.parallel.world_size == 1:
            return
        self.parallel.all_reduce_grads(self.model)

    def _clip_grads(self) -> float:
        params = [p for p in self.model.parameters() if p.grad is not None]
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
        old: torch.Tensor,
        parts: list[dict[str, float]],
        entropy_sum: torch.Tensor,
    ) -> dict[str, float]:
        """Every diagnostic of DESIGN.md via ``batch_diagnostics``, plus the behavior mismatch.

        Loss statistics, entropy and the mismatch are world-level under data parallel; group,
        advantage and length diagnostics describe this rank's groups.
        """
        from grpo.learner.diagnostics import batch_diagnostics
        from grpo.learner.losses import merge_loss_stats

        loss_stats = merge_loss_stats(parts)
        diff = (old - batch.behavior_logprobs).abs()  # (N, T) |log π_old − log μ|
        mism_sum = torch.where(mask, diff.double(), 0.0).sum()
        mism_max = torch.where(mask, diff, 0.0).max() if mask.any() else diff.new_zeros(())
        sums = torch.stack([mask.sum().double(), entropy_sum.double(), mism_sum])
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
