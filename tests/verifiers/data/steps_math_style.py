# ruff: noqa: E501 - hand-written solutions; one step per line reads best
r"""MATH-style worked solutions for the steps verifier, written by hand.

Every line is one step holding one checkable claim whose result is the last number of the
line (``RESULT``), written the way models write MATH solutions: LaTeX operators (``\times``,
``\cdot``, ``\div``, ``\frac``), ``$..$`` and ``\(..\)`` math, operator words ("times",
"minus", "divided by"), markdown (``**Step 1:**``, bullets, numbered lists) and mixed numbers.
All steps are correct; :func:`altered` makes the copies with one result changed.
"""

from __future__ import annotations

import random
import re

__all__ = ["SOLUTIONS", "altered"]

SOLUTIONS: list[str] = [
    "**Step 1:** $5 \\times 6 = 30$\n**Step 2:** $30 + 12 = 42$\n**Step 3:** $42 \\div 7 = 6$",
    "First, $8 \\cdot 2 = 16$.\nThen $16 - 9 = 7$.\nSo the answer is $\\boxed{7}$.",
    "- $20 \\div 5 = 4$\n- $4 \\times 9 = 36$\n- $36 + 4 = 40$",
    "7 times 3 = 21\n21 minus 4 = 17\n17 plus 8 = 25",
    "15 minus 4 = 11\n11 times 2 = 22\n22 divided by 11 = 2",
    "She buys 3 bags of 5 = 15 apples.\nShe eats 2, so 15 - 2 = 13 apples are left.",
    "**Step 1:** 4+4=8\n**Step 2:** 8*3=24\n**Step 3:** 24/6=4",
    "1. $\\frac{3}{4} + \\frac{1}{4} = 1$\n2. $1 \\times 12 = 12$\n3. $12 - 5 = 7$",
    "$1 \\frac{1}{2} + 2 = 3 \\frac{1}{2}$\n$3 \\frac{1}{2} \\times 2 = 7$",
    "1 1/2 + 2 = 3 1/2\nThen 3 1/2 + 1/2 = 4",
    "The area is $\\frac{1}{2} \\cdot 6 \\cdot 4 = 12$.\nThe perimeter is $3 + 4 + 5 = 12$.",
    "We have $2^{10} = 1024$.\nSo $1024 - 24 = 1000$.",
    "\\( 9 \\times 9 = 81 \\)\n\\( 81 + 19 = 100 \\)\n\\( 100 \\div 4 = 25 \\)",
    "## Step 1: Multiply\n$12 \\times 12 = 144$\n## Step 2: Subtract\n$144 - 44 = 100$",
    "The sum is $1 + 2 + 3 + 4 + 5 = 15$.\nThe mean is $\\frac{15}{5} = 3$.",
    "$\\frac{2}{3} \\times \\frac{3}{4} = \\frac{1}{2}$\n$\\frac{1}{2} + \\frac{1}{4} = \\frac{3}{4}$",
    "* $6 \\times 7 = 42$\n* $42 \\div 6 = 7$\n* $7^2 = 49$",
    "The number of handshakes is $\\frac{10 \\cdot 9}{2} = 45$.",
    "$\\binom{5}{2}$ counts pairs: $\\frac{5 \\times 4}{2} = 10$.\nWith order, $10 \\times 2 = 20$.",
    "Speed times time: 60 times 3 = 180 miles.\nBack: 180 divided by 90 = 2 hours.",
    "$3^4 = 81$, and $81 - 1 = 80$.",
    "$(2 + 3) \\times 4 = 20$\n$20 - 2 \\times 3 = 14$",
    "A dozen eggs is $12$, so $4 \\times 12 = 48$ eggs.\nHalf of them: $48 \\div 2 = 24$.",
    "**Step 1:** The price is $\\$25 \\times 4 = \\$100$.\n**Step 2:** With tax, $100 \\times 1.08 = 108$.",
    "20% of 50 = 10\n50 - 10 = 40",
    "$1.5 \\times 4 = 6$\n$6 + 0.25 = 6.25$",
    "$2 \\frac{1}{4} + 1 \\frac{3}{4} = 4$\n$4 \\times 5 = 20$",
    "3 1/3 + 2/3 = 4\n4 times 4 = 16",
    "$\\sqrt{49} = 7$\n$7 \\cdot 7 = 49$",
    "$5! = 120$\n$\\frac{120}{4!} = 5$",
    "- Step 1: $14 + 28 = 42$\n- Step 2: $42 \\div 2 = 21$",
    "There are 4 boxes of 6 = 24 pens.\nWe give away 9, so 24 - 9 = 15 pens.",
    "$100 - 37 = 63$\n$63 + 37 = 100$",
    "The slope is $\\frac{7 - 3}{4 - 2} = 2$.\nThe intercept is $3 - 2 \\cdot 2 = -1$.",
    "$(-3)^2 = 9$\n$9 - 10 = -1$",
    "1.5e3 = 1500\n1500 + 500 = 2000",
    "$0.5 \\times 0.5 = 0.25$\n$1 - 0.25 = 0.75$",
    "$\\frac{1}{3} + \\frac{1}{6} = \\frac{1}{2}$",
    "$2 \\times (3 + 4) = 14$\n$14^2 = 196$",
    "**Step 1:** 36 divided by 4 = 9\n**Step 2:** 9 plus 1 = 10\n**Step 3:** 10 times 10 = 100",
    "$1000 \\div 8 = 125$\n$125 \\times 3 = 375$",
    "The total is $3 \\times 15 + 2 \\times 10 = 65$.",
    "$\\frac{9}{12} = \\frac{3}{4}$\n$\\frac{3}{4} \\times 100 = 75$",
    "$7 \\times 8 = 56$\n$56 - 6 = 50$\n$50 \\div 10 = 5$",
    "2 3/4 - 1 1/4 = 1 1/2\n1 1/2 times 2 = 3",
    "$11^2 = 121$\n$121 - 21 = 100$\n$\\sqrt{100} = 10$",
    "$6 + 6 + 6 = 18$\n$18 \\div 3 = 6$",
    "1. 25 times 4 = 100\n2. 100 minus 1 = 99\n3. 99 divided by 9 = 11",
    "$4^3 = 64$\n$64 \\div 16 = 4$",
    "The probability is $\\frac{3}{6} = \\frac{1}{2}$.\nTwice: $\\frac{1}{2} \\cdot \\frac{1}{2} = \\frac{1}{4}$.",
    "$45 \\div 9 = 5$ groups.\n$5 \\times 2 = 10$ pairs.",
    "$2.5 \\times 2.5 = 6.25$",
    "$999 + 1 = 1000$\n$1000 \\times 1000 = 1000000$",
    "There are 7 rows of 8 = 56 seats.\nWith 6 empty, 56 - 6 = 50 are filled.",
    "$\\frac{8}{2} + \\frac{9}{3} = 7$\n$7 \\times 7 = 49$",
    "- $13 \\times 3 = 39$\n- $39 + 1 = 40$\n- $\\frac{40}{8} = 5$",
    "$3 \\frac{1}{2} \\times 4 = 14$\n$14 - 3 \\frac{1}{2} = 10 \\frac{1}{2}$",
    "$72 \\div 8 = 9$\n$9 \\times 11 = 99$",
    "$(1 + 1)^5 = 32$\n$32 - 1 = 31$",
    "$10 \\times 10 \\times 10 = 1000$\n$1000 \\div 25 = 40$",
]

_RESULT = re.compile(r"(?<=[=])\s*(\$?\\?\$?)\s*(-?\d+(?:\.\d+)?)")


def altered(seed: int = 0) -> list[tuple[str, int, int]]:
    """One copy per (solution, step): that step's result (the first number after its last
    ``=``) changed by +1, +2 or +10.

    Returns:
        ``(text, start, end)``: the altered solution and the code-point span of the number
        that was changed.
    """
    rng = random.Random(seed)
    out = []
    for solution in SOLUTIONS:
        offset = 0
        for line in solution.split("\n"):
            last = None
            for last in _RESULT.finditer(line):  # noqa: B007 - the last "= n" of the line
                pass
            if last is not None:
                number = last.group(2)
                wrong = str(int(float(number)) + rng.choice([1, 2, 10]))
                a, b = offset + last.start(2), offset + last.end(2)
                out.append((solution[:a] + wrong + solution[b:], a, a + len(wrong)))
            offset += len(line) + 1
    return out
