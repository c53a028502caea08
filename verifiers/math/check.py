"""The math outcome check as one function that runs inside a worker process.

:func:`check_answer` does extraction, normalization, the answer model and the comparison, so
everything that may be slow on hostile input is bounded by the worker pool's hard wall-clock
limit. It returns plain data (status, reward, extracted answer, detail) that crosses the
process pipe. Multiple-choice golds (one capital letter A-E, or a letter in parentheses) are
compared with the answer when it is one single choice (``B``, ``(B) 42``, ``B.``, ``option
B``) before any parsing; a hedge (``A, B``, ``A or B``) is no choice and a lowercase gold
(``e``, ``a``) is a symbol (Euler's number, a variable), never a choice.

What is a verdict and what is undecided (docs/verifiers.md):

- ``NO_ANSWER`` (verdict, 0): no final answer, an empty one, an unclosed last ``\\boxed{``;
- ``PARSE_ERROR`` (verdict, 0): the answer cannot be read (unbalanced, over
  ``answer.MAX_ANSWER_CHARS``, more than ``answer.MAX_ITEMS`` items, nested too deep, a leaf
  no parser reads, ``2 4/3``);
- ``OK`` (verdict): reward 1 or 0 (0 also when both sides carry known units that differ,
  ``72^\\circ F`` vs ``72^\\circ C``: ``grpo.verifiers.math.units``, and for a percent
  against an amount in known units, ``5\\%`` vs ``\\$5``); also for a value over
  ``arith.MAX_DIGITS`` digits whose bounds prove it differs from the other side
  (``9^{9^{9^9}}`` vs 1 is 0, decided without computing it);
- ``UNDECIDED`` (missing): two well-formed values the verifier could not compare (a value too
  large to compute whose bounds do not prove a difference, as ``10^{10^{10}} - 10^{10^{10}}``
  vs 0, which is never judged wrong; a sympy failure); the verifier answers the same for a
  time limit or memory cap hit in the worker;
- ``INTERNAL`` (missing): the gold answer is empty or unreadable (a task error).
"""

from __future__ import annotations

import logging
import re

from grpo.v1 import common_pb2
from grpo.verifiers.math.answer import (
    Answer,
    AnswerSyntaxError,
    Equation,
    Items,
    Scalar,
    Tuple,
    read_answer,
)
from grpo.verifiers.math.compare import AnswerParseError, UndecidedError, answers_equal
from grpo.verifiers.math.extract import FORMATS, UnclosedBoxError, extract_answer
from grpo.verifiers.math.normalize import normalize_with_units, writes_trig_degrees
from grpo.verifiers.math.units import units_conflict

__all__ = ["CheckResult", "check_answer", "read_gold", "read_response", "several_values"]

CheckResult = tuple[int, float, str, str]
"""(``SCORE_STATUS_*`` value, reward, normalized extracted answer, detail)."""

logging.getLogger("math_verify").setLevel(logging.ERROR)
logging.getLogger("latex2sympy2_extended").setLevel(logging.ERROR)

# a gold that says there is no value here: "n/a", "N/A", "see above", "TBD", "?" (a task error,
# never a gold to score against: every response would get a 0 verdict)
_PLACEHOLDER_GOLD = re.compile(
    r"^(?:n\s*/\s*a|n\.\s*a\.?|not\s+applicable|not\s+available|tb[dc]|todo|null|\?+|-+"
    r"|see\s+(?:the\s+)?(?:above|below|solution|explanation|text|answer|figure|working))$",
    re.IGNORECASE,
)
_CHOICE_GOLD = re.compile(r"^(?:\(([A-Ea-e])\)|([A-E]))$")
# one choice letter: "C", "(C)", "C)", "C.", "C:", "option C", "choice (C)"; after the
# delimiter may come that option's text ("(C) 42", "C. 42"), never a bare "C 42" or "C = 5"
_CHOICE_ANSWER = re.compile(
    r"^(?:(?:option|choice|answer)\s*)?"
    r"(?:\(([A-E])\)(?=\s|$)|([A-E])(?:[).:](?=\s|$))?(?=\s*$)|([A-E])[).:](?=\s))(.*)$",
    re.IGNORECASE | re.DOTALL,
)
_CHOICE_LABEL = re.compile(r"^\(?[A-E][.:)]\)?\s+(\S.*)$", re.DOTALL)
_LONE_LETTER = re.compile(r"(?<![A-Za-z\\])[A-Ea-e](?![A-Za-z])")
_OPERATORS = frozenset("+-*/^=<>_")
_COMMAND = re.compile(r"\\[A-Za-z]+")
_OTHER_LETTER = re.compile(r"(?<![A-Za-z\\])[A-E](?![A-Za-z])")


def _choice(gold: str, answer: str) -> bool | None:
    """Multiple choice: gold is one capital letter A-E, or one letter in parentheses ``(b)``.

    The answer must be a single choice (``C``, ``(C)``, ``C)``, ``C.``, ``option C``, the
    delimited forms optionally followed by that option's text). A lowercase gold (``e``,
    ``a``) is a symbol, never a choice. Returns None when gold is not a choice letter or the
    answer is not one single choice (``A, B``, ``A and C``, ``E = 5``): the answer is then
    compared as any other (a list of letters never equals one letter).
    """
    gold_letter = _CHOICE_GOLD.match(gold)
    if gold_letter is None:
        return None
    m = _CHOICE_ANSWER.match(answer.strip())
    if m is None:
        return None
    letter = (m.group(1) or m.group(2) or m.group(3)).upper()
    rest = m.group(4).strip()
    if _OTHER_LETTER.search(rest):
        return None  # "(A) or (B)", "(A) and C": a hedge of several choices
    if rest[:1] in _OPERATORS:
        return None  # "(b) + 1", "(C) = 5": an expression, not the option's text
    return (gold_letter.group(1) or gold_letter.group(2)).upper() == letter


def read_gold(gold: str, degrees: bool = False) -> tuple[str, Answer, frozenset[str]]:
    """The gold answer's normalized text, model and known units (a boxed gold gives its box).

    A gold in number words is its number (``forty-two``, ``seventy two``, ``one hundred and
    five``: ``normalize``'s reading, the same as an answer's). A gold that says there is no
    value (``n/a``, ``see above``, ``TBD``: ``_PLACEHOLDER_GOLD``) is unreadable, never the
    symbols or words it writes.

    Raises:
        AnswerSyntaxError: the gold is empty, unreadable or a placeholder.
    """
    stripped = re.sub(r"\\text\{([^{}]*)\}", r"\1", gold).strip().strip("$").strip()
    if _PLACEHOLDER_GOLD.match(stripped.rstrip(".").strip() or stripped):
        raise AnswerSyntaxError(f"{gold.strip()[:40]!r} is a placeholder, not a value")
    parts = [gold]
    if "\\boxed" in gold or "\\fbox" in gold:
        found = extract_answer(gold, "boxed", several=True)
        if found is not None:
            parts = [t for _, t in found.parts]
    return _model(parts, degrees)


def several_values(gold: Answer) -> bool:
    """The gold is a list of values (several boxes of a response then form one list)."""
    return isinstance(gold, Items) and len(gold.items) > 1


def read_response(
    response: str,
    answer_format: str = "lenient",
    several: bool = False,
    prompt: str = "",
    equation: bool = False,
    degrees: bool = False,
) -> tuple[str, str, Answer, frozenset[str]] | str:
    """The response's (rule, normalized text, model, known units), or why there is no answer.

    Args:
        response: the model's response.
        answer_format: one of ``extract.FORMATS``.
        several: the gold is a list (:func:`several_values`).
        prompt: the task's prompt (a restated sentence is no final statement).
        equation: the gold is an equation (a final statement ``lhs = rhs`` stays whole).
        degrees: a trigonometric function of a bare number is of degrees (``normalize``).

    Raises:
        AnswerSyntaxError: the extracted answer cannot be read into the model.
        AnswerFormatError: an unknown ``answer_format``.
    """
    try:
        found = extract_answer(response, answer_format, several, prompt, equation)
    except UnclosedBoxError as exc:
        return str(exc)
    if found is None:
        return f"no final answer found ({answer_format} format)"
    parts = [t for _, t in found.parts]
    if len(parts) == 1 and (label := _CHOICE_LABEL.match(parts[0])) is not None:
        parts = [label.group(1)]  # "A. 250" against a gold that is no choice: the value
    text, model, units = _model(parts, degrees)
    if found.hedge and (len(parts) == 1 or isinstance(model, Items)):
        # "7, or perhaps 9"; \boxed{3} or \boxed{4} (not two spellings of one value)
        return f"{found.rule}: a hedge, several answers without a choice ({found.text[:80]!r})"
    return found.rule, text, model, units


def _model(parts: list[str], degrees: bool = False) -> tuple[str, Answer, frozenset[str]]:
    """Normalize and read the parts; parts of equal value count once, several make a list.

    Also returns the known units the parts carried (``grpo.verifiers.math.units``).
    """
    normalized = [normalize_with_units(p, degrees) for p in parts]
    units = frozenset().union(*(u for _, u in normalized))
    texts = list(dict.fromkeys(t for t, _ in normalized if t))
    if not texts:
        raise AnswerSyntaxError("empty answer")
    if len(texts) == 1:
        return texts[0], read_answer(texts[0]), units
    models = [read_answer(t) for t in texts]
    if all(_same(models[0], m) for m in models[1:]):
        # \boxed{15\frac{39}{40}} = \boxed{\frac{639}{40}}
        return texts[-1], models[-1], units
    return ", ".join(texts), Items(tuple(models)), units


# what may stand between the boxes of one point: delimiters, a comma or "and", the next
# coordinate's name ("$ and $y = ")
_BETWEEN_COORDINATES = re.compile(
    r"^\}?[\s$,;]*(?:\\[()\]\[])?[\s$,;]*(?:and|\\text\{\s*and\s*\})?[\s$]*(?:\\[()\]\[])?[\s$]*"
    r"(?:([A-Za-z](?:_\{?\w+\}?)?)\s*=\s*)?(?:\\boxed|\\fbox)\s*\{$"
)
# the first coordinate's name, just before its box ("x = \boxed{")
_FIRST_COORDINATE = re.compile(r"([A-Za-z](?:_\{?\w+\}?)?)\s*=\s*(?:\\boxed|\\fbox)\s*\{$")


def _point_of_boxes(
    gold: Tuple,
    read: tuple[str, str, Answer, frozenset[str]],
    response: str,
    answer_format: str,
    prompt: str,
) -> tuple[str, str, Answer, frozenset[str]]:
    """A point asked and one value read: the boxes of one statement, when they hold as many
    plain values as the point has coordinates and only delimiters, ``and`` or the next
    coordinate's name stand between them (``$x = \\boxed{2}$ and $y = \\boxed{-1}$``
    against ``(2, -1)``), the names all different; else ``read`` unchanged (``\\boxed{2} no,
    \\boxed{3}`` is a draft and its correction, ``x = \\boxed{2}, x = \\boxed{3}`` two roots,
    never a point)."""
    if read[0] != "boxed":
        return read
    try:
        found = extract_answer(response, answer_format, True, prompt)
    except UnclosedBoxError:
        return read
    if found is None or found.rule != "boxed" or len(found.parts) != len(gold.items):
        return read
    first = _FIRST_COORDINATE.search(response[max(0, found.parts[0][0] - 40) : found.parts[0][0]])
    names = [first.group(1)] if first is not None else []
    for (p0, t0), (p1, _) in zip(found.parts, found.parts[1:], strict=False):
        between = _BETWEEN_COORDINATES.match(response[p0 + len(t0) : p1].strip())
        if between is None:
            return read
        names += [between.group(1)] if between.group(1) else []
    if len(set(names)) != len(names):
        return read  # $x = \boxed{2}$, $x = \boxed{3}$: two values of x, not a point
    try:
        text, model, units = _model([t for _, t in found.parts])
    except (AnswerSyntaxError, RecursionError):
        return read
    if isinstance(model, Items) and all(isinstance(x, Scalar) for x in model.items):
        return found.rule, text, model, units
    return read


def _percent(a: Answer) -> bool:
    return isinstance(a, Scalar) and a.percent


def _same(a: Answer, b: Answer) -> bool:
    try:
        return answers_equal(a, b)
    except (AnswerParseError, UndecidedError):
        return False


def _gold_key(gold: str) -> str:
    """A short gold's normalized text (``\\boxed{C}``, ``\\text{(C)}`` give ``C``, ``(C)``)."""
    if len(gold) > 40 or _LONE_LETTER.search(gold) is None:
        return gold.strip()  # no choice letter: not worth normalizing twice
    try:
        return read_gold(gold)[0]
    except (AnswerSyntaxError, RecursionError):
        return gold.strip()


def _early_choice(gold: str, response: str, answer_format: str, prompt: str) -> CheckResult | None:
    """A choice gold against a one-part answer, before the answer model reads ``C) 42``.

    None when the gold is no choice letter or the answer is not one single choice.
    """
    if _CHOICE_GOLD.match(gold.strip()) is None:
        return None
    try:
        found = extract_answer(response, answer_format, prompt=prompt)
    except UnclosedBoxError:
        return None
    if found is None or len(found.parts) != 1 or found.hedge:
        return None
    raw = found.parts[0][1]
    if len(set(_OTHER_LETTER.findall(_COMMAND.sub(" ", raw)))) > 1:
        return None  # \text{A}\text{B}: several letters, whatever normalization keeps
    text = normalize_with_units(raw)[0]
    choice = _choice(gold.strip(), text)
    if choice is None:
        return None
    verdict = "same choice" if choice else "different choice"
    return common_pb2.SCORE_STATUS_OK, float(choice), text, f"{found.rule}: {verdict}"


def check_answer(
    gold: str,
    response: str,
    answer_format: str = "lenient",
    rel_tol: float | None = None,
    prompt: str = "",
) -> CheckResult:
    """Score ``response`` against ``gold``: 1.0 when its final answer is equivalent, else 0.0.

    Args:
        gold: the reference answer (LaTeX or plain text, may be boxed).
        response: the model's response.
        answer_format: where the answer must be (``extract.FORMATS``: ``lenient``, ``boxed``,
            ``answer_tag``, ``gsm8k``); a strict format never falls back to guessing.
        rel_tol: None for the MATH convention on approximations (a decimal never equals a
            value no finite decimal writes unless the gold is itself a decimal), else the
            relative tolerance of the opt-in rule (``compare``).
        prompt: the task's prompt; a sentence of the response restated from it is not a
            final statement.

    Returns:
        ``(status, reward, extracted, detail)`` with the statuses of the module docstring;
        ``INTERNAL`` for an unknown ``answer_format`` or a gold that cannot be read (task
        errors).
    """
    if answer_format not in FORMATS:
        detail = f"task answer_format {answer_format!r} is not one of {', '.join(FORMATS)}"
        return common_pb2.SCORE_STATUS_INTERNAL, 0.0, "", detail
    early = _early_choice(_gold_key(gold), response, answer_format, prompt)
    if early is not None:
        return early
    # one side writes \tan 15^\circ: a bare \tan 15 on either side is of degrees too
    degrees = writes_trig_degrees(gold) or writes_trig_degrees(response)
    try:
        _, gold_model, gold_units = read_gold(gold, degrees)
    except (AnswerSyntaxError, RecursionError) as exc:
        return common_pb2.SCORE_STATUS_INTERNAL, 0.0, "", f"gold answer: {exc}"[:500]
    try:
        read = read_response(
            response,
            answer_format,
            several_values(gold_model),
            prompt,
            isinstance(gold_model, Equation) and not gold_model.variable,
            degrees,
        )
    except AnswerSyntaxError as exc:
        return common_pb2.SCORE_STATUS_PARSE_ERROR, 0.0, "", f"answer: {exc}"[:500]
    except RecursionError:
        return common_pb2.SCORE_STATUS_PARSE_ERROR, 0.0, "", "answer nested too deeply"
    if isinstance(read, str):
        status = common_pb2.SCORE_STATUS_NO_ANSWER
        return status, 0.0, "", read
    if isinstance(gold_model, Tuple) and isinstance(read[2], Scalar | Equation):
        read = _point_of_boxes(gold_model, read, response, answer_format, prompt)
    rule, answer_text, answer, answer_units = read
    if units_conflict(gold_units, answer_units):
        detail = f"{rule}: different units ({', '.join(sorted(answer_units))})"
        return common_pb2.SCORE_STATUS_OK, 0.0, answer_text, detail
    if (_percent(answer) and gold_units) or (_percent(gold_model) and answer_units):
        detail = f"{rule}: a percent against an amount in units"  # 5% vs $5, 5 cm
        return common_pb2.SCORE_STATUS_OK, 0.0, answer_text, detail
    try:
        same = answers_equal(gold_model, answer, rel_tol)
    except AnswerParseError as exc:
        if exc.side == "gold":
            return common_pb2.SCORE_STATUS_INTERNAL, 0.0, answer_text, f"{rule}: {exc}"[:500]
        return common_pb2.SCORE_STATUS_PARSE_ERROR, 0.0, answer_text, f"{rule}: {exc}"[:500]
    except RecursionError:
        detail = f"{rule}: expression nested too deeply"
        return common_pb2.SCORE_STATUS_PARSE_ERROR, 0.0, answer_text, detail
    except UndecidedError as exc:
        return common_pb2.SCORE_STATUS_UNDECIDED, 0.0, answer_text, f"{rule}: {exc}"[:500]
    verdict = "equivalent" if same else "not equivalent"
    return common_pb2.SCORE_STATUS_OK, float(same), answer_text, f"{rule}: {verdict}"
