"""Issue 27's kind tables, ours against math-verify, per kind.

Two hand-written tables of ``(kind, gold, response, expected)`` rows, ``expected`` being what
is right:

- ``tests/verifiers/data/extraction_kinds.py``: the ten fault kinds of issue 27 (130 rows,
  written with the extraction redesign of 2026-12-04);
- ``tests/verifiers/data/forms_kinds.py``: new cases of the same ten kinds and of four more
  (unit conversions, number words in prose, a function written for an expression gold,
  commas inside a gold's brackets), written on 2026-12-05 before the code was changed.

Ours is ``MathVerifier`` with one worker process (default config: lenient format, the MATH
approximation rule); math-verify 0.9 is ``verify(parse("$gold$"), parse(response))`` in this
process, an exception counting as 0. Printed per kind: rows, share right, false positives
(reward 1 where 0 is right) and false negatives of each; then the totals and every row ours
gets wrong. Verdicts are deterministic; the run takes a few seconds.
"""

from __future__ import annotations

import logging

from bench.bench_verifiers_math import _data_module
from grpo.v1 import common_pb2
from grpo.verifiers.math import MathConfig, MathVerifier
from grpo.verifiers.sdk import PoolSettings

__all__ = ["kinds_table", "main"]

TABLES = {
    "extraction_kinds": "Fault kinds of issue 27 (extraction_kinds.py)",
    "forms_kinds": "Issue 27's kinds, second table (forms_kinds.py)",
}


def kinds_table(module: str, title: str) -> dict[str, tuple[int, int, int, int, int]]:
    """Score one table with both verifiers and print it.

    Returns:
        ``{kind: (rows, ours right, ours false positives, math-verify right, math-verify
        false positives)}``.
    """
    from math_verify import parse, verify

    data = _data_module(module)
    rows = data.ROWS

    def direct(gold: str, response: str) -> float:
        try:
            return float(verify(parse(f"${gold}$"), parse(response)))
        except Exception:
            return 0.0

    with MathVerifier(MathConfig(pool=PoolSettings(workers=1, timeout_s=10))) as verifier:
        ours = []
        for r in rows:
            score = verifier.verify(common_pb2.Task(gold_answer=r.gold), r.response)
            ours.append(score.reward if score.status == common_pb2.SCORE_STATUS_OK else 0.0)
    mv = [direct(r.gold, r.response) for r in rows]
    print(f"{title}: {len(rows)} rows")
    print(
        f"{'kind':<18} {'rows':>5} {'ours':>8} {'math-verify':>12} {'ours FP/FN':>11} "
        f"{'mv FP/FN':>9}"
    )
    figures: dict[str, tuple[int, int, int, int, int]] = {}
    for kind in data.KINDS:
        idx = [i for i, r in enumerate(rows) if r.kind == kind]
        cells = []
        for rewards in (ours, mv):
            right = sum(rewards[i] == rows[i].expected for i in idx)
            fp = sum(rewards[i] == 1 and rows[i].expected == 0 for i in idx)
            fn = sum(rewards[i] != 1 and rows[i].expected == 1 for i in idx)
            cells.append((right, fp, fn))
        figures[kind] = (len(idx), cells[0][0], cells[0][1], cells[1][0], cells[1][1])
        print(
            f"{kind:<18} {len(idx):>5} {cells[0][0] / len(idx):>8.1%} "
            f"{cells[1][0] / len(idx):>12.1%} {cells[0][1]:>5}/{cells[0][2]:<5} "
            f"{cells[1][1]:>3}/{cells[1][2]:<3}"
        )
    for label, rewards in (("ours", ours), ("math-verify", mv)):
        right = sum(x == r.expected for x, r in zip(rewards, rows, strict=True))
        fp = sum(x == 1 and r.expected == 0 for x, r in zip(rewards, rows, strict=True))
        wrong = sum(r.expected == 0 for r in rows)
        print(
            f"  {label}: {right}/{len(rows)} right ({right / len(rows):.1%}), {fp} false "
            f"positives ({fp / len(rows):.1%} of all rows, {fp}/{wrong} of wrong answers)"
        )
    below = [k for k, f in figures.items() if f[1] < f[3]]
    print(f"  kinds where ours is below math-verify: {', '.join(below) or 'none'}")
    for x, r in zip(ours, rows, strict=True):
        if x != r.expected:
            print(f"  ours wrong: [{r.kind}] gold {r.gold!r}, {r.response[:70]!r}: {x}")
    return figures


def main() -> None:
    """Print both tables (module docstring)."""
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    for module, title in TABLES.items():
        kinds_table(module, title)
        print()


if __name__ == "__main__":
    main()
