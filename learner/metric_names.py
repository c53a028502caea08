"""Names of the learner's per-step metrics (the keys of ``metrics.jsonl`` lines).

One constant per name that more than one component uses: the writer (diagnostics, losses,
trainer, the learner service loop) and the readers (``grpo report``, the run driver, the
``grpo run`` console) import the same constant, so a renamed metric cannot silently leave a
reader behind. ``tests/learner_service/test_metric_names.py`` checks that every name the report
reads is written by a real trainer step or by the learner loop.

Units: ``*_s`` seconds, ``*_frac`` shares in [0, 1], ``len/*`` tokens, KL and entropy in nats
per token. Meanings are documented where the value is computed (the module named per block).
"""

from __future__ import annotations

__all__ = [
    "ADV_ABS_MEAN",
    "ADV_CENTERED_ABS_MEAN",
    "ADV_NEG_FRAC",
    "ADV_POS_FRAC",
    "ADV_TOO_FEW_VALID_GROUPS",
    "ADV_ZERO_FRAC",
    "ADV_ZERO_VARIANCE_GROUPS",
    "ASSEMBLER_GENERATED_TOKENS",
    "ASSEMBLER_GROUPS_ACCEPTED",
    "ASSEMBLER_GROUPS_REJECTED",
    "ASSEMBLER_GROUP_OUTCOMES",
    "ASSEMBLER_KEPT_TOKENS",
    "ASSEMBLER_PREFIX",
    "ASSEMBLER_REWARDS_MISSING",
    "ASSEMBLER_REWARDS_UNDECIDED",
    "ASSEMBLER_ZERO_VARIANCE_TOKENS",
    "BEHAVIOR_ABS_LOGPROB_DIFF_MEAN",
    "DENOM_PROMPTS",
    "DENOM_RESPONSES",
    "DENOM_TOKENS",
    "ENTROPY_MEAN",
    "GENERATED_TOKENS",
    "GROUPS_ALL_CORRECT_FRAC",
    "GROUPS_ALL_WRONG_FRAC",
    "GROUPS_CORRECT_FRAC",
    "GROUPS_MISSING_FRAC",
    "GROUPS_MIXED_FRAC",
    "GROUPS_REWARD_MEAN",
    "GROUPS_REWARD_STD_MEAN",
    "KL_REF_MEAN",
    "LEARNER_REDIS_OUTAGE_S",
    "LEN_MEAN",
    "LEN_MEAN_NEG_ADV",
    "LEN_MEAN_POS_ADV",
    "LEN_MEAN_ZERO_ADV",
    "LEN_TRUNCATED_FRAC",
    "LOOP_RECORD",
    "LOSS_APPROX_KL",
    "LOSS_CLIP_FRAC_HIGH",
    "LOSS_CLIP_FRAC_LOW",
    "LOSS_DUAL_CLIP_FRAC",
    "LOSS_RATIO_MAX",
    "LOSS_RATIO_MEAN",
    "LOSS_RATIO_MIN",
    "OPTIM_GRAD_NORM",
    "OPTIM_GRAD_NORM_MAX",
    "OPTIM_LR",
    "OPTIM_NO_SIGNAL_STEPS",
    "OPTIM_SKIPPED_STEPS",
    "POLICY_VERSION",
    "STEP",
    "STRAGGLER_WAIT_MAX_S",
    "STRAGGLER_WAIT_MEAN_S",
    "TIME_PREFIX",
    "WALL_CLOCK_S",
    "WEIGHT_PREFIX",
    "assembler_metric",
    "time_metric",
    "weight_prefix",
]

# -- grpo.learner.diagnostics.batch_diagnostics ------------------------------------------
GROUPS_REWARD_MEAN = "groups/reward_mean"
"""Mean valid outcome reward of the trained groups."""
GROUPS_ALL_CORRECT_FRAC = "groups/all_correct_frac"
"""Share of groups (with a valid reward) whose valid rewards are all correct."""
GROUPS_ALL_WRONG_FRAC = "groups/all_wrong_frac"
"""Share of groups (with a valid reward) whose valid rewards are all wrong."""
GROUPS_MIXED_FRAC = "groups/mixed_frac"
"""Share of groups (with a valid reward) with both correct and wrong rewards."""
GROUPS_REWARD_STD_MEAN = "groups/reward_std_mean"
"""Mean over groups (with a valid reward) of the within-group reward std (the algo's std)."""
GROUPS_CORRECT_FRAC = "groups/correct_frac"
"""Share of valid rewards that are correct."""
GROUPS_MISSING_FRAC = "groups/missing_frac"
"""Share of the batch's P·G members without a valid reward."""
ADV_CENTERED_ABS_MEAN = "adv/centered_abs_mean"
"""Mean |R − group mean| over valid members: the raw centered reward before any scaling."""
ADV_ABS_MEAN = "adv/abs_mean"
"""Mean |A| over valid members: the advantage after the estimator's scaling."""
ADV_ZERO_VARIANCE_GROUPS = "adv/zero_variance_groups"
"""Groups whose valid rewards are all equal (advantage 0), too-few-valid ones aside."""
ADV_TOO_FEW_VALID_GROUPS = "adv/too_few_valid_groups"
"""Groups with fewer than two valid rewards (advantage 0)."""
ADV_POS_FRAC = "adv/pos_frac"
"""Share of valid members with a positive advantage."""
ADV_NEG_FRAC = "adv/neg_frac"
"""Share of valid members with a negative advantage."""
ADV_ZERO_FRAC = "adv/zero_frac"
"""Share of valid members with advantage exactly 0."""
LEN_MEAN = "len/mean"
"""Mean response length (tokens) of the batch's rows."""
LEN_MEAN_ZERO_ADV = "len/mean_zero_adv"
"""Mean response length (tokens) of responses with advantage 0."""
LEN_TRUNCATED_FRAC = "len/truncated_frac"
"""Share of responses that stopped at the length limit without EOS."""
DENOM_PROMPTS = "denom/prompts"
"""Prompts (groups) in the batch: the loss's prompt denominator."""
DENOM_RESPONSES = "denom/responses"
"""Responses with at least one loss token (the response_mean denominator)."""
DENOM_TOKENS = "denom/tokens"
"""Loss tokens of the batch (the token_mean denominator)."""
WEIGHT_PREFIX = "weight/"
"""Prefix of the effective loss weight per slice: ``weight/<slice>/<label>`` (shares)."""


def weight_prefix(slice_name: str) -> str:
    """The prefix of slice ``slice_name``'s weight shares: ``weight/<slice_name>/``."""
    return f"{WEIGHT_PREFIX}{slice_name}/"


LEN_MEAN_POS_ADV = "len/mean_pos_adv"
"""Mean response length (tokens) of responses with a positive advantage."""
LEN_MEAN_NEG_ADV = "len/mean_neg_adv"
"""Mean response length (tokens) of responses with a negative advantage."""
ENTROPY_MEAN = "entropy/mean"
"""Token-mean entropy of π_θ over the loss tokens (nats/token)."""
TIME_PREFIX = "time/"
"""Prefix of the timings ``batch_diagnostics`` passes through (seconds)."""

# -- grpo.learner.losses.policy_loss ------------------------------------------------------
LOSS_CLIP_FRAC_LOW = "loss/clip_frac_low"
"""Token-mean share of tokens clipped at 1 − ε_low (negative advantage)."""
LOSS_CLIP_FRAC_HIGH = "loss/clip_frac_high"
"""Token-mean share of tokens clipped at 1 + ε_high (positive advantage)."""
KL_REF_MEAN = "kl/ref_mean"
"""Token-mean KL(π_θ‖π_ref) estimate of the configured estimator (written when β > 0)."""
LOSS_DUAL_CLIP_FRAC = "loss/dual_clip_frac"
"""Token-mean share of tokens bounded by the dual clip (A < 0, large ratio)."""
LOSS_RATIO_MEAN = "loss/ratio_mean"
"""Token-mean importance ratio π_θ/π_old."""
LOSS_RATIO_MIN = "loss/ratio_min"
"""Smallest ratio π_θ/π_old over the loss tokens (min over micro-batches and ranks)."""
LOSS_RATIO_MAX = "loss/ratio_max"
"""Largest ratio π_θ/π_old over the loss tokens (max over micro-batches and ranks)."""
LOSS_APPROX_KL = "loss/approx_kl"
"""Token-mean k3 estimate of KL(π_old‖π_θ): how far the update moved the policy (nats)."""

# -- grpo.learner.trainer.Trainer.step ------------------------------------------------------
BEHAVIOR_ABS_LOGPROB_DIFF_MEAN = "behavior/abs_logprob_diff_mean"
"""Token-mean |log π_old − log μ|: how far the learner's π_old is from the sampler."""
OPTIM_LR = "optim/lr"
"""Learning rate after the step's last optimizer step."""
OPTIM_GRAD_NORM = "optim/grad_norm"
"""Gradient L2 norm before clipping, of the step's last optimizer step."""
OPTIM_GRAD_NORM_MAX = "optim/grad_norm_max"
"""Largest finite gradient norm before clipping over the step's optimizer steps."""
OPTIM_SKIPPED_STEPS = "optim/skipped_steps"
"""Optimizer steps skipped this step for a non-finite loss or gradient."""
OPTIM_NO_SIGNAL_STEPS = "optim/no_signal_steps"
"""Minibatches without a nonzero advantage (no optimizer step taken)."""


def time_metric(name: str) -> str:
    """The metric name of timing ``name`` (seconds): ``time/<name>``."""
    return f"{TIME_PREFIX}{name}"


STRAGGLER_WAIT_MEAN_S = time_metric("straggler_wait_mean_s")
"""Mean over the batch's groups of the seconds between first and last scored member."""
STRAGGLER_WAIT_MAX_S = time_metric("straggler_wait_max_s")
"""Largest such wait in the batch (seconds)."""

# -- grpo.services.learner.loop (the run record around the trainer's metrics) -----------------
STEP = "step"
"""Learner step (optimizer-step batches trained so far)."""
POLICY_VERSION = "policy_version"
"""Policy version after the step."""
WALL_CLOCK_S = "wall_clock_s"
"""Seconds since the run started."""
GENERATED_TOKENS = "generated_tokens"
"""Tokens sampled so far (the assembler's count, rejected groups included, when known)."""
LOOP_RECORD = (STEP, POLICY_VERSION, WALL_CLOCK_S, GENERATED_TOKENS)
"""Names the learner loop writes on every metrics line besides the trainer's."""
LEARNER_REDIS_OUTAGE_S = "learner/redis_outage_s"
"""Seconds this learner process could not reach Redis so far (``Outage.total_s``; the run
driver reads it from GetStatus for a summary without service logs)."""
ASSEMBLER_PREFIX = "assembler/"
"""Prefix of the assembler's run counters the loop copies into each line (when it has them)."""


def assembler_metric(counter: str) -> str:
    """The metric name of assembler counter ``counter`` (an ``AssemblerStats`` field)."""
    return f"{ASSEMBLER_PREFIX}{counter}"


# -- grpo.services.runtime.accounting (AssemblerStats counters, copied by the learner loop) ------
ASSEMBLER_GROUPS_ACCEPTED = assembler_metric("groups_accepted")
"""Groups the assembler closed and wrote for training (cumulative count)."""
ASSEMBLER_GROUPS_REJECTED = {
    "all correct": assembler_metric("groups_rejected_all_correct"),
    "all wrong": assembler_metric("groups_rejected_all_wrong"),
    "too few valid": assembler_metric("groups_rejected_too_few_valid"),
    "too many undecided": assembler_metric("groups_rejected_too_many_undecided"),
}
"""Rejection reason -> the counter of groups closed and dropped for it (cumulative counts;
every ``groups_rejected_*`` field of ``AssemblerStats``, tested)."""
ASSEMBLER_GROUP_OUTCOMES = (ASSEMBLER_GROUPS_ACCEPTED, *ASSEMBLER_GROUPS_REJECTED.values())
"""One counter per outcome of a closed group: each closed group is in exactly one of them
(a timed-out group too), so opened = their sum + pending."""
ASSEMBLER_REWARDS_MISSING = assembler_metric("rewards_missing")
"""Members recorded without a valid reward (cumulative count)."""
ASSEMBLER_REWARDS_UNDECIDED = assembler_metric("rewards_undecided")
"""Members whose outcome verifier answered UNDECIDED (a subset of the missing ones)."""
ASSEMBLER_GENERATED_TOKENS = assembler_metric("generated_tokens")
"""Tokens of every rollout received (cumulative; rejected and late ones included)."""
ASSEMBLER_KEPT_TOKENS = assembler_metric("kept_tokens")
"""Tokens of rollouts in accepted groups (cumulative)."""
ASSEMBLER_ZERO_VARIANCE_TOKENS = assembler_metric("zero_variance_tokens")
"""Tokens of closed groups whose valid rewards were all equal, whatever their fate."""
