"""Two gloo ranks (torch.multiprocessing spawn) reproduce one process: group statistics and
loss reductions with global denominators."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from grpo.learner.advantages import grouped_advantages
from grpo.learner.losses import REDUCTIONS, loss_denominators, policy_loss


def _batch() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(11)
    old = -torch.rand(6, 7, generator=g, dtype=torch.float64) * 2
    lengths = torch.tensor([2, 6, 7, 1, 4, 3])
    return {
        "old": old,
        "new": old + 0.3 * torch.randn(6, 7, generator=g, dtype=torch.float64),
        "adv": torch.randn(6, generator=g, dtype=torch.float64),
        "mask": torch.arange(7).unsqueeze(0) < lengths.unsqueeze(1),
    }


def _losses(batch: dict[str, torch.Tensor], rows: slice) -> dict[str, torch.Tensor]:
    """Loss and gradient of ``rows`` with denominators of the (possibly distributed) batch."""
    out = {}
    denom = loss_denominators(batch["mask"][rows])
    for reduction in REDUCTIONS:
        lp = batch["new"][rows].clone().requires_grad_(True)
        loss, _ = policy_loss(
            lp,
            batch["old"][rows],
            batch["adv"][rows],
            batch["mask"][rows],
            reduction=reduction,
            max_response_length=8,
            num_tokens=denom.num_tokens,
            num_responses=denom.num_responses,
        )
        loss.backward()
        assert lp.grad is not None
        out[f"{reduction}/loss"] = loss.detach()
        out[f"{reduction}/grad"] = lp.grad
    return out


def _merged_stats(rank: int) -> dict[str, dict[str, float]]:
    """``DataParallel.merge_stats`` when rank 0 has no loss token (its micro-batches' means
    left out by ``merge_loss_stats``) and rank 1 has 8, and when no rank has one."""
    from grpo.learner.distributed import DataParallel
    from grpo.learner.losses import merge_loss_stats

    lp = torch.zeros(2, 4)
    mask = torch.full((2, 4), rank == 1)
    _, stats = policy_loss(lp, lp + 0.5, torch.tensor([1.0, -1.0]), mask)
    keys = list(stats)
    parallel = DataParallel()
    _, none = policy_loss(lp, lp, torch.tensor([1.0, -1.0]), torch.zeros(2, 4, dtype=torch.bool))
    return {
        "one_rank": parallel.merge_stats(merge_loss_stats([stats]), keys),
        "no_rank": parallel.merge_stats(merge_loss_stats([none]), keys),
        "rank1": stats,
    }


def _worker(rank: int, world: int, init_file: str, out_dir: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        # one group of 8 whose members are split 4/4 over the ranks
        rewards = torch.tensor([1.0, 0, 1, 1, 0, 0, 1, 0])[rank * 4 : rank * 4 + 4]
        adv = grouped_advantages(rewards, torch.zeros(4, dtype=torch.long), 1)
        # two responses with 2 and 6 tokens and per-token loss 1 and 3, one per rank
        mask = torch.arange(8).unsqueeze(0) < torch.tensor([[2, 6][rank]])
        denom = loss_denominators(mask)
        golden = {}
        for reduction in REDUCTIONS:
            loss, _ = policy_loss(
                torch.zeros(1, 8),
                torch.zeros(1, 8),
                torch.tensor([[-1.0, -3.0][rank]]),
                mask,
                reduction=reduction,
                max_response_length=8,
                num_tokens=denom.num_tokens,
                num_responses=denom.num_responses,
            )
            dist.all_reduce(loss)
            golden[reduction] = loss
        rows = slice(0, 2) if rank == 0 else slice(2, 6)
        result = {"adv": adv, "golden": golden, "losses": _losses(_batch(), rows)}
        result["merged"] = _merged_stats(rank)
        torch.save(result, Path(out_dir) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    tmp = tmp_path_factory.mktemp("gloo")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    mp.spawn(_worker, args=(2, str(tmp / "init"), str(tmp)), nprocs=2, join=True)
    return [torch.load(tmp / f"rank{r}.pt") for r in range(2)]


def test_group_split_over_two_ranks(two_ranks):
    adv = torch.cat([two_ranks[0]["adv"], two_ranks[1]["adv"]])
    assert torch.equal(adv, torch.tensor([1.0, -1, 1, 1, -1, -1, 1, -1]))


def test_reductions_over_two_ranks_match_golden(two_ranks):
    want = {"token_mean": 2.5, "response_mean": 2.0, "fixed_budget": 1.25}
    for rank in two_ranks:
        got = {k: round(v.item(), 6) for k, v in rank["golden"].items()}
        assert got == want


def test_loss_and_gradient_over_two_ranks_equal_one_process(two_ranks):
    single = _losses(_batch(), slice(0, 6))
    for reduction in REDUCTIONS:
        loss = (
            two_ranks[0]["losses"][f"{reduction}/loss"]
            + two_ranks[1]["losses"][f"{reduction}/loss"]
        )
        torch.testing.assert_close(loss, single[f"{reduction}/loss"], rtol=0, atol=1e-12)
        grad = torch.cat([r["losses"][f"{reduction}/grad"] for r in two_ranks])
        torch.testing.assert_close(grad, single[f"{reduction}/grad"], rtol=0, atol=1e-12)


def test_merged_stats_weigh_a_rank_without_loss_tokens_by_zero(two_ranks):
    rank1 = two_ranks[1]["merged"]["rank1"]
    for rank in two_ranks:
        merged = rank["merged"]["one_rank"]
        assert merged["loss/tokens"] == 8.0
        for key in ("loss/clip_frac_low", "loss/clip_frac_high", "loss/ratio_mean"):
            assert merged[key] == pytest.approx(rank1[key]), key  # rank 0 adds nothing
        assert merged["loss/ratio_min"] == pytest.approx(rank1["loss/ratio_min"])
        # no loss token on any rank: only the sums (a mean over nothing is not written)
        assert set(rank["merged"]["no_rank"]) == {"loss/total", "loss/tokens", "loss/responses"}
