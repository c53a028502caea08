"""The token budget's gate (``services/driver/token_budget.py``): its worst-case arithmetic on
plain counts, no gRPC and no Redis."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo.errors import InvalidArgumentError
from grpo.services.driver.token_budget import TokenCounts, TokenGate, closed_groups
from grpo.services.settings.run import load_run_config
from grpo.v1 import assembler_pb2

REPO = Path(__file__).resolve().parents[2]


def counts(
    counted: int = 0, issued: int = 0, received: int = 0, late: int = 0, closed: int = 0
) -> TokenCounts:
    return TokenCounts(
        counted=counted, issued_jobs=issued, received=received, late=late, closed=closed
    )


def test_no_job_is_fed_whose_worst_case_could_pass_what_is_left() -> None:
    gate = TokenGate(budget=300, group_size=4, max_new_tokens=24)  # W = 96
    assert gate.job_worst_case == 96
    assert gate.jobs(counts(), limit=64) == 3  # 3·96 = 288 <= 300 < 4·96
    assert gate.jobs(counts(), limit=2) == 2
    # 3 jobs in flight, nothing counted: each reserved at 96, 12 left
    assert gate.committed(counts(issued=3)) == 288
    assert gate.jobs(counts(issued=3), limit=64) == 0
    # One group arrives short (4 rollouts of 5 tokens): its 96 give way to 20 -> 88 left
    first = counts(counted=20, issued=3, received=4, closed=1)
    assert gate.committed(first) == 20 + 8 * 24
    assert gate.jobs(first, limit=64) == 0  # 88 < 96
    # A second short group frees room for one more job: 300 - 40 - 96 = 164 -> 1
    second = counts(counted=40, issued=3, received=8, closed=2)
    assert gate.jobs(second, limit=64) == 1
    # Partly received groups: only the rollouts not yet counted are reserved
    partial = counts(counted=30, issued=2, received=6)
    assert gate.committed(partial) == 30 + 2 * 24


def test_the_worst_case_never_passes_the_budget_whatever_the_lengths() -> None:
    # Feed greedily as the gate allows while every rollout takes L_max: never above.
    gate = TokenGate(budget=1000, group_size=4, max_new_tokens=24)
    fed = counted = 0
    while (n := gate.jobs(counts(counted, fed, fed * 4, closed=fed), limit=64)) > 0:
        fed += n
        counted = fed * 96  # every job arrives at its worst case
    assert counted <= 1000 and 1000 - counted < gate.job_worst_case
    assert gate.spent(counts(counted, fed, fed * 4, closed=fed))


def test_regenerations_are_reserved_and_counted_as_issued() -> None:
    # Dynamic sampling may regenerate a rejected group once: W = 2·G·L_max
    gate = TokenGate(budget=500, group_size=4, max_new_tokens=24, regeneration_rounds=1)
    assert gate.job_worst_case == 192
    assert gate.jobs(counts(), limit=64) == 2
    one = counts(issued=1)  # the group's 96 and its possible regeneration's 96
    assert gate.committed(one) == 192
    # the group closed rejected and its regeneration was written: 2 issued, 1 closed
    regen = counts(counted=40, issued=2, received=4, closed=1)
    assert gate.committed(regen) == 40 + 96 + 96
    accepted = counts(counted=40, issued=1, received=4, closed=1)  # kept: nothing reserved
    assert gate.committed(accepted) == 40


def test_rollouts_of_closed_groups_are_no_longer_reserved() -> None:
    gate = TokenGate(budget=300, group_size=4, max_new_tokens=24)
    # a group closed by its deadline with 3 of 4 members: the 4th may never come (or come
    # late, uncounted)
    short = counts(counted=30, issued=1, received=3, closed=1)
    assert gate.committed(short) == 30
    late = counts(counted=30, issued=1, received=3, late=1, closed=1)
    assert gate.committed(late) == 30


def test_the_budget_is_spent_when_no_job_fits_and_nothing_is_open() -> None:
    gate = TokenGate(budget=300, group_size=4, max_new_tokens=24)
    assert not gate.spent(counts())
    assert not gate.spent(counts(counted=250, issued=3, received=11, closed=2))  # one open
    assert gate.spent(counts(counted=250, issued=3, received=12, closed=3))  # 50 < 96 left
    assert not gate.spent(counts(counted=200, issued=3, received=12, closed=3))  # 100 left
    assert gate.spent(counts(counted=300, issued=4, received=12, closed=3))  # reached
    # a job moved to dead letters counts as closed (no rollout will come)
    assert gate.spent(counts(counted=250, issued=4, received=12, closed=4))


def test_no_budget_feeds_the_limit_and_is_never_spent() -> None:
    gate = TokenGate(budget=0, group_size=4, max_new_tokens=24)
    assert gate.jobs(counts(counted=10**9, issued=100), limit=7) == 7
    assert not gate.spent(counts(counted=10**9))


def test_the_gate_of_a_run_config() -> None:
    cfg = load_run_config(
        REPO / "configs" / "e2e-tiny.yaml", {"budget.generated_tokens": 300}
    )  # G = 4, L_max = 24, dynamic sampling may regenerate once (its default)
    gate = TokenGate.of(cfg)
    assert (gate.budget, gate.group_size, gate.max_new_tokens) == (300, 4, 24)
    assert gate.regeneration_rounds == cfg.assembler.dynamic_sampling.max_rounds == 1
    assert gate.job_worst_case == cfg.job_worst_case_tokens == 192
    off = load_run_config(
        REPO / "configs" / "e2e-tiny.yaml", {"assembler.dynamic_sampling.regenerate": False}
    )
    assert TokenGate.of(off).regeneration_rounds == 0
    with pytest.raises(InvalidArgumentError):
        TokenGate(budget=-1, group_size=4, max_new_tokens=24)


def test_closed_groups_sums_every_verdict() -> None:
    stats = assembler_pb2.AssemblerStats(
        groups_accepted=5,
        groups_rejected_all_correct=1,
        groups_rejected_all_wrong=2,
        groups_rejected_too_few_valid=3,
        groups_rejected_too_many_undecided=4,
        groups_timed_out=9,  # a close status, not a verdict: counted in the verdicts already
    )
    assert closed_groups(stats) == 15


def test_a_budget_below_one_jobs_worst_case_is_refused() -> None:
    # no job could ever be fed: the run would stop at once with nothing generated
    with pytest.raises(ValueError, match=r"budget\.generated_tokens=191 is less than one prompt "
                       r"job's worst case 192 tokens.*at least 192, or 0"):  # fmt: skip
        load_run_config(REPO / "configs" / "e2e-tiny.yaml", {"budget.generated_tokens": 191})
    assert (
        load_run_config(
            REPO / "configs" / "e2e-tiny.yaml", {"budget.generated_tokens": 192}
        ).budget.generated_tokens
        == 192
    )
    no_regen = load_run_config(
        REPO / "configs" / "e2e-tiny.yaml",
        {"budget.generated_tokens": 96, "assembler.dynamic_sampling.regenerate": False},
    )
    assert no_regen.job_worst_case_tokens == 96
