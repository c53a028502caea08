"""Metric names are declared once: every name ``grpo report`` reads is written by a component.

A real trainer step (tiny model, KL to a reference, truncated IS) gives the names the trainer
and its diagnostics write; the learner loop adds ``LOOP_RECORD`` (checked against a real loop
in ``test_service.py``) and the assembler's counters (``AssemblerStats`` fields, copied under
``assembler/``). A report panel reading a name outside that set would plot "no data" forever
(as the KL panel did while it read ``kl/mean`` and the trainer wrote ``kl/ref_mean``).
"""

from __future__ import annotations

from pathlib import Path

from transformers import AutoModelForCausalLM

from grpo.learner import metric_names as mn
from grpo.learner.config import LearnerAlgoConfig
from grpo.learner.trainer import Trainer, TrainerConfig
from grpo.model import load_tokenizer
from grpo.report import METRICS_READ
from grpo.services.learner.batch import group_rows
from grpo.services.runtime.accounting import REJECTIONS
from grpo.v1 import assembler_pb2


def _written_by_a_trainer_step(model_dir: Path, groups) -> set[str]:
    tok = load_tokenizer(model_dir)
    trainer = Trainer(
        AutoModelForCausalLM.from_pretrained(model_dir),
        LearnerAlgoConfig(kl_coef=0.05, tis_cap=2.0),
        TrainerConfig(lr=1e-4, warmup_steps=0),
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        ref_model=AutoModelForCausalLM.from_pretrained(model_dir),
    )
    return set(trainer.step([group_rows(g) for g in groups]))


def test_every_metric_the_report_reads_is_written(tiny_model_dir: Path, make_groups) -> None:
    # Two mixed groups (positive and negative advantages) and one whose rewards are all 1
    # (advantage 0): a mean over an empty set is not written, so each sign needs its rows.
    groups = make_groups(num_groups=3, group_size=4)
    for member in groups[2].members:
        member.outcome.reward = 1.0
    written = _written_by_a_trainer_step(tiny_model_dir, groups)
    assembler = {
        mn.assembler_metric(f.name) for f in assembler_pb2.AssemblerStats.DESCRIPTOR.fields
    }
    written |= set(mn.LOOP_RECORD) | assembler
    unwritten = sorted(set(METRICS_READ) - written)
    assert not unwritten, f"grpo report reads metrics nobody writes: {unwritten}"
    assert mn.KL_REF_MEAN in METRICS_READ and mn.KL_REF_MEAN in written
    # The names the KL panel used to read are written by nobody: the check above can fail.
    assert not {"kl/mean", "loss/kl"} & written


def test_every_rejection_reason_is_read_and_summed() -> None:
    """A closed group is accepted or rejected for one reason; a reason the assembler counts
    but the report (``ASSEMBLER_GROUP_OUTCOMES``) or the accounting (``REJECTIONS``: the
    identity, summary.json) leaves out would make "rejected" mean different sums."""
    fields = {f.name for f in assembler_pb2.AssemblerStats.DESCRIPTOR.fields}
    reasons = {name for name in fields if name.startswith("groups_rejected_")}
    assert len(reasons) >= 4 and "groups_rejected_too_many_undecided" in reasons
    assert set(REJECTIONS) == reasons
    read = {mn.assembler_metric(name) for name in reasons}
    assert set(mn.ASSEMBLER_GROUPS_REJECTED.values()) == read
    assert set(mn.ASSEMBLER_GROUP_OUTCOMES) == read | {mn.assembler_metric("groups_accepted")}
    assert {mn.ASSEMBLER_REWARDS_MISSING, mn.ASSEMBLER_REWARDS_UNDECIDED} <= set(METRICS_READ)
    assert set(mn.ASSEMBLER_GROUP_OUTCOMES) <= set(METRICS_READ)
