"""Math verifier benchmark and dataset figures, measured side by side in one run.

0. The equivalence table (``tests/verifiers/data/math_equivalence.py``, hand-written rows by
   category): accuracy per category, false positives (reward 1 where 0 is right) and
   false negatives of ours (``MathVerifier``, one worker process, one caller) and of
   math-verify called directly (``verify(parse("$gold$"), parse(response))`` in this
   process's main thread, its own 5 s signal timeouts), and answers/s of both on the same
   rows, interleaved in chunks of 50 rows; also without the ``pathological`` rows, where
   math-verify spends its timeouts. (Issue 27's kind tables: ``bench_verifiers_kinds``.)
1. Speed on MATH-500-style pairs: every MATH-500 reference solution (its own ``\\boxed{}``)
   against its own gold and against the next problem's gold (1,000 pairs). Measured:
   answers/s and per-answer latency p50/p99 of

   - ``direct``: math-verify's ``verify(parse(gold), parse(solution))`` called in this
     process's main thread (its own signal-based timeouts; no isolation), one at a time;
   - ``pool x1``: ``MathVerifier.verify`` with one worker process, one caller thread (the
     cost of isolation: pipe round trip, pickling, extraction/normalization);
   - ``pool x2``: two workers, four caller threads (throughput on this 2-core machine);

   run interleaved in chunks of 100 pairs (so load from other jobs falls on all alike),
   printed with the ratio to ``direct``, plus how often each path gives reward 1 on the
   own-gold pairs and on the shifted pairs.
2. Dataset figures (docs/verifiers.md): GSM8K test reference solutions vs their own final
   answers; MATH-500 ``\\boxed{gold}`` vs gold and answer i vs gold i+1 (all 500).

The step verifier's figures are in ``bench_verifiers_steps``.
"""

from __future__ import annotations

import concurrent.futures as cf
import importlib.util
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path

from grpo.services.tasks.datasets import data_dir
from grpo.v1 import common_pb2
from grpo.verifiers.math import MathConfig, MathVerifier
from grpo.verifiers.sdk import PoolSettings

__all__ = ["main"]

Pair = tuple[str, str]  # (gold, response)


_DATA = Path(__file__).resolve().parents[1] / "tests" / "verifiers" / "data"


def _data_module(name: str):  # type: ignore[no-untyped-def]
    """Load a hand-written data module of the tests (they are not an installed package)."""
    spec = importlib.util.spec_from_file_location(name, _DATA / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _table() -> None:
    from math_verify import parse, verify

    rows = _data_module("math_equivalence").ROWS
    pairs = [(r.gold, r.response) for r in rows]

    def direct(pair: Pair) -> float:
        try:
            return float(verify(parse(f"${pair[0]}$"), parse(pair[1])))
        except Exception:
            return 0.0

    ours_rewards: list[float] = []
    mv_rewards: list[float] = []
    ours_s: list[float] = []
    mv_s: list[float] = []
    with MathVerifier(MathConfig(pool=PoolSettings(workers=1, timeout_s=10))) as verifier:

        def ours(pair: Pair) -> float:
            score = verifier.verify(common_pb2.Task(gold_answer=pair[0]), pair[1])
            return score.reward if score.status == common_pb2.SCORE_STATUS_OK else 0.0

        chunk = 50
        for start in range(0, len(pairs), chunk):
            part = pairs[start : start + chunk]
            for fn, rewards, times in ((ours, ours_rewards, ours_s), (direct, mv_rewards, mv_s)):
                for pair in part:
                    t0 = time.perf_counter()
                    rewards.append(fn(pair))
                    times.append(time.perf_counter() - t0)
    categories = sorted({r.category for r in rows})
    print(f"Equivalence table: {len(rows)} rows, {len(categories)} categories")
    print(
        f"{'category':<16} {'rows':>5} {'ours':>8} {'math-verify':>12} {'ours FP/FN':>11} "
        f"{'mv FP/FN':>9}"
    )

    def figures(idx: list[int]) -> tuple[str, str, str, str]:
        out = []
        for rewards in (ours_rewards, mv_rewards):
            right = sum(rewards[i] == rows[i].expected for i in idx)
            fp = sum(rewards[i] == 1 and rows[i].expected == 0 for i in idx)
            fn = sum(rewards[i] != 1 and rows[i].expected == 1 for i in idx)
            out += [f"{right / len(idx):.1%}", f"{fp}/{fn}"]
        return out[0], out[2], out[1], out[3]

    for category in categories:
        idx = [i for i, r in enumerate(rows) if r.category == category]
        ours_acc, mv_acc, ours_err, mv_err = figures(idx)
        print(f"{category:<16} {len(idx):>5} {ours_acc:>8} {mv_acc:>12} {ours_err:>11} {mv_err:>9}")
    ours_acc, mv_acc, ours_err, mv_err = figures(list(range(len(rows))))
    print(f"{'overall':<16} {len(rows):>5} {ours_acc:>8} {mv_acc:>12} {ours_err:>11} {mv_err:>9}")
    ordinary = [i for i, r in enumerate(rows) if r.category != "pathological"]
    for label, idx in (("all rows", list(range(len(rows)))), ("without pathological", ordinary)):
        ours_rate = len(idx) / sum(ours_s[i] for i in idx)
        mv_rate = len(idx) / sum(mv_s[i] for i in idx)
        print(
            f"answers/s on {label} ({len(idx)}): ours (1 worker) {ours_rate:.1f}, "
            f"math-verify direct {mv_rate:.1f}, ratio {ours_rate / mv_rate:.2f}x"
        )


def _rows(path: Path) -> list[dict[str, object]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _timed(
    fn: Callable[[Pair], float], pairs: list[Pair], threads: int
) -> tuple[list[float], float, list[float]]:
    """Run ``fn`` on every pair; return rewards, wall seconds, per-call latencies (s)."""
    latencies: list[float] = []

    def one(pair: Pair) -> float:
        t0 = time.perf_counter()
        reward = fn(pair)
        latencies.append(time.perf_counter() - t0)
        return reward

    start = time.perf_counter()
    if threads == 1:
        rewards = [one(p) for p in pairs]
    else:
        with cf.ThreadPoolExecutor(threads) as ex:
            rewards = list(ex.map(one, pairs))
    return rewards, time.perf_counter() - start, latencies


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[int(q * (len(ordered) - 1))]


def _speed(math500: list[dict[str, object]]) -> None:
    from math_verify import parse, verify

    golds = [str(r["answer"]) for r in math500]
    solutions = [str(r["solution"]) for r in math500]
    n = len(golds)
    own = [(golds[i], solutions[i]) for i in range(n)]
    shifted = [(golds[(i + 1) % n], solutions[i]) for i in range(n)]
    pairs = own + shifted

    def direct(pair: Pair) -> float:
        return float(verify(parse(f"${pair[0]}$"), parse(pair[1])))

    # Interleave the paths chunk by chunk so that load from other jobs on this shared machine
    # falls on all of them alike.
    x1 = MathVerifier(MathConfig(pool=PoolSettings(workers=1, timeout_s=10)))
    x2 = MathVerifier(MathConfig(pool=PoolSettings(workers=2, timeout_s=10)))

    def ours(verifier: MathVerifier) -> Callable[[Pair], float]:
        def run(pair: Pair) -> float:
            score = verifier.verify(common_pb2.Task(gold_answer=pair[0]), pair[1])
            return score.reward if score.status == common_pb2.SCORE_STATUS_OK else -1.0

        return run

    paths: list[tuple[str, Callable[[Pair], float], int]] = [
        ("direct", direct, 1),
        ("pool x1", ours(x1), 1),
        ("pool x2", ours(x2), 4),
    ]
    results: dict[str, tuple[list[float], float, list[float]]] = {
        label: ([], 0.0, []) for label, _, _ in paths
    }
    chunk = 100
    try:
        for start in range(0, len(pairs), chunk):
            for label, fn, threads in paths:
                rewards, wall, lat = _timed(fn, pairs[start : start + chunk], threads)
                old_rewards, old_wall, old_lat = results[label]
                results[label] = (old_rewards + rewards, old_wall + wall, old_lat + lat)
    finally:
        x1.close()
        x2.close()
    base_rate = len(pairs) / results["direct"][1]
    print(f"MATH-500-style pairs: {len(pairs)} (own gold {n}, shifted gold {n})")
    print(
        f"{'path':<9} {'answers/s':>10} {'ratio':>7} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'own=1':>6} {'shift=1':>8} {'failed':>7}"
    )
    for label, (rewards, wall, lat) in results.items():
        rate = len(pairs) / wall
        own_ok = sum(r == 1.0 for r in rewards[:n])
        shift_ok = sum(r == 1.0 for r in rewards[n:])
        failed = sum(r < 0 for r in rewards)
        print(
            f"{label:<9} {rate:>10.1f} {rate / base_rate:>6.2f}x {_pct(lat, 0.5) * 1e3:>8.2f} "
            f"{_pct(lat, 0.99) * 1e3:>8.2f} {own_ok:>6} {shift_ok:>8} {failed:>7}"
        )


def _math_datasets(gsm8k: list[dict[str, object]], math500: list[dict[str, object]]) -> None:
    golds = [str(r["answer"]) for r in math500]
    gsm_pairs = [
        (str(r["answer"]).rpartition("####")[2].strip().replace(",", ""), str(r["answer"]))
        for r in gsm8k
    ]
    with MathVerifier(MathConfig(pool=PoolSettings(workers=2, timeout_s=10))) as v:

        def share(pairs: list[Pair]) -> tuple[int, int]:
            with cf.ThreadPoolExecutor(4) as ex:
                scores = list(
                    ex.map(lambda p: v.verify(common_pb2.Task(gold_answer=p[0]), p[1]), pairs)
                )
            return sum(
                s.status == common_pb2.SCORE_STATUS_OK and s.reward == 1 for s in scores
            ), len(pairs)

        right, total = share(gsm_pairs)
        print(
            f"GSM8K test reference solutions vs own answer: {right}/{total} = {right / total:.2%}"
        )
        right, total = share([(g, rf"\boxed{{{g}}}") for g in golds])
        print(f"MATH-500 \\boxed{{gold}} vs gold: {right}/{total} = {right / total:.2%}")
        right, total = share([(golds[(i + 1) % 500], rf"\boxed{{{golds[i]}}}") for i in range(500)])
        print(f"MATH-500 answer i vs gold i+1: {right}/{total} = {right / total:.2%}")


def main() -> None:
    """Print the table, the speed table and the dataset figures (module docstring)."""
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    root = data_dir()
    math500 = _rows(root / "math500" / "test.jsonl")
    gsm8k = _rows(root / "gsm8k" / "test.jsonl")
    _table()
    _speed(math500)
    _math_datasets(gsm8k, math500)


if __name__ == "__main__":
    main()
