"""The math outcome check as one function that runs inside a worker process.

:func:`check_answer` does extraction, normalization, parsing and comparison, so everything
that may be slow on hostile input is bounded by the worker pool's hard wall-clock limit. It
returns plain data (status, reward, extracted answer, detail) that crosses the process pipe.
Multiple-choice golds (one letter A-E, optionally in parentheses) are compared with the
answer's leading letter before any parsing, so ``(B) 42`` matches gold ``B``.
"""

from __future__ import annotations

import logging
import re

from grpo.v1 import common_pb2
from grpo.verifiers.math.equivalence import AnswerParseError, answers_equivalent
from grpo.verifiers.math.extract import UnclosedBoxError, extract_answer
from grpo.verifiers.math.normalize import normalize_answer

__all__ = ["CheckResult", "check_answer"]

CheckResult = tuple[int, float, str, str]
"""(``SCORE_STATUS_*`` value, reward, normalized extracted answer, detail)."""

# math-verify warns on every call that its own timeout is disabled: we enforce ours outside.
logging.getLogger("math_verify").setLevel(logging.ERROR)
logging.getLogger("latex2sympy2_extended").setLevel(logging.ERROR)


_CHOICE_GOLD = re.compile(r"^\(?([A-Ea-e])\)?$")
_CHOICE_ANSWER = re.compile(r"^\(?([A-Ea-e])\)?(?=$|[\s.:,;])")


def _choice(gold: str, answer: str) -> bool | None:
    """Multiple choice: when gold is one letter A-E, compare it with the answer's leading letter.

    Returns None when gold is not a choice letter or the answer does not start with one.
    """
    gold_letter = _CHOICE_GOLD.match(gold)
    answer_letter = _CHOICE_ANSWER.match(answer)
    if gold_letter is None or answer_letter is None:
        return None
    return gold_letter.group(1).upper() == answer_letter.group(1).upper()


def _gold_text(gold: str) -> str:
    """Gold may be bare LaTeX or contain a ``\\boxed{}``; return its normalized answer."""
    if "\\boxed" in gold or "\\fbox" in gold:
        found = extract_answer(gold)
        if found is not None:
            gold = found.text
    return normalize_answer(gold)


def check_answer(gold: str, response: str, rel_tol: float) -> CheckResult:
    """Score ``response`` against ``gold``: 1.0 when its final answer is equivalent, else 0.0.

    Args:
        gold: the reference answer (LaTeX or plain text, may be boxed).
        response: the model's response.
        rel_tol: relative tolerance for decimals (see ``equivalence``).

    Returns:
        ``(status, reward, extracted, detail)``: ``OK`` with reward 1/0; ``NO_ANSWER`` (no
        final answer, or an unclosed ``\\boxed{``); ``PARSE_ERROR`` (gold or answer not
        parsable, nesting too deep); ``RUNTIME_ERROR`` (sympy raised); ``INTERNAL`` (the gold
        answer normalizes to nothing: a task error, so the reward is missing, not 0).
    """
    try:
        found = extract_answer(response)
    except UnclosedBoxError as exc:
        return common_pb2.SCORE_STATUS_NO_ANSWER, 0.0, "", str(exc)
    if found is None:
        return common_pb2.SCORE_STATUS_NO_ANSWER, 0.0, "", "no final answer found"
    answer = normalize_answer(found.text)
    if not answer:
        return common_pb2.SCORE_STATUS_NO_ANSWER, 0.0, "", f"empty answer ({found.rule})"
    gold_norm = _gold_text(gold)
    if not gold_norm:
        return common_pb2.SCORE_STATUS_INTERNAL, 0.0, answer, "gold answer is empty"
    choice = _choice(gold_norm, answer)
    if choice is not None:
        verdict = "same choice" if choice else "different choice"
        return common_pb2.SCORE_STATUS_OK, float(choice), answer, f"{found.rule}: {verdict}"
    try:
        gold_ok = answers_equivalent(gold_norm, answer, rel_tol)
    except (AnswerParseError, RecursionError) as exc:
        return common_pb2.SCORE_STATUS_PARSE_ERROR, 0.0, answer, f"{found.rule}: {exc}"[:500]
    except Exception as exc:
        detail = f"{found.rule}: {type(exc).__name__}: {exc}"[:500]
        return common_pb2.SCORE_STATUS_RUNTIME_ERROR, 0.0, answer, detail
    verdict = "equivalent" if gold_ok else "not equivalent"
    return common_pb2.SCORE_STATUS_OK, float(gold_ok), answer, f"{found.rule}: {verdict}"
