"""Ours against math-verify on real model outputs (issue 27), side by side in one run.

The corpus is real (response, gold) pairs from public evaluation dumps and GRPO rollout
logs (``tests/verifiers/data/real_corpus.py``; built by ``scripts/build_real_corpus.py``).
Each row is scored by

- **ours**: ``MathVerifier`` (``grpo.verifiers.math``, the verifier ``grpo score math``
  runs), one worker process, one caller, ``verify`` per row; reward 1 only for status OK
  with reward 1;
- **math-verify 0.9**: its documented API, ``verify(parse("$" + gold + "$"), parse(response))``
  in this process's main thread (its own 5 s signal timeouts); True is reward 1.

Both run interleaved in chunks of 50 rows, so load from other jobs falls on both alike.

Printed:

1. the agreement rate, and every disagreement (id, gold, both verdicts and extractions, the
   adjudicated truth and reason, or UNADJUDICATED);
2. with the committed adjudication (``tests/verifiers/data/real/adjudicated.jsonl``): each
   verifier's accuracy and false positives (reward 1 where the answer is wrong), weighted
   back to the corpus: disagreements count as adjudicated (all of them), agreements by the
   adjudicated random sample inside them, scaled to the number of agreements (a ratio
   estimate; its standard error from the sample is printed). False positives are given as
   a share of all pairs and of the pairs whose answer is wrong;
3. answers/s of both over all rows and over ordinary rows (neither side took 1 s or more),
   with the ratio.

``GRPO_BENCH_DIFF_OUT=FILE`` also writes every row's verdicts as JSON lines (for adjudicating).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import math
import os
import sys
import time
from collections import Counter
from pathlib import Path

from grpo.v1 import common_pb2
from grpo.verifiers.math import MathConfig, MathVerifier
from grpo.verifiers.sdk import PoolSettings

__all__ = ["main", "weighted"]

_DATA = Path(__file__).resolve().parents[1] / "tests" / "verifiers" / "data"
ORDINARY_S = 1.0
"""A row is ordinary for the speed figure when neither verifier took this long on it."""


def _real():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("real_corpus", _DATA / "real_corpus.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["real_corpus"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def weighted(
    verdicts: dict[str, int], truth: dict[str, int], agree: set[str], sample: set[str]
) -> dict[str, float]:
    """Accuracy and false positives of one verifier weighted back to the corpus.

    Args:
        verdicts: reward (0/1) of the verifier per row id, every corpus row.
        truth: adjudicated truth per row id (at least every disagreement and every
            agreement in ``sample``).
        agree: ids where both verifiers agree.
        sample: ids of the random sample (any rows; only its agreements are used).

    Returns:
        ``accuracy``, ``fp_share`` (false positives / all rows), ``fp_rate_wrong`` (false
        positives / rows whose answer is wrong), ``wrong_share`` and ``accuracy_se`` (the
        standard error of the accuracy from the agreement sample), all fractions; ``nan``
        when a needed set is empty.

    Raises:
        KeyError: a disagreement or a sampled agreement has no adjudication.
    """
    n = len(verdicts)
    disagree = [i for i in verdicts if i not in agree]
    sampled = [i for i in verdicts if i in agree and i in sample]
    if not sampled:
        return dict.fromkeys(
            ("accuracy", "fp_share", "fp_rate_wrong", "wrong_share", "accuracy_se"), math.nan
        )
    scale = len(agree) / len(sampled)

    def part(ids: list[str], w: float) -> tuple[float, float, float]:
        right = sum(verdicts[i] == truth[i] for i in ids) * w
        fp = sum(verdicts[i] == 1 and truth[i] == 0 for i in ids) * w
        wrong = sum(truth[i] == 0 for i in ids) * w
        return right, fp, wrong

    r1, f1, w1 = part(disagree, 1.0)
    r2, f2, w2 = part(sampled, scale)
    p = sum(verdicts[i] == truth[i] for i in sampled) / len(sampled)
    # the agreements' share is estimated from a sample: its binomial error, scaled to n
    se = len(agree) * math.sqrt(p * (1 - p) / len(sampled)) / n
    wrong = w1 + w2
    return {
        "accuracy": (r1 + r2) / n,
        "fp_share": (f1 + f2) / n,
        "fp_rate_wrong": (f1 + f2) / wrong if wrong else math.nan,
        "wrong_share": wrong / n,
        "accuracy_se": se,
    }


def _mv_extract(pred: list[object]) -> str:
    return str(pred[-1]) if pred else ""


def main() -> None:
    real = _real()
    folder = real.corpus_dir()
    if folder is None:
        print(
            "verifiers_diff: no real-output corpus found (build it with "
            "scripts/build_real_corpus.py, or set GRPO_REAL_CORPUS); skipped"
        )
        return
    from math_verify import parse, verify

    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    rows = real.load_corpus(folder)
    judged = real.load_adjudication()
    print(f"Corpus: {len(rows)} rows from {folder}")
    for source, count in sorted(Counter(r["source"] for r in rows).items()):
        print(f"  {source:<44} {count:>5}")

    ours: dict[str, int] = {}
    ours_x: dict[str, str] = {}
    ours_status: dict[str, str] = {}
    mv: dict[str, int] = {}
    mv_x: dict[str, str] = {}
    t_ours: dict[str, float] = {}
    t_mv: dict[str, float] = {}
    config = MathConfig(pool=PoolSettings(workers=1, timeout_s=10))
    with MathVerifier(config) as verifier:
        chunk = 50
        for start in range(0, len(rows), chunk):
            part = rows[start : start + chunk]
            for row in part:
                t0 = time.perf_counter()
                score = verifier.verify(common_pb2.Task(gold_answer=row["gold"]), row["response"])
                t_ours[row["id"]] = time.perf_counter() - t0
                ok = score.status == common_pb2.SCORE_STATUS_OK and score.reward == 1.0
                ours[row["id"]] = int(ok)
                ours_x[row["id"]] = score.extracted_answer
                ours_status[row["id"]] = common_pb2.ScoreStatus.Name(score.status)
            for row in part:
                t0 = time.perf_counter()
                try:
                    target = parse(row["response"])
                    hit = verify(parse(f"${row['gold']}$"), target)
                except Exception:
                    target, hit = [], False
                t_mv[row["id"]] = time.perf_counter() - t0
                mv[row["id"]] = int(bool(hit))
                mv_x[row["id"]] = _mv_extract(target)

    by_id = {r["id"]: r for r in rows}
    agree = {i for i in ours if ours[i] == mv[i]}
    sample = {i for i in ours if real.in_sample(i)}
    print(
        f"\nAgreement: {len(agree)}/{len(rows)} = {len(agree) / len(rows):.2%} "
        f"(ours reward 1 on {sum(ours.values())}, math-verify on {sum(mv.values())})"
    )
    stale = [
        i
        for i, j in judged.items()
        if i in by_id and j.digest != real.digest(by_id[i]["gold"], by_id[i]["response"])
    ]
    if stale:
        print(f"WARNING: {len(stale)} adjudicated rows judged another text: {stale[:5]}")
    truth = {i: j.truth for i, j in judged.items() if i in by_id and i not in stale}

    disagreements = sorted(i for i in ours if i not in agree)
    print(f"\nDisagreements ({len(disagreements)}): id | gold | ours | math-verify | truth")
    for i in disagreements:
        r = by_id[i]
        j = judged.get(i)
        verdict = f"truth {j.truth} [{j.kind}] {j.reason}" if i in truth and j else "UNADJUDICATED"
        print(
            f"  {i} | gold {r['gold']!r} | ours {ours[i]} {ours_status[i]} {ours_x[i][:40]!r}"
            f" | mv {mv[i]} {mv_x[i][:40]!r} | {verdict}"
        )

    missing = [i for i in disagreements if i not in truth]
    missing_sample = sorted(i for i in agree & sample if i not in truth)
    print(
        f"\nAdjudicated: {len(truth)} rows; sample {len(sample)} rows "
        f"({len(agree & sample)} agreements); unadjudicated disagreements {len(missing)}, "
        f"unadjudicated sampled agreements {len(missing_sample)}"
    )
    if missing or missing_sample:
        print("Weighted figures need every disagreement and sampled agreement adjudicated.")
    else:
        print(
            f"\n{'weighted to the corpus':<24} {'accuracy':>16} {'FP / all':>9} {'FP / wrong':>11}"
        )
        figures = {}
        for name, verdicts in (("ours", ours), ("math-verify", mv)):
            w = weighted(verdicts, truth, agree, sample)
            figures[name] = w
            print(
                f"{name:<24} {w['accuracy']:>9.2%} ±{w['accuracy_se']:.2%} "
                f"{w['fp_share']:>9.2%} {w['fp_rate_wrong']:>11.2%}"
            )
        print(f"(answers wrong, weighted: {figures['ours']['wrong_share']:.2%} of the pairs)")
        for name, verdicts in (("ours", ours), ("math-verify", mv)):
            errors = Counter(
                (judged[i].kind, "FP" if verdicts[i] else "FN")
                for i in truth
                if verdicts[i] != truth[i]
            )
            listed = ", ".join(f"{k} {e} {c}" for (k, e), c in sorted(errors.items()))
            print(f"{name} errors on adjudicated rows by kind: {listed or 'none'}")

    ordinary = [i for i in ours if t_ours[i] < ORDINARY_S and t_mv[i] < ORDINARY_S]
    print("\nAnswers/s (one row at a time, interleaved chunks of 50):")
    for label, ids in (("all rows", list(ours)), ("ordinary rows", ordinary)):
        a = len(ids) / sum(t_ours[i] for i in ids)
        b = len(ids) / sum(t_mv[i] for i in ids)
        print(
            f"  {label:<14} ({len(ids):>5}): ours {a:8.1f}  math-verify {b:8.1f}  "
            f"ratio {a / b:.2f}x"
        )
    out = os.environ.get("GRPO_BENCH_DIFF_OUT")
    if out:
        with open(out, "w", encoding="utf-8") as fh:
            for i in ours:
                fh.write(
                    json.dumps(
                        {
                            "id": i,
                            "ours": ours[i],
                            "ours_status": ours_status[i],
                            "ours_extracted": ours_x[i],
                            "mv": mv[i],
                            "mv_extracted": mv_x[i],
                            "sample": i in sample,
                            "t_ours": t_ours[i],
                            "t_mv": t_mv[i],
                        },
                        ensure_ascii=False,
                    )
                    + "\n"
                )
        print(f"rows written to {out}")


if __name__ == "__main__":
    main()
