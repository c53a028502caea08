# ruff: noqa: E501 - a table of hand-written rows; one row per line reads best
r"""The math equivalence table: gold / response / expected reward, written by hand.

Each row imitates what real models write (Qwen: "the final answer is $\boxed{..}$"; DeepSeek-R1:
``<think>..</think>`` then "**Final Answer**" and ``\[\boxed{..}\]``; Llama: "The final answer
is: $\boxed{..}$"; GSM8K-tuned models: ``#### n``; chat-template debris such as
``<|im_end|>``, ``<|eot_id|>``), grouped by category. ``expected`` is what is *right*, not what
any verifier says. Every example of issue 11 has a row (marked ``# issue``). Run by
``tests/verifiers/test_math_table.py`` and ``python -m bench verifiers_math`` (which also runs
math-verify on the same rows).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["ROWS", "Row"]


class Row(NamedTuple):
    category: str
    gold: str
    response: str
    expected: float


def _q(x: str) -> str:  # Qwen style
    return f"Let me compute step by step.\n\nSo the result follows.\n\nTherefore, the final answer is $\\boxed{{{x}}}$."


def _r1(x: str) -> str:  # DeepSeek-R1 style
    return f"<think>\nOkay, let me work through it... maybe \\boxed{{0}}? No.\n</think>\n\nWe solve it.\n\n**Final Answer**\n\\[\n\\boxed{{{x}}}\n\\]"


def _ll(x: str) -> str:  # Llama style
    return f"## Step 1: Set up\nWe set up the problem.\n\n## Step 2: Solve\nWe solve it.\n\nThe final answer is: $\\boxed{{{x}}}$<|eot_id|>"


def _b(x: str) -> str:
    return f"\\boxed{{{x}}}"


R = Row
ROWS: list[Row] = [
    # ---- integers ----
    R("integers", "42", _q("42"), 1),
    R("integers", "42", _r1("42"), 1),
    R("integers", "42", _ll("42"), 1),
    R("integers", "42", _q("43"), 0),
    R("integers", "-7", _b("-7"), 1),
    R("integers", "-7", _b("7"), 0),
    R("integers", "0", _b("0"), 1),
    R("integers", "0", _b("-0"), 1),
    R(
        "integers",
        "18",
        "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs.\nShe makes 9 * 2 = $<<9*2=18>>18.\n#### 18",
        1,
    ),
    R("integers", "18", "She makes 9 * 2 = 18 dollars.\n#### 19", 0),
    R("integers", "3", "#### 3<|endoftext|>", 1),
    R("integers", "100", _b("100.0"), 1),
    R("integers", "100", _b("100.00"), 1),
    R("integers", "100", _b("10^2"), 1),
    R("integers", "100", _b("1e2"), 1),
    R("integers", "1024", _b("2^{10}"), 1),
    R("integers", "120", _b("5!"), 1),
    R("integers", "120", _b("6!"), 0),
    R("integers", "25", "So she has 25 marbles.", 1),
    R("integers", "25", "So she has 52 marbles.", 0),
    R("integers", "7", "7+8=15,4+3+1=8:7", 1),
    R("integers", "85", "7+8=15,4+3+1=8:85", 1),
    R("integers", "86", "7+8=15,4+3+1=8:85", 0),
    R("integers", "5", _b("05"), 1),
    R("integers", "5", _b("+5"), 1),
    # ---- fractions ----
    R("fractions", r"\frac{1}{2}", _b(r"\frac12"), 1),  # issue 4
    R("fractions", "1/2", _b("0.5"), 1),
    R("fractions", "1/2", _b(r"\dfrac{1}{2}"), 1),
    R("fractions", "1/2", _b(r"\frac{1}{3}"), 0),
    R("fractions", r"\frac{3}{4}", _b(r"\tfrac{3}{4}"), 1),
    R("fractions", r"\frac{3}{4}", _b("3/4"), 1),
    R("fractions", r"\frac{3}{4}", _b(r"\frac{6}{8}"), 1),
    R("fractions", r"\frac{3}{4}", _b(r"\frac{4}{3}"), 0),
    R("fractions", r"\frac{3}{4}", _b("0.75"), 1),
    R("fractions", r"-\frac{2}{5}", _b(r"\frac{-2}{5}"), 1),
    R("fractions", r"-\frac{2}{5}", _b(r"-\frac{2}{5}"), 1),
    R("fractions", r"-\frac{2}{5}", _b(r"\frac{2}{5}"), 0),
    R("fractions", r"\frac{5}{9}", _b(r"\frac 59"), 1),
    R("fractions", r"\frac{9}{19}", _b(r"\frac9{19}"), 1),
    R("fractions", r"\frac{270}{7}", _b(r"\frac{270}7"), 1),
    R("fractions", r"\frac{1}{3}", _b("0.333"), 0),
    R("fractions", r"\frac{1}{3}", _b("0.3333333333"), 1),
    R("fractions", r"\frac{2}{3}", _q(r"\frac{2}{3}"), 1),
    R("fractions", r"\frac{2}{3}", _r1(r"\dfrac{2}{3}"), 1),
    R("fractions", r"\frac{2}{3}", _ll(r"\frac{3}{2}"), 0),
    R("fractions", r"\frac{1}{2^{99}}", _b(r"\frac{1}{2^{98}}"), 0),  # issue 4
    R("fractions", r"\frac{1}{2004!}", _b(r"\frac{1}{2006!}"), 0),  # issue 4
    R("fractions", r"\frac{1}{2004!}", _b(r"\frac{1}{2004!}"), 1),
    R("fractions", r"\frac{7}{12}", "The probability is $\\frac{7}{12}$.", 1),
    R("fractions", r"\frac{7}{12}", "The probability is $\\frac{5}{12}$.", 0),
    R("fractions", r"\frac{a}{b}", _b(r"\frac{a}{b}"), 1),
    # ---- decimals ----
    R("decimals", "2.5", _b("2.50"), 1),
    R("decimals", "2.5", _b(r"\frac{5}{2}"), 1),
    R("decimals", "2.5", _b("2.05"), 0),
    R("decimals", "0.25", _b(".25"), 1),
    R("decimals", "0.25", _b(r"\frac{1}{4}"), 1),
    R("decimals", "3.14", _b(r"\pi"), 0),
    R("decimals", "1.5", "The answer is 1.5.", 1),
    R("decimals", "1.5", "The answer is 1.5 hours.", 1),
    R("decimals", "1.5", "The answer is 15.", 0),
    R("decimals", "0.1", _b("0.10000001"), 1),
    R("decimals", "0.1", _b("0.1001"), 0),
    R("decimals", "1000000", _b("1000001"), 0),
    R("decimals", "12.75", "Each ticket costs $12.75.", 1),
    R("decimals", "12.75", "Each ticket costs $12.57.", 0),
    R("decimals", "-0.5", _b("-.5"), 1),
    R("decimals", "0.0001", _b("10^{-4}"), 1),
    R("decimals", "0.0001", _b("1e-4"), 1),
    R("decimals", "0.0001", _b("1e-5"), 0),
    R("decimals", "2.718", _b("e"), 0),
    R("decimals", "4.0", _b("4"), 1),
    # ---- thousands separators and money ----
    R("thousands", "1000", "so we get 1,000", 1),  # issue 4
    R("thousands", "115000", _b("115,000"), 1),  # issue 4
    R("thousands", "1234", _b(r"1,\!234"), 1),  # issue
    R("thousands", "1234", _b("1{,}234"), 1),  # issue
    R("thousands", "1000000", _b("1 000 000"), 1),  # SI-style groups (a new user's case)
    R("thousands", "1000000", "The answer is 1 000 000.", 1),
    R("thousands", "1000", _b("1 000 000"), 0),
    R("thousands", "12", _b("12 345"), 0),
    R("thousands", "12", _b(r"\approx 12"), 1),  # a hedged value of the right number
    R("thousands", "12", _b(r"\approx 13"), 0),
    R("thousands", "1234", _b(r"1\,234"), 1),
    R("thousands", "2450", "The laptop costs $2,450.", 1),  # issue
    R("thousands", "2450", "The laptop costs $2,450 in total.", 1),
    R("thousands", "1234567", _b("1,234,567"), 1),
    R("thousands", "1234567", _b("1,234,576"), 0),
    R("thousands", "0,1", _b("0,1"), 1),  # issue 4: a list, not 1 or 01
    R("thousands", "0,1", _b("1"), 0),  # issue 4
    R("thousands", "0,1", _b("01"), 0),
    R("thousands", "1000", _b(r"\$1,000"), 1),
    R("thousands", "1000", "He saved \\$1,000 in total.", 1),
    R("thousands", "10000", "#### 10,000", 1),
    R("thousands", "10000", "#### 1,000", 0),
    R("thousands", "3500", "Therefore, the total cost is $\\$3{,}500$.", 1),
    R("thousands", "1234.5", _b("1,234.5"), 1),
    R("thousands", "12", _b("12,000"), 0),
    R("thousands", "1000", _b("1.000"), 0),
    # ---- units and scale words ----
    R("units", "12", _b(r"12 \text{ cm}"), 1),  # issue
    R("units", "3000", _b(r"3 \text{ thousand}"), 1),  # issue
    R("units", "5", _b(r"5 \text{ cm}"), 1),
    R("units", "5", _b(r"5\text{ cm}^2"), 1),
    R("units", "5", _b(r"5 \mathrm{m}"), 1),
    R("units", "12", _b("12 dollars"), 1),
    R("units", "12", _b("12 apples"), 1),
    R("units", "12", _b(r"13 \text{ apples}"), 0),
    R("units", "30", _b(r"30^\circ"), 1),
    R("units", r"30^\circ", _b("30"), 1),
    R("units", r"30^\circ", _b(r"30^{\circ}"), 1),
    R("units", r"30^\circ", _b("60"), 0),
    R("units", "2500000", _b(r"2.5 \text{ million}"), 1),
    R("units", "2500000", "The city has 2.5 million people.", 1),
    R("units", "40", "He drives 40 miles per hour.\n#### 40", 1),
    R("units", "40", _b(r"40 \text{ mph}"), 1),
    R("units", "7", _b(r"7 \text{ hours}"), 1),
    R("units", "7", _b(r"\text{7 hours}"), 1),
    R("units", r"\frac{1}{2}", _b(r"\frac{1}{2} \text{ inch}"), 1),
    R("units", "3", _b(r"3 \text{ or } 4"), 0),
    # ---- percent ----
    R("percent", r"10\%", _b("10"), 1),
    R("percent", "10", _b(r"10\%"), 1),
    R("percent", r"50\%", _b("0.5"), 1),
    R("percent", r"50\%", _b("50"), 1),
    R("percent", r"50\%", _b("5"), 0),
    R("percent", "25", "The discount is 25%.", 1),
    R("percent", "25", "The answer is 25%.", 1),
    R("percent", "25", "The answer is 20%.", 0),
    R("percent", r"12.5\%", _b(r"12.5\%"), 1),
    R("percent", r"12.5\%", _b(r"\frac{1}{8}"), 1),
    R("percent", "0.2", _b(r"20\%"), 1),
    R("percent", "20", _b(r"20 \%"), 1),
    R("percent", "20", _b(r"21\%"), 0),
    R("percent", "75", _q(r"75\%"), 1),
    R("percent", "75", _r1(r"75\%"), 1),
    # ---- sets ----
    R("sets", r"\{1,2\}", _b(r"\{2,1\}"), 1),
    R("sets", r"\{1,2\}", _b(r"\{1,3\}"), 0),
    R("sets", r"\{1,2\}", _b(r"\{1,2,3\}"), 0),
    R("sets", r"\{1,2\}", _b("1, 2"), 1),
    R("sets", "1, 2", _b(r"\{1, 2\}"), 1),
    R("sets", r"\varnothing", _b(r"\emptyset"), 1),  # issue
    R("sets", r"\emptyset", _b(r"\{\}"), 1),  # issue
    R("sets", r"\varnothing", _b(r"\{\}"), 1),  # issue
    R("sets", r"\emptyset", _b("0"), 0),
    R("sets", r"\emptyset", _b(r"\{0\}"), 0),
    R("sets", r"\{-1, 1\}", _b(r"\{1, -1\}"), 1),
    R("sets", r"\{-1, 1\}", _b(r"\{1\}"), 0),
    R("sets", r"\{\frac{1}{2}, 3\}", _b(r"\{3, 0.5\}"), 1),
    R("sets", r"\{5\}", _b("5"), 1),
    R("sets", "2, 3, 4", _b("4,3,2"), 1),
    R("sets", "2, 3, 4", _b("2,3"), 0),
    R("sets", "2, 3, 4", _b("2,3,4,4"), 0),
    R("sets", "2, 2, 3", _b("2, 3, 3"), 0),
    R("sets", r"1 \pm \sqrt{2}", _b(r"1+\sqrt{2}, 1-\sqrt{2}"), 1),
    R("sets", r"1 \pm \sqrt{2}", _b(r"1+\sqrt{2}"), 0),
    R("sets", r"\{a, b\}", _b(r"\{b, a\}"), 1),
    # ---- intervals ----
    R("intervals", "(1,2]", _b("(1,2)"), 0),  # issue 4
    R("intervals", "[1,2]", _b("[1,2]"), 1),
    R("intervals", "[1,2]", _b("[1,2)"), 0),
    R("intervals", "[1,2]", _b("[2,1]"), 0),
    R("intervals", r"(-\infty, 3]", _b(r"(-\infty,3]"), 1),
    R("intervals", r"(-\infty, 3]", _b(r"(-\infty,3)"), 0),
    R("intervals", r"(-\infty, 3]", _b(r"x \le 3"), 1),
    R("intervals", r"(-\infty, 3]", _b(r"x \leq 3"), 1),
    R("intervals", r"(-\infty, 3]", _b("x < 3"), 0),
    R("intervals", r"(3, \infty)", _b("x > 3"), 1),
    R("intervals", r"(3, \infty)", _b(r"x \ge 3"), 0),
    R("intervals", r"[2, 5)", _b(r"2 \le x < 5"), 1),
    R("intervals", r"[2, 5)", _b(r"2 < x < 5"), 0),
    R("intervals", r"(-\infty, 1) \cup (2, \infty)", _b(r"(2,\infty)\cup(-\infty,1)"), 1),
    R("intervals", r"(-\infty, 1) \cup (2, \infty)", _b(r"(-\infty,1]\cup(2,\infty)"), 0),
    R("intervals", r"(-\infty, 1) \cup (2, \infty)", _b(r"(-\infty,1)"), 0),
    R("intervals", r"\left[ \frac{1}{2}, 3 \right]", _b(r"[0.5, 3]"), 1),
    R("intervals", r"(0, \infty)", _b(r"(0,\infty)"), 1),
    R("intervals", r"(0, \infty)", _b(r"(0, +\infty)"), 1),
    R("intervals", r"[-2, 7]", _r1(r"[-2, 7]"), 1),
    R("intervals", r"[-2, 7]", _q(r"[-7, 2]"), 0),
    R("intervals", r"x \in [1, 2]", _b("[1,2]"), 1),
    # ---- tuples and points ----
    R("tuples", "(1,2)", _b("(2,1)"), 0),  # issue 4
    R("tuples", "(1,2)", _b("(1,2)"), 1),
    R("tuples", "(1, 2)", _b(r"\left(1, 2\right)"), 1),
    R("tuples", r"(3, \frac{\pi}{2})", _b(r"\left( 3, \frac{\pi}{2} \right)"), 1),
    R("tuples", r"(3, \frac{\pi}{2})", _b(r"(3, \frac{\pi}{3})"), 0),
    R("tuples", "(1, 2, 3)", _b("(1,2,3)"), 1),
    R("tuples", "(1, 2, 3)", _b("(1,3,2)"), 0),
    R("tuples", "(1, 2, 3)", _b("(1,2)"), 0),
    R("tuples", "(-1, 4)", _b("(-1,4)"), 1),
    R("tuples", "(-1, 4)", _b("(1,4)"), 0),
    R("tuples", "(0.5, 2)", _b(r"(\frac{1}{2}, 2)"), 1),
    R("tuples", "(2, 3)", "The point is $(2, 3)$.", 1),
    R("tuples", "(2, 3)", "The point is $(3, 2)$.", 0),
    R("tuples", "(6, -2)", _r1("(6,-2)"), 1),
    R("tuples", "(6, -2)", _ll("(6,2)"), 0),
    R("tuples", "(1,2)", _b(r"\{1,2\}"), 0),
    R("tuples", "(1, 2)", _b(r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}"), 1),
    # ---- matrices and vectors ----
    R(
        "matrices",
        r"\begin{pmatrix} 1 \\ -2 \end{pmatrix}",
        _b(r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}"),
        0,
    ),  # issue
    R(
        "matrices",
        r"\begin{pmatrix} 1 \\ -2 \end{pmatrix}",
        _b(r"\begin{pmatrix} 1 \\ -2 \end{pmatrix}"),
        1,
    ),
    R(
        "matrices", r"\begin{pmatrix}1\\2\end{pmatrix}", _b(r"\begin{pmatrix}1\\2\end{pmatrix}"), 1
    ),  # issue 4
    R(
        "matrices", r"\begin{pmatrix}1\\2\end{pmatrix}", _b(r"\begin{pmatrix}2\\1\end{pmatrix}"), 0
    ),  # issue 4
    R(
        "matrices",
        r"\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}",
        _b(r"\begin{pmatrix} 1 & 3 \\ 2 & 4 \end{pmatrix}"),
        0,
    ),  # issue: transposed
    R(
        "matrices",
        r"\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}",
        _b(r"\begin{bmatrix} 1 & 2 \\ 3 & 4 \end{bmatrix}"),
        1,
    ),  # issue
    R(
        "matrices",
        r"\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}",
        _b(r"\begin{pmatrix} 1 & 2 \\ 3 & 5 \end{pmatrix}"),
        0,
    ),
    R(
        "matrices",
        r"\begin{pmatrix} 1 & 2 & 3 \end{pmatrix}",
        _b(r"\begin{pmatrix} 1 \\ 2 \\ 3 \end{pmatrix}"),
        0,
    ),
    R(
        "matrices",
        r"\begin{pmatrix} \frac{1}{2} \\ 0 \end{pmatrix}",
        _b(r"\begin{pmatrix} 0.5 \\ 0 \end{pmatrix}"),
        1,
    ),
    R(
        "matrices",
        r"\begin{pmatrix} 2 & 0 \\ 0 & 2 \end{pmatrix}",
        _b(r"\begin{pmatrix} 2 & 0 \\ 0 & 2 \end{pmatrix}"),
        1,
    ),
    R("matrices", r"\begin{pmatrix} 2 & 0 \\ 0 & 2 \end{pmatrix}", _b("2"), 0),
    R(
        "matrices",
        r"\begin{pmatrix} 3 \\ -1 \\ 2 \end{pmatrix}",
        _r1(r"\begin{pmatrix} 3 \\ -1 \\ 2 \end{pmatrix}"),
        1,
    ),
    R(
        "matrices",
        r"\begin{pmatrix} 3 \\ -1 \\ 2 \end{pmatrix}",
        _q(r"\begin{pmatrix} 3 \\ 1 \\ 2 \end{pmatrix}"),
        0,
    ),
    R("matrices", r"\begin{pmatrix} 3 \\ -1 \\ 2 \end{pmatrix}", _b("(3,-1,2)"), 1),
    R(
        "matrices",
        r"\begin{pmatrix} -1 & 0 \\ 0 & -1 \end{pmatrix}",
        _b(r"\begin{pmatrix} -1 & 0 \\ 0 & 1 \end{pmatrix}"),
        0,
    ),
    R(
        "matrices",
        r"\begin{pmatrix} x \\ 2x \end{pmatrix}",
        _b(r"\begin{pmatrix} x \\ 2x \end{pmatrix}"),
        1,
    ),
    R(
        "matrices",
        r"\begin{pmatrix} \sqrt{2} \\ 1 \end{pmatrix}",
        _b(r"\begin{pmatrix} \sqrt{2} \\ 1 \end{pmatrix}"),
        1,
    ),
    R(
        "matrices",
        r"\begin{pmatrix} 1 & 0 \\ 0 & 1 \end{pmatrix}",
        _b(r"\begin{pmatrix} 1 & 0 \\ 1 & 0 \end{pmatrix}"),
        0,
    ),
    # ---- equations ----
    R("equations", "x=3", _b("3"), 1),
    R("equations", "3", _b("x=3"), 1),
    R("equations", "5", _b("y = 5"), 1),  # issue
    R("equations", "4", _b("2x=4"), 0),  # issue
    R("equations", "16", _b("x^2=16"), 0),  # issue
    R("equations", "n=2, 3, 4", _b("n=1, 2, 3"), 0),  # issue 4
    R("equations", "n=2, 3, 4", _b("n=2, 3, 4"), 1),
    R("equations", "2, 3, 4", _b("n=4, 3, 2"), 1),
    R("equations", "y = 2x + 3", _b("y=2x+3"), 1),
    R("equations", "y = 2x + 3", _b("y=3+2x"), 1),
    R("equations", "y = 2x + 3", _b("y=2x-3"), 0),
    R("equations", "y = 2x + 3", _b("2y=4x+6"), 1),
    R("equations", "y = 2x + 3", _b("2x+3"), 1),
    R("equations", r"x = \frac{1}{2}", _b("x=0.5"), 1),
    R("equations", r"x = \frac{1}{2}", _b("y=0.5"), 1),
    R("equations", "x = 2", _b("x=-2"), 0),
    R("equations", r"x^2 + y^2 = 25", _b("x^2+y^2=25"), 1),
    R("equations", r"x^2 + y^2 = 25", _b("y^2+x^2-25=0"), 1),
    R("equations", r"x^2 + y^2 = 25", _b("x^2+y^2=5"), 0),
    R("equations", "k = 7", "So $k = 7$.", 1),
    R("equations", "7", "The answer is $k = 8$.", 0),
    R("equations", r"\theta = \frac{\pi}{4}", _b(r"\frac{\pi}{4}"), 1),
    R("equations", "x_1 = 3", _b("3"), 1),
    R("equations", "6", _b("3+3=6"), 0),
    # ---- several boxes ----
    R("multiple_boxes", "-5, 3", r"the roots are \boxed{3} and \boxed{-5}", 1),  # issue
    R(
        "multiple_boxes", "(1, 2), (3, 4)", r"$\boxed{(1,2)} \text{ and } \boxed{(3,4)}$", 1
    ),  # issue
    R(
        "multiple_boxes", "7", r"So $\boxed{7}$. Checking again, the answer is $\boxed{7}$.", 1
    ),  # issue
    R("multiple_boxes", "3", r"first \boxed{2} then \boxed{3}", 0),
    R("multiple_boxes", "3", r"It is \boxed{3} or \boxed{4}.", 0),
    R("multiple_boxes", "3, 4", r"It is \boxed{3} or \boxed{4}.", 1),
    R("multiple_boxes", "-5, 3", r"the roots are \boxed{3} and \boxed{5}", 0),
    R("multiple_boxes", "-5, 3", r"the roots are \boxed{3}, \boxed{-5} and \boxed{1}", 0),
    R(
        "multiple_boxes",
        r"\frac{639}{40}",
        r"so it is \boxed{15\frac{39}{40}}, i.e. \boxed{\frac{639}{40}}",
        1,
    ),
    R("multiple_boxes", "2", "Wait, maybe \\boxed{3}.\n\n**Final Answer**\n\\boxed{2}", 1),
    R("multiple_boxes", "2", "<think>I guess \\boxed{3}</think>\nThe answer is \\boxed{2}.", 1),
    R("multiple_boxes", "3", "<think>I guess \\boxed{3}</think>\nThe answer is \\boxed{2}.", 0),
    R("multiple_boxes", "1, 2, 3", r"$x=\boxed{1}$, $x=\boxed{2}$, $x=\boxed{3}$", 1),
    R("multiple_boxes", "5", r"\boxed{5}\boxed{5}", 1),
    R("multiple_boxes", "55", r"\boxed{5}\boxed{5}", 0),
    R("multiple_boxes", r"\frac{1}{2}", r"\boxed{0.5} which is \boxed{\frac{1}{2}}", 1),
    R("multiple_boxes", "4, 6", r"$a=\boxed{4}$ and $b=\boxed{6}$", 1),
    R("multiple_boxes", "4", r"$a=\boxed{4}$ and $b=\boxed{6}$", 0),
    # ---- text answers ----
    R("text", r"\text{Evelyn}", _b(r"\text{Evelyn}"), 1),
    R("text", "Evelyn", _b(r"\text{evelyn}"), 1),
    R("text", "Evelyn", "The answer is Evelyn.", 1),
    R("text", "Evelyn", "The answer is Emily.", 0),
    R("text", r"\text{Tuesday}", _b(r"\textbf{Tuesday}"), 1),
    R("text", r"\text{Tuesday}", _b(r"\text{Monday}"), 0),
    R("text", "yes", _b(r"\text{Yes}"), 1),
    R("text", "yes", _b(r"\text{No}"), 0),
    R("text", r"\text{even}", _b(r"\text{odd}"), 0),
    R("text", r"\text{even}", _q(r"\text{even}"), 1),
    R("text", "9", _b(r"\text{Evelyn}"), 0),
    R("text", r"\text{Evelyn}", _b("9"), 0),
    R("text", "13", _b(r"\text{13}"), 1),  # issue 4
    R("text", r"\text{circle}", _b(r"\text{Circle}"), 1),
    R("text", r"\text{circle}", _b(r"\text{ellipse}"), 0),
    R("text", r"\text{New York}", "The answer is New York.", 1),
    # ---- multiple choice ----
    R("choices", "B", "The answer is (B).", 1),
    R("choices", "B", "The answer is (B) 42.", 1),
    R("choices", r"\text{(D)}", _b("d"), 1),
    R("choices", "C", "The answer is (B) 42.", 0),
    R("choices", r"\text{(C)}", _b("B"), 0),
    R("choices", "(A)", _b(r"\text{(A)}"), 1),
    R("choices", "A", "**Answer:** A", 1),
    R("choices", "E", _r1(r"\textbf{(E)}"), 1),
    R("choices", "E", _q("D"), 0),
    R("choices", "D", "The correct option is D.\n\nThe answer is D.", 1),
    # ---- unicode ----
    R("unicode", r"2\sqrt{2}", "the answer is √8", 1),
    R("unicode", r"2\sqrt{2}", _b("2√2"), 1),
    R("unicode", r"\sqrt{x+1}", _b("√(x+1)"), 1),
    R("unicode", r"\infty", _b("∞"), 1),
    R("unicode", "1/2", _b("½"), 1),
    R("unicode", r"\frac{3}{4}", _b("¾"), 1),
    R("unicode", r"1\frac{1}{2}", _b("1½"), 1),
    R("unicode", "5", "\\boxed{5\u200b}", 1),
    R("unicode", "42", "\\boxed{4\u200b2\ufeff}", 1),
    R("unicode", "-2", "The answer is −2.", 1),
    R("unicode", "-2", "The answer is −3.", 0),
    R("unicode", r"\pi", _b("π"), 1),
    R("unicode", r"2\pi", _b("2π"), 1),
    R("unicode", r"30^\circ", _b("30°"), 1),
    R("unicode", "12", _b("１２"), 1),
    R("unicode", "6", _b("2×3"), 1),
    R("unicode", "6", _b("12÷2"), 1),
    R("unicode", "6", _b("12÷3"), 0),
    R("unicode", r"x \le 2", _b("x≤2"), 1),
    # ---- symbolic ----
    R("symbolic", r"x^2+2x+1", _b("(x+1)^2"), 1),
    R("symbolic", r"x^2+2x+1", _b("(x-1)^2"), 0),
    R("symbolic", r"\frac{1+\sqrt{5}}{2}", _b(r"\frac{2}{\sqrt{5}-1}"), 1),
    R("symbolic", r"1-\frac{1}{e}", _b(r"1+\frac{1}{e}"), 0),  # issue 4
    R("symbolic", r"2\sqrt{3}", _b(r"\sqrt{12}"), 1),
    R("symbolic", r"2\sqrt{3}", _b(r"3\sqrt{2}"), 0),
    R("symbolic", r"3\sqrt{3}", _b(r"3\sqrt(3)"), 1),
    R("symbolic", "3", _b(r"3\sqrt(3)"), 0),  # issue: a false positive today
    R("symbolic", r"\frac{\pi}{2}", _b(r"\pi/2"), 1),
    R("symbolic", r"\frac{\pi}{2}", _b("1.5708"), 0),
    R("symbolic", r"\frac{\pi}{2}", _b("1.5707963268"), 1),
    R("symbolic", r"\sqrt{2}", _b(r"\frac{2}{\sqrt{2}}"), 1),
    R("symbolic", r"\sqrt{2}", _b("1.41"), 0),
    R("symbolic", "12", _b("x^5-1"), 0),
    R("symbolic", r"x^5 - 1", _b("12"), 0),
    R("symbolic", r"2x", _b("x+x"), 1),
    R("symbolic", r"2x", _b("2y"), 0),
    R("symbolic", r"\sin^2 x + \cos^2 x", _b("1"), 1),
    R("symbolic", r"\frac{x^2-1}{x-1}", _b("x+1"), 1),
    R("symbolic", r"3+4i", _b("4i+3"), 1),
    R("symbolic", r"3+4i", _b("3-4i"), 0),
    R("symbolic", r"\log_2 8", _b("3"), 1),
    R("symbolic", r"\ln e^2", _b("2"), 1),
    R("symbolic", r"\binom{5}{2}", _b("10"), 1),
    R("symbolic", r"\binom{5}{2}", _b("20"), 0),
    R("symbolic", r"4\pi", _b(r"4 \pi"), 1),
    R("symbolic", r"4\pi", _b(r"\pi 4"), 1),
    R("symbolic", r"4\pi", _b(r"4"), 0),
    R("symbolic", r"\sqrt[3]{2}", _b(r"2^{1/3}"), 1),
    R("symbolic", r"\sqrt[3]{2}", _b(r"2^{1/2}"), 0),
    R("symbolic", r"8e", _b("2e4"), 0),  # issue: e-notation is not 2·e·4
    R("symbolic", r"8e", _b(r"8e"), 1),
    R("symbolic", r"\frac{3\sqrt{3}}{4}", _r1(r"\dfrac{3\sqrt{3}}{4}"), 1),
    R("symbolic", r"\frac{3\sqrt{3}}{4}", _q(r"\frac{3\sqrt{3}}{2}"), 0),
    R("symbolic", r"a+b", _b("b+a"), 1),
    # ---- answer phrases ----
    R("answer_phrases", "12", "The answer is 12 apples.", 1),  # issue
    R("answer_phrases", "12", "So she has 12 apples left.", 1),  # issue
    R("answer_phrases", "4, 6", "The answers are 4 and 6.", 1),  # issue
    R("answer_phrases", "8", "The answer is 8, since 2*4=8.", 1),  # issue
    R("answer_phrases", "5", "The answer is 5 apples.", 1),
    R("answer_phrases", "3", "Final Answer: The final answer is 3. I hope it is correct.", 1),
    R("answer_phrases", "3", "Final Answer: The final answer is 4. I hope it is correct.", 0),
    R("answer_phrases", "2", "The answer is **2**.", 1),
    R("answer_phrases", "18", "So the answer is $18. Done.", 1),
    R("answer_phrases", "42", "**Answer:** 42", 1),
    R("answer_phrases", "42", "Answer: 42", 1),
    R("answer_phrases", "42", "The answer is: 42", 1),
    R("answer_phrases", "42", "Therefore, the answer is 42.", 1),
    R("answer_phrases", "42", "Therefore, the answer is 24.", 0),
    R("answer_phrases", "0.5", "The probability is $\\frac{1}{2}$.", 1),
    R("answer_phrases", "x^2+1", "so \\(x^2+1\\) it is", 1),
    R("answer_phrases", "40", "She paid $5 an hour, so she made $40.", 1),
    R("answer_phrases", "7", "The final answer is 7 because 3 + 4 = 7.", 1),
    R("answer_phrases", "3", "The final answer is 7 because 3 + 4 = 7.", 0),
    R("answer_phrases", "10", "Thus, the answer is $10$.", 1),
    R("answer_phrases", "15", "The answer would be 15 dollars.", 1),
    R("answer_phrases", "15", "The answer is 15, and the remainder is 2.", 1),
    R("answer_phrases", "6", "The answers are 4 and 6.", 0),
    R("answer_phrases", "-3", "The answer is -3.", 1),
    R("answer_phrases", "-3", "The answer is 3.", 0),
    R(
        "answer_phrases",
        "2, 5",
        "The solutions are x = 2 and x = 5, so the answers are 2 and 5.",
        1,
    ),
    R("answer_phrases", "x=5", "Solving, the answer is x = 5.", 1),
    # ---- markdown and styles ----
    R("markdown", "17", "**Answer:** **17**", 1),  # issue
    R("markdown", "17", "**Final Answer:** 17", 1),
    R("markdown", "17", "### Final Answer\n17", 1),
    R("markdown", "17", "**Final Answer**\n\n$17$", 1),
    R("markdown", "17", "**Final Answer**\n\\[\n\\boxed{17}\n\\]", 1),
    R("markdown", "17", "**Final Answer**\n\\[\n\\boxed{71}\n\\]", 0),
    R("markdown", "9", "- Step 1: 4 + 5 = 9\n- So the answer is **9**.", 1),
    R("markdown", "9", "1. Add: 4 + 5 = 9\n2. Done.\n\n**Answer: 9**", 1),
    R(
        "markdown",
        "12",
        "| item | cost |\n|---|---|\n| pen | 12 |\n\nThe answer is $\\boxed{12}$.",
        1,
    ),
    R("markdown", "12", "The answer is `12`.", 1),
    # ---- chat-template debris ----
    R("chat_debris", "5", "\\boxed{5}<|im_end|>", 1),
    R("chat_debris", "5", "\\boxed{5}<|im_end|>\n<|im_start|>user\nNow what is 2+4? \\boxed{6}", 1),
    R("chat_debris", "6", "\\boxed{5}<|im_end|>\n<|im_start|>user\nNow what is 2+4? \\boxed{6}", 0),
    R(
        "chat_debris",
        "5",
        "The answer is 5.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nAnd 7?",
        1,
    ),
    R("chat_debris", "5", "So the total is 5.</s>", 1),
    R("chat_debris", "5", "So the total is 5.<｜end▁of▁sentence｜>", 1),
    R("chat_debris", "5", "<|im_start|>assistant\nThe answer is 5.<|im_end|>", 1),
    R("chat_debris", "5", "#### 5<|endoftext|><|endoftext|>", 1),
    R(
        "chat_debris",
        "12",
        "<think>\n3 * 4 = 12, maybe 13?\n</think>\n\nThe answer is $\\boxed{12}$.<|im_end|>",
        1,
    ),
    R(
        "chat_debris",
        "13",
        "<think>\n3 * 4 = 12, maybe 13?\n</think>\n\nThe answer is $\\boxed{12}$.<|im_end|>",
        0,
    ),
    R("chat_debris", "8", "[INST] What is 4+4? [/INST] The answer is 8.", 1),
    # ---- mixed numbers, e-notation, repeating decimals ----
    R("number_forms", r"\frac{7}{2}", "The answer is 3 1/2", 1),  # issue
    R("number_forms", "2", "The answer is 2 4/3", 0),  # issue
    R("number_forms", r"\frac{7}{2}", _b(r"3\frac{1}{2}"), 1),
    R("number_forms", r"\frac{7}{2}", _b(r"3 \frac{1}{2}"), 1),
    R("number_forms", "3.5", _b("3 1/2"), 1),
    R("number_forms", r"\frac{7}{4}", _b(r"1\frac{3}{4}"), 1),
    R("number_forms", r"\frac{7}{4}", _b(r"1\frac{3}{5}"), 0),
    R("number_forms", r"2\frac{1}{3}", _b(r"\frac{7}{3}"), 1),
    R("number_forms", "20000", _b("2e4"), 1),  # issue
    R("number_forms", "1500", _b("1.5e3"), 1),
    R("number_forms", "1500", _b(r"1.5 \times 10^3"), 1),
    R("number_forms", "1500", _b(r"1.5 \times 10^4"), 0),
    R("number_forms", "0.0015", _b("1.5E-3"), 1),
    R("number_forms", r"\frac{2}{3}", _b(r"0.\overline{6}"), 1),  # issue
    R("number_forms", r"\frac{1}{6}", _b(r"0.1\overline{6}"), 1),
    R("number_forms", r"\frac{1}{7}", _b(r"0.\overline{142857}"), 1),
    R("number_forms", r"\frac{1}{3}", _b(r"0.\overline{6}"), 0),
    R("number_forms", r"\frac{2}{3}", _b("0.6"), 0),
    R("number_forms", "3000", "The answer is 3e3.", 1),
    R("number_forms", "3000", "The answer is 3 thousand.", 1),
    # ---- pathological ----
    R("pathological", "7", "QX7ZK", 0),  # issue: digits inside a garbage word
    R("pathological", "1", _b(r"9^{9^{9^9}}"), 0),
    R("pathological", r"9^{9^{9^9}}", _b(r"9^{9^{9^9}}"), 1),
    R("pathological", "1", _b(r"(10^{10})!"), 0),
    R("pathological", "1", _b(r"\Gamma(10^{9})"), 0),
    R("pathological", "12", r"the result is \boxed{12", 0),
    R("pathological", "12", "I don't know.", 0),
    R("pathological", "12", _b("@#&"), 0),
    R("pathological", "12", _b(""), 0),
    R("pathological", "12", _b("{" * 20 + "12" + "}" * 20), 1),
    R("pathological", "12", "1" * 5000, 0),
    R("pathological", "12", _b("12" + "+0" * 1200), 0),
    R("pathological", "2", _b("1+1"), 1),
    R("pathological", "2", _b("2+0x"), 1),
    R("pathological", "0", _b("x-x"), 1),
    R("pathological", "1", _b(r"\frac{x}{x}"), 1),
    R("pathological", "12", _b("12)"), 0),
    R("pathological", "12", _b("(12"), 0),
    R("pathological", "12", _b(r"\frac{12}{0}"), 0),
    R("pathological", "0", _b(r"\frac{0}{0}"), 0),
    R("pathological", r"\infty", _b(r"-\infty"), 0),
    R("pathological", "1", _b(r"1 + 10^{-30}"), 0),
    R("pathological", "1", _b(r"0.99999999"), 1),
    R("pathological", "1", _b(r"0.999"), 0),
    R("pathological", "6", "The answer is six.", 1),
    R("pathological", "6", "The answer is seven.", 0),
    R("pathological", "12", "The answer is 12 or 13.", 0),
    R("pathological", "12", "Answer: between 11 and 13", 0),
    R("pathological", "5", r"\boxed{5} \boxed{6} \boxed{7} \boxed{8}", 0),
    R("pathological", "3", _b(r"\sqrt{9}"), 1),
    R("pathological", "3", _b(r"\sqrt{-9}"), 0),
    R("pathological", "3", _b(r"3i"), 0),
    R("pathological", "1", _b(r"10^{-20000}"), 0),
]
