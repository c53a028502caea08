"""The math verifier on real model outputs, judged by hand (issue 27).

``data/real/adjudicated.jsonl`` holds rows of the real-output corpus (``data/real_corpus.py``)
whose truth was decided by reading the response: every disagreement between ours and
math-verify, and a random sample. This test runs our verifier over them and compares.

It is a ratchet: ``data/real/known_wrong.txt`` lists the adjudicated rows the current
verifier gets wrong, and the set of wrong rows must equal it exactly. A row fixed by a change
must be removed from the list (the test says which), and a row newly wrong fails the test.

The corpus itself is not committed (``data/real/PROVENANCE.md``): the verifier part runs when
it is built (``scripts/build_real_corpus.py``) or placed in ``$GRPO_DATA_DIR/real``, and is
skipped, saying so, otherwise. The adjudication's own checks always run.
"""

from __future__ import annotations

import concurrent.futures as cf
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "data"))

import real_corpus as rc

from grpo.v1 import common_pb2
from grpo.verifiers.math import MathVerifier


def _source(row_id: str) -> str:
    return row_id.split(":", 1)[0]


def test_adjudication_is_well_formed() -> None:
    judged = rc.load_adjudication()  # raises on a bad truth, kind, reason or repeated id
    assert len(judged) >= 168
    known = rc.load_known_wrong()
    assert known <= set(judged), sorted(known - set(judged))[:10]
    assert all(len(j.digest) == 16 for j in judged.values())


def test_verifier_matches_adjudicated_truth(math_verifier: MathVerifier) -> None:
    folder = rc.corpus_dir()
    if folder is None:
        pytest.skip(
            "real-output corpus not built (scripts/build_real_corpus.py, or "
            "$GRPO_DATA_DIR/real): its adjudicated rows were not run"
        )
    rows = {r["id"]: r for r in rc.load_corpus(folder)}
    present = {r["source"] for r in rows.values()}
    judged = {i: j for i, j in rc.load_adjudication().items() if _source(i) in present}
    missing = sorted(i for i in judged if i not in rows)
    assert not missing, f"adjudicated rows absent from the built corpus: {missing[:10]}"
    stale = sorted(
        i for i, j in judged.items() if j.digest != rc.digest(rows[i]["gold"], rows[i]["response"])
    )
    assert not stale, f"the corpus holds other text than was judged: {stale[:10]}"

    ids = sorted(judged)

    def reward(i: str) -> int:
        row = rows[i]
        score = math_verifier.verify(common_pb2.Task(gold_answer=row["gold"]), row["response"])
        return int(score.status == common_pb2.SCORE_STATUS_OK and score.reward == 1.0)

    with cf.ThreadPoolExecutor(4) as ex:
        verdicts = dict(zip(ids, ex.map(reward, ids), strict=True))
    wrong = {i for i in ids if verdicts[i] != judged[i].truth}
    known = {i for i in rc.load_known_wrong() if _source(i) in present}
    fixed = sorted(known - wrong)
    new = sorted(wrong - known)

    def show(i: str) -> str:
        j = judged[i]
        return f"{i} (truth {j.truth}, ours {verdicts[i]}, {j.kind}: {j.reason})"

    assert not new and not fixed, (
        f"{len(new)} adjudicated rows newly wrong:\n  "
        + "\n  ".join(show(i) for i in new)
        + f"\n{len(fixed)} rows now right (remove them from {rc.KNOWN_WRONG.name}):\n  "
        + "\n  ".join(fixed)
    )
