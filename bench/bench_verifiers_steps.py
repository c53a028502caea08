"""Step (process) verifier figures, measured in one run (docs/verifiers.md, docs/results/).

1. GSM8K test: every reference solution (share of annotated steps ``<<a=b>>`` judged valid,
   solutions/s with 2 pool workers) and copies with one annotated result altered in the
   annotation and the text (+1, +2 or +10): recall of INVALID at the altered step, precision
   (flagged steps that are the altered one).
2. The hand-written MATH-style set (``tests/verifiers/data/steps_math_style.py``: LaTeX
   operators, operator words, markdown, mixed numbers): share of steps with a claim judged
   valid, and recall/precision of INVALID on copies with one result altered.
3. The kinds table (``tests/verifiers/data/steps_kinds.py``, issue 28: alignment
   environments, approximations, inequalities, number words, "of", roots, LaTeX thousands,
   money, units, markdown): rows whose every step verdict is as written, and recall/precision
   of INVALID over its steps.
4. MATH-500 reference solutions (real LaTeX, all 500): steps, steps judged valid, and the
   steps flagged INVALID (each printed: the references are correct, so a flag is either an
   error in the reference or a false flag).
"""

from __future__ import annotations

import concurrent.futures as cf
import importlib.util
import json
import random
import re
import time
from pathlib import Path

from grpo.services.tasks.datasets import data_dir
from grpo.v1 import common_pb2
from grpo.verifiers.sdk import PoolSettings
from grpo.verifiers.steps import StepsConfig, StepsVerifier

__all__ = ["main"]

_ANNOTATED = re.compile(r"<<([^<>=]*)=([^<>]*)>>(\$?)(-?[\d.]+)")
_DATA = Path(__file__).resolve().parents[1] / "tests" / "verifiers" / "data"
_LETTER = {
    common_pb2.STEP_STATUS_VALID: "V",
    common_pb2.STEP_STATUS_INVALID: "I",
    common_pb2.STEP_STATUS_UNVERIFIABLE: "U",
}


def _data_module(name: str):  # type: ignore[no-untyped-def]
    """Load a hand-written data module of the tests (they are not an installed package)."""
    spec = importlib.util.spec_from_file_location(name, _DATA / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rows(path: Path) -> list[dict[str, object]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _verifier() -> StepsVerifier:
    return StepsVerifier(StepsConfig(pool=PoolSettings(workers=2, timeout_s=10)))


def _score_all(v: StepsVerifier, texts: list[str]) -> list[common_pb2.Score]:
    with cf.ThreadPoolExecutor(4) as ex:
        return list(ex.map(lambda t: v.verify(common_pb2.Task(), t), texts))


def _alter(solution: str, rng: random.Random) -> tuple[str, int] | None:
    matches = [m for m in _ANNOTATED.finditer(solution) if m.group(2) == m.group(4)]
    if not matches:
        return None
    m = rng.choice(matches)
    wrong = str(int(float(m.group(2))) + rng.choice([1, 2, 10]))
    text = (
        f"{solution[: m.start()]}<<{m.group(1)}={wrong}>>{m.group(3)}{wrong}{solution[m.end() :]}"
    )
    return text, m.start()


def _steps(gsm8k: list[dict[str, object]]) -> None:
    solutions = [str(r["answer"]) for r in gsm8k]
    with _verifier() as v:

        def run(texts: list[str]) -> list[common_pb2.Score]:
            return _score_all(v, texts)

        start = time.perf_counter()
        scores = run(solutions)
        wall = time.perf_counter() - start
        annotated = [
            st.status
            for text, sc in zip(solutions, scores, strict=True)
            for st in sc.steps
            if "<<" in text[st.char_start : st.char_end]
        ]
        valid = sum(s == common_pb2.STEP_STATUS_VALID for s in annotated)
        steps = sum(len(s.steps) for s in scores)
        print(
            f"steps: GSM8K test reference solutions: {len(solutions)} solutions, {steps} steps, "
            f"{len(solutions) / wall:.1f} solutions/s"
        )
        print(
            f"steps: annotated steps valid: {valid}/{len(annotated)} = {valid / len(annotated):.2%}"
        )
        rng = random.Random(0)
        altered = [a for a in (_alter(s, rng) for s in solutions) if a is not None]
        scores = run([a[0] for a in altered])
        hits = flagged = 0
        for (_, at), sc in zip(altered, scores, strict=True):
            invalid = [st for st in sc.steps if st.status == common_pb2.STEP_STATUS_INVALID]
            flagged += len(invalid)
            hits += any(st.char_start <= at < st.char_end for st in invalid)
        print(
            f"steps: altered copies: {len(altered)}; recall {hits}/{len(altered)} = "
            f"{hits / len(altered):.2%}; precision {hits}/{flagged} = {hits / flagged:.2%}"
        )


def _steps_math_style() -> None:
    data = _data_module("steps_math_style")
    solutions, copies = data.SOLUTIONS, data.altered(seed=0)
    config = StepsConfig(pool=PoolSettings(workers=2, timeout_s=10))
    with StepsVerifier(config) as v, cf.ThreadPoolExecutor(4) as ex:
        scores = list(ex.map(lambda t: v.verify(common_pb2.Task(), t), solutions))
        altered_scores = list(ex.map(lambda c: v.verify(common_pb2.Task(), c[0]), copies))
    claimed = [
        st.status
        for text, sc in zip(solutions, scores, strict=True)
        for st in sc.steps
        if "=" in text[st.char_start : st.char_end]
    ]
    valid = sum(s == common_pb2.STEP_STATUS_VALID for s in claimed)
    hits = flagged = 0
    for (_, at, _end), sc in zip(copies, altered_scores, strict=True):
        invalid = [st for st in sc.steps if st.status == common_pb2.STEP_STATUS_INVALID]
        flagged += len(invalid)
        hits += any(st.char_start <= at < st.char_end for st in invalid)
    print(
        f"steps: MATH-style set: {len(solutions)} solutions; steps with a claim valid "
        f"{valid}/{len(claimed)} = {valid / len(claimed):.2%}"
    )
    print(
        f"steps: MATH-style altered copies: {len(copies)}; recall {hits}/{len(copies)} = "
        f"{hits / len(copies):.2%}; precision {hits}/{flagged} = {hits / max(flagged, 1):.2%}"
    )


def _steps_kinds() -> None:
    rows = _data_module("steps_kinds").ROWS
    with _verifier() as v:
        scores = _score_all(v, [r.text for r in rows])
    got = ["".join(_LETTER[st.status] for st in sc.steps) for sc in scores]
    right = sum(g == r.expect for g, r in zip(got, rows, strict=True))
    pairs = [
        (want, have)
        for g, r in zip(got, rows, strict=True)
        if len(g) == len(r.expect)
        for want, have in zip(r.expect, g, strict=True)
    ]
    hits = sum(w == h == "I" for w, h in pairs)
    wanted = sum(w == "I" for w, _ in pairs)
    flagged = sum(h == "I" for _, h in pairs)
    print(
        f"steps: kinds table: {len(rows)} rows ({len(pairs)} steps), every verdict right "
        f"{right}/{len(rows)} = {right / len(rows):.2%}; INVALID recall {hits}/{wanted} = "
        f"{hits / max(wanted, 1):.2%}, precision {hits}/{flagged} = {hits / max(flagged, 1):.2%}"
    )
    for g, r in zip(got, rows, strict=True):
        if g != r.expect:
            print(f"  kinds: {r.kind}: expected {r.expect}, got {g}: {r.text!r}")


def _steps_math500(math500: list[dict[str, object]]) -> None:
    solutions = [str(r["solution"]) for r in math500]
    with _verifier() as v:
        scores = _score_all(v, solutions)
    steps = sum(len(sc.steps) for sc in scores)
    valid = sum(st.status == common_pb2.STEP_STATUS_VALID for sc in scores for st in sc.steps)
    flagged = [
        (text[st.char_start : st.char_end], st.detail)
        for text, sc in zip(solutions, scores, strict=True)
        for st in sc.steps
        if st.status == common_pb2.STEP_STATUS_INVALID
    ]
    print(
        f"steps: MATH-500 reference solutions: {len(solutions)} solutions, {steps} steps, "
        f"valid {valid}, flagged invalid {len(flagged)}"
    )
    for text, detail in flagged:
        print(f"  flagged: {text[:120]!r} ({detail[:80]})")


def main() -> None:
    """Print the four groups of figures (module docstring)."""
    root = data_dir()
    _steps(_rows(root / "gsm8k" / "test.jsonl"))
    _steps_math_style()
    _steps_kinds()
    _steps_math500(_rows(root / "math500" / "test.jsonl"))


if __name__ == "__main__":
    main()
