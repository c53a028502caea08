"""The shipped jobs' rewards are unchanged by issue 27's extraction redesign.

1,000 generated arithmetic completions (``7+8=15,4+3+1=8:85`` and what a learning policy
makes of it) and 1,000 GSM8K-format solutions (``#### 72`` and its variations), both from
``data/format_rows.py``, are scored by the check a worker runs (with the task's prompt, as
the verifier passes it). Every reward (and whether it is a verdict) must equal the one
recorded in ``data/format_rewards.json`` by the code before the redesign (commit named in
the file), except the three rows of ``CHANGED``: truncated completions the old code
rewarded by taking an operand (a false positive, fixed on purpose). The rows' sha256 is
recorded too, so a changed generator fails here instead of comparing other rows.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from data.format_rows import arith_rows, digest, gsm8k_rows

from grpo.services.runtime.score_status import VERDICT_STATUSES
from grpo.verifiers.math.check import check_answer

RECORDED = json.loads((Path(__file__).parent / "data" / "format_rewards.json").read_text())
# The only rewards that changed, each a completion cut short that never states its answer:
# the old last-number rule took an operand of the unfinished computation and, by chance, it
# equalled the gold (issue 27, kind 1: a number guessed from inside something else).
CHANGED = {
    ("arith", 52): ("3", "0+3=", "1", "0"),  # ends in "=": the 3 is an operand
    ("arith", 614): ("0", "0*1=0,0*80=0,0*0=0,0*6000=0,0+0=0,0+0=0,", "1", "0"),  # mid-steps
    ("arith", 811): ("0", "7*0", "1", "0"),  # the product written, never computed
}


def _codes(rows: list[tuple[str, str, str]]) -> str:
    out = []
    for gold, response, prompt in rows:
        status, reward, _, _ = check_answer(gold, response, prompt=prompt)
        out.append(("1" if reward == 1 else "0") if status in VERDICT_STATUSES else "m")
    return "".join(out)


def _check(name: str, rows: list[tuple[str, str, str]]) -> None:
    recorded = RECORDED[name]
    assert (len(rows), digest(rows)) == (recorded["rows"], recorded["sha256"])
    codes = _codes(rows)
    changed = {
        (name, i): (*rows[i][:2], recorded["rewards"][i], c)
        for i, c in enumerate(codes)
        if c != recorded["rewards"][i]
    }
    assert changed == {k: v for k, v in CHANGED.items() if k[0] == name}
    assert codes.count("1") > 300 and codes.count("0") > 100  # both kinds of verdict occur


def test_arithmetic_job_rewards_unchanged() -> None:
    _check("arith", arith_rows(1000, seed=0))


def test_gsm8k_rewards_unchanged(data_dir: Path) -> None:
    lines = (data_dir / "gsm8k" / "train.jsonl").read_text(encoding="utf-8").splitlines()
    solutions = [json.loads(line)["answer"] for line in lines if line.strip()]
    _check("gsm8k", gsm8k_rows(solutions, 1000, seed=0))


@pytest.mark.parametrize("name", ["arith", "gsm8k"])
def test_recording_holds_both_verdicts(name: str) -> None:
    rewards = RECORDED[name]["rewards"]
    assert len(rewards) == 1000 and set(rewards) <= {"0", "1", "m"}
