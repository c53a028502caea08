r"""Step rows by kind for the steps verifier (issue 28), written by hand in the styles models
use: LaTeX alignment environments, ``≈``, inequalities, number words, "of", roots, LaTeX
thousands, money, units and markdown.

Each :class:`Row` is one response (often one line) and the verdict expected for each of its
steps in order: ``V`` valid, ``I`` invalid, ``U`` unverifiable. Every kind has valid and
invalid rows; ``U`` rows are the look-alikes that must not be judged (a unit conversion is
not arithmetic, a question is not a claim). The rows were written for the kinds, alongside
the code: they check the kinds listed, not unseen styles.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["ROWS", "Row"]


class Row(NamedTuple):
    """One response and its expected step verdicts (``V``/``I``/``U`` per step)."""

    kind: str
    text: str
    expect: str


ROWS: list[Row] = [
    # --- LaTeX alignment environments: each row is its own step, continuation rows chain ---
    Row("align", "\\begin{aligned} 18 \\times 5 &= 90 \\\\ 90 + 14 &= 104 \\end{aligned}", "VV"),
    Row("align", "\\begin{aligned} 18 \\times 5 &= 90 \\\\ 90 + 14 &= 106 \\end{aligned}", "VI"),
    Row("align", "\\begin{aligned} 18 \\times 5 &= 80 \\\\ 80 + 14 &= 94 \\end{aligned}", "IV"),
    Row("align", "\\begin{align*}\n12 \\cdot 7 &= 84 \\\\\n84 - 9 &= 75\n\\end{align*}", "UVVU"),
    Row("align", "\\begin{align*}\n12 \\cdot 7 &= 84 \\\\\n84 - 9 &= 76\n\\end{align*}", "UVIU"),
    Row(
        "align",
        "\\begin{align*}\nx &= 3 \\times 15 + 6 \\\\\n&= 45 + 6 \\\\\n&= 51\n\\end{align*}",
        "UUVVU",
    ),
    Row(
        "align",
        "\\begin{align*}\nx &= 3 \\times 15 + 6 \\\\\n&= 45 + 6 \\\\\n&= 52\n\\end{align*}",
        "UUVIU",
    ),
    Row(
        "align",
        "\\begin{align*}\nx &= 3 \\times 15 + 6 \\\\\n&= 40 + 6 \\\\\n&= 46\n\\end{align*}",
        "UUIVU",
    ),
    Row(
        "align",
        "$$\n\\begin{aligned}\n(4 + 6)^2 &= 10^2 \\\\\n&= 100\n\\end{aligned}\n$$",
        "UUVVUU",
    ),
    Row(
        "align",
        "$$\n\\begin{aligned}\n(4 + 6)^2 &= 10^2 \\\\\n&= 1000\n\\end{aligned}\n$$",
        "UUVIUU",
    ),
    Row(
        "align",
        "\\begin{eqnarray}\n3 \\times 7 &=& 21 \\\\\n21 + 4 &=& 25\n\\end{eqnarray}",
        "UVVU",
    ),
    Row(
        "align",
        "\\begin{eqnarray}\n3 \\times 7 &=& 21 \\\\\n21 + 4 &=& 26\n\\end{eqnarray}",
        "UVIU",
    ),
    Row("align", "\\begin{gather*}\n2^{10} = 1024 \\\\\n1024 - 24 = 1000\n\\end{gather*}", "UVVU"),
    Row("align", "\\begin{gather*}\n2^{10} = 1024 \\\\\n1024 - 24 = 1100\n\\end{gather*}", "UVIU"),
    Row(
        "align", "\\begin{align}\n\\frac{36}{4} &= 9 \\\\\n9 \\times 3 &= 27\n\\end{align}", "UVVU"
    ),
    Row(
        "align", "\\begin{align}\n\\frac{36}{4} &= 8 \\\\\n8 \\times 3 &= 24\n\\end{align}", "UIVU"
    ),
    Row(
        "align",
        "\\[\n\\begin{aligned}\n250 - 75 &= 175 \\\\\n175 \\div 5 &= 35\n\\end{aligned}\n\\]",
        "UUVVUU",
    ),
    Row(
        "align",
        "\\[\n\\begin{aligned}\n250 - 75 &= 175 \\\\\n175 \\div 5 &= 25\n\\end{aligned}\n\\]",
        "UUVIUU",
    ),
    Row("align", "\\begin{align*} 7 \\cdot 8 &= 56 \\\\ &= 50 + 6 \\end{align*}", "VV"),
    Row("align", "\\begin{align*} 7 \\cdot 8 &= 56 \\\\ &= 50 + 7 \\end{align*}", "VI"),
    Row(
        "align", "\\begin{split}\n(3 + 5) \\cdot 4 &= 8 \\cdot 4 \\\\\n&= 32\n\\end{split}", "UVVU"
    ),
    Row(
        "align", "\\begin{split}\n(3 + 5) \\cdot 4 &= 8 \\cdot 4 \\\\\n&= 36\n\\end{split}", "UVIU"
    ),
    Row("align", "The total is 5 \\times 12\n= 60 apples", "UV"),
    Row("align", "The total is 5 \\times 12\n= 65 apples", "UI"),
    Row(
        "align",
        "\\begin{align*}\n\\text{Cost} &= 4 \\times \\$12 \\\\\n&= \\$48\n\\end{align*}",
        "UUVU",
    ),
    Row(
        "align",
        "\\begin{align*}\n\\text{Cost} &= 4 \\times \\$12 \\\\\n&= \\$52\n\\end{align*}",
        "UUIU",
    ),
    # --- approximations: within the precision shown (rounded or truncated) ---
    Row("approx", "$\\sqrt{5} \\approx 2.24$", "V"),
    Row("approx", "$\\sqrt{5} \\approx 2.31$", "I"),
    Row("approx", "$\\pi \\times 3^2 \\approx 28.27$", "V"),
    Row("approx", "$\\pi \\times 3^2 \\approx 28.47$", "I"),
    Row("approx", "The area is $\\pi r^2 = \\pi \\cdot 5^2 \\approx 78.54$ square units.", "V"),
    Row("approx", "The area is $\\pi r^2 = \\pi \\cdot 5^2 \\approx 75.54$ square units.", "I"),
    Row("approx", "$\\frac{22}{7} \\approx 3.14$", "V"),
    Row("approx", "$\\frac{22}{7} \\approx 3.41$", "I"),
    Row("approx", "$\\sqrt{2} \\approx 1.414$", "V"),
    Row("approx", "$\\sqrt{2} \\approx 1.424$", "I"),
    Row("approx", "So 100 / 7 ≈ 14.29.", "V"),
    Row("approx", "So 100 / 7 ≈ 14.92.", "I"),
    Row("approx", "2/3 ≈ 0.67", "V"),
    Row("approx", "2/3 ≈ 0.76", "I"),
    Row("approx", "$\\sqrt{50} \\approx 7.07$", "V"),
    Row("approx", "$\\sqrt{50} \\approx 7.7$", "I"),
    Row("approx", "1000 / 3 ≈ 333", "V"),
    Row("approx", "1000 / 3 ≈ 353", "I"),
    Row("approx", "$2^{10} \\approx 1000$", "V"),
    Row("approx", "$2^{10} \\approx 2000$", "I"),
    Row("approx", "The ratio is 7/9 which is approximately 0.78.", "V"),
    Row("approx", "The ratio is 7/9 which is approximately 0.87.", "I"),
    Row("approx", "$\\sqrt{3} = 1.732\\ldots$", "V"),
    Row("approx", "$\\sqrt{3} = 1.723\\ldots$", "I"),
    Row("approx", "$\\frac{1}{3} \\approx 33.3\\%$", "V"),
    Row("approx", "$\\frac{1}{3} \\approx 30.3\\%$", "I"),
    Row("approx", "$\\frac{355}{113} \\approx 3.14159$", "V"),
    Row("approx", "$\\frac{355}{113} \\approx 3.15159$", "I"),
    Row("approx", "$\\sqrt[3]{10} \\approx 2.15$", "V"),
    Row("approx", "$\\sqrt[3]{10} \\approx 2.51$", "I"),
    # --- inequalities and mixed chains ---
    Row("inequality", "$2^6 = 64 > 70$", "I"),
    Row("inequality", "$2^6 = 64 < 70$", "V"),
    Row("inequality", "$3 \\cdot 4 = 12 \\le 15$", "V"),
    Row("inequality", "$3 \\cdot 4 = 12 \\ge 15$", "I"),
    Row("inequality", "$5^2 = 25 \\geq 20$", "V"),
    Row("inequality", "$5^2 = 25 \\leq 20$", "I"),
    Row("inequality", "Since 7 × 8 = 56 ≤ 60, it fits.", "V"),
    Row("inequality", "Since 7 × 8 = 56 ≥ 60, it fits.", "I"),
    Row("inequality", "$0 < \\frac{1}{3} < \\frac{1}{2} < 1$", "V"),
    Row("inequality", "$0 < \\frac{1}{2} < \\frac{1}{3} < 1$", "I"),
    Row("inequality", "$\\sqrt{2} < 1.5$", "V"),
    Row("inequality", "$\\sqrt{2} > 1.5$", "I"),
    Row("inequality", "$\\pi > 3.14$", "V"),
    Row("inequality", "$\\pi < 3.14$", "I"),
    Row("inequality", "$3 + 4 \\neq 8$", "V"),
    Row("inequality", "$3 + 4 \\neq 7$", "I"),
    Row("inequality", "$100 \\lt 2^7$", "V"),
    Row("inequality", "$200 \\lt 2^7$", "I"),
    Row("inequality", "$2^7 \\gt 100$", "V"),
    Row("inequality", "$2^7 \\gt 200$", "I"),
    Row("inequality", "$15 \\times 4 = 60 > 50 = 5 \\times 10$", "V"),
    Row("inequality", "$15 \\times 4 = 60 > 70 = 7 \\times 10$", "I"),
    Row("inequality", "Check: 45 + 30 = 75 ≤ 80, so he has enough money.", "V"),
    Row("inequality", "Check: 45 + 30 = 75 ≤ 70, so he has enough money.", "I"),
    Row("inequality", "Since 13 is greater than 9, the first box is heavier.", "V"),
    Row("inequality", "Since 8 is greater than 9, the first box is heavier.", "I"),
    Row("inequality", "$\\frac{3}{4} = 0.75 \\geqslant 0.7$", "V"),
    Row("inequality", "$\\frac{3}{4} = 0.75 \\leqslant 0.7$", "I"),
    Row("inequality", "Is 64 > 70? No.", "UU"),
    # --- number words: cardinals, hyphens, "and", relation and operator words ---
    Row("words", "Nine plus six equals fifteen.", "V"),
    Row("words", "Nine plus six equals sixteen.", "I"),
    Row("words", "Twenty-four divided by three is eight.", "V"),
    Row("words", "Twenty-four divided by three is nine.", "I"),
    Row("words", "One hundred and twenty minus forty-five equals seventy-five.", "V"),
    Row("words", "One hundred and twenty minus forty-five equals sixty-five.", "I"),
    Row("words", "Three thousand two hundred plus eight hundred is four thousand.", "V"),
    Row("words", "Three thousand two hundred plus eight hundred is five thousand.", "I"),
    Row(
        "words",
        "Two million five hundred thousand plus five hundred thousand equals three million.",
        "V",
    ),
    Row(
        "words",
        "Two million five hundred thousand plus five hundred thousand equals two million.",
        "I",
    ),
    Row("words", "Seven times eight is fifty-six.", "V"),
    Row("words", "Seven times eight is fifty-four.", "I"),
    Row("words", "twelve multiplied by twelve gives one hundred forty-four", "V"),
    Row("words", "twelve multiplied by twelve gives one hundred forty-two", "I"),
    Row("words", "Eleven squared is one hundred twenty-one.", "V"),
    Row("words", "Eleven squared is one hundred eleven.", "I"),
    Row("words", "The square root of 81 is 9.", "V"),
    Row("words", "The square root of 81 is 8.", "I"),
    Row("words", "So 45 divided by 5 equals nine bags.", "V"),
    Row("words", "So 45 divided by 5 equals eight bags.", "I"),
    Row("words", "Ninety-nine plus one is one hundred.", "V"),
    Row("words", "Ninety-nine plus one is one thousand.", "I"),
    Row("words", "Twice 35 is 70.", "V"),
    Row("words", "Twice 35 is 75.", "I"),
    Row("words", "Fifteen is greater than twelve.", "V"),
    Row("words", "Twelve is greater than fifteen.", "I"),
    Row("words", "Sixty minus twenty-five is less than forty.", "V"),
    Row("words", "Sixty minus twenty-five is less than thirty.", "I"),
    Row("words", "Two to the power of five equals thirty-two.", "V"),
    Row("words", "Two to the power of five equals twenty-five.", "I"),
    Row("words", "Box two is 5 * 3 = 15 kilograms.", "V"),
    Row("words", "Box two is 5 * 3 = 18 kilograms.", "I"),
    # --- "of": a fraction or percent of a number multiplies it ---
    Row("of", "2/5 of 30 = 12", "V"),
    Row("of", "2/5 of 30 = 15", "I"),
    Row("of", "$\\frac{3}{4}$ of 48 = 36", "V"),
    Row("of", "$\\frac{3}{4}$ of 48 = 32", "I"),
    Row("of", "$\\frac{3}{4} \\text{ of } 48 = 36$", "V"),
    Row("of", "$\\frac{3}{4} \\text{ of } 48 = 34$", "I"),
    Row("of", "25% of 80 = 20", "V"),
    Row("of", "25% of 80 = 25", "I"),
    Row("of", "Two thirds of 27 is 18.", "V"),
    Row("of", "Two thirds of 27 is 21.", "I"),
    Row("of", "Half of 50 is 25.", "V"),
    Row("of", "Half of 50 is 20.", "I"),
    Row("of", "A quarter of 36 is 9.", "V"),
    Row("of", "A quarter of 36 is 6.", "I"),
    Row("of", "$15\\%$ of $\\$240$ is $\\$36$.", "V"),
    Row("of", "$15\\%$ of $\\$240$ is $\\$24$.", "I"),
    # --- roots and binomials ---
    Row("roots", "$\\sqrt[4]{81} = 3$", "V"),
    Row("roots", "$\\sqrt[4]{81} = 9$", "I"),
    Row("roots", "$\\sqrt[3]{27} + \\sqrt{16} = 7$", "V"),
    Row("roots", "$\\sqrt[3]{27} + \\sqrt{16} = 8$", "I"),
    Row("roots", "$\\sqrt[5]{32} = 2$", "V"),
    Row("roots", "$\\sqrt[5]{32} = 4$", "I"),
    Row("roots", "√144 = 12", "V"),
    Row("roots", "√144 = 14", "I"),
    Row("roots", "$\\binom{6}{2} = 15$", "V"),
    Row("roots", "$\\binom{6}{2} = 12$", "I"),
    Row("roots", "$\\dbinom{5}{3} = \\frac{5!}{3!\\,2!} = 10$", "V"),
    Row("roots", "$\\dbinom{5}{3} = \\frac{5!}{3!\\,2!} = 20$", "I"),
    # --- thousands written in LaTeX and with separators ---
    Row("thousands", "$1{,}500 + 300 = 1{,}800$", "V"),
    Row("thousands", "$1{,}500 + 300 = 1{,}900$", "I"),
    Row("thousands", "$12{,}000 \\div 4 = 3{,}000$", "V"),
    Row("thousands", "$12{,}000 \\div 4 = 4{,}000$", "I"),
    Row("thousands", "$2\\,500 \\times 3 = 7\\,500$", "V"),
    Row("thousands", "$2\\,500 \\times 3 = 7\\,000$", "I"),
    Row("thousands", "1,250,000 - 250,000 = 1,000,000", "V"),
    Row("thousands", "1,250,000 - 250,000 = 1,100,000", "I"),
    # --- money ---
    Row("money", "She pays \\$25 \\times 4 = \\$100.", "V"),
    Row("money", "She pays \\$25 \\times 4 = \\$120.", "I"),
    Row("money", "The total is $12.50 + $7.25 = $19.75.", "V"),
    Row("money", "The total is $12.50 + $7.25 = $18.75.", "I"),
    Row("money", "$\\$1{,}200 \\times 0.15 = \\$180$", "V"),
    Row("money", "$\\$1{,}200 \\times 0.15 = \\$160$", "I"),
    Row("money", "3 hours × $15 per hour = $45", "V"),
    Row("money", "3 hours × $15 per hour = $54", "I"),
    Row("money", "He earns 40 dollars + 35 dollars = 75 dollars.", "V"),
    Row("money", "He earns 40 dollars + 35 dollars = 85 dollars.", "I"),
    Row("money", "A dollar is 100 cents, so $2.50 = 250 cents.", "U"),
    # --- units ---
    Row("units", "$5 \\text{ cm} \\times 3 \\text{ cm} = 15 \\text{ cm}^2$", "V"),
    Row("units", "$5 \\text{ cm} \\times 3 \\text{ cm} = 18 \\text{ cm}^2$", "I"),
    Row("units", "$12\\,\\text{m} \\times 8\\,\\text{m} = 96\\,\\text{m}^2$", "V"),
    Row("units", "$12\\,\\text{m} \\times 8\\,\\text{m} = 86\\,\\text{m}^2$", "I"),
    Row("units", "60 km/h × 2 hours = 120 km", "V"),
    Row("units", "60 km/h × 2 hours = 100 km", "I"),
    Row("units", "12 apples + 8 apples = 20 apples", "V"),
    Row("units", "12 apples + 8 apples = 22 apples", "I"),
    Row("units", "$180^\\circ - 65^\\circ - 45^\\circ = 70^\\circ$", "V"),
    Row("units", "$180^\\circ - 65^\\circ - 45^\\circ = 80^\\circ$", "I"),
    Row("units", "$2.5 \\mathrm{kg} + 1.75 \\mathrm{kg} = 4.25 \\mathrm{kg}$", "V"),
    Row("units", "$2.5 \\mathrm{kg} + 1.75 \\mathrm{kg} = 4.5 \\mathrm{kg}$", "I"),
    Row("units", "4 boxes × 6 pens per box = 24 pens", "V"),
    Row("units", "4 boxes × 6 pens per box = 28 pens", "I"),
    Row("units", "2 hours × 60 minutes/hour = 120 minutes", "V"),
    Row("units", "2 hours × 60 minutes/hour = 100 minutes", "I"),
    Row("units", "2 days = 48 hours", "U"),
    Row("units", "1 dozen = 12 eggs, and 3 feet = 36 inches.", "UU"),
    Row("units", "40 nickels is equal to 40 x 5 = 200 cents.", "V"),
    # --- markdown ---
    Row("markdown", "**Step 1:** $18 \\times 5 = 90$\n**Step 2:** $90 + 14 = 104$", "VV"),
    Row("markdown", "**Step 1:** $18 \\times 5 = 90$\n**Step 2:** $90 + 14 = 105$", "VI"),
    Row("markdown", "### Step 1\n- $6 \\times 7 = 42$\n- $42 - 2 = 40$", "UVV"),
    Row("markdown", "### Step 1\n- $6 \\times 7 = 42$\n- $42 - 2 = 30$", "UVI"),
    Row(
        "markdown", "1. **Cost of pens:** 3 × $4 = **$12**\n2. **Total:** $12 + $8 = **$20**", "VV"
    ),
    Row(
        "markdown", "1. **Cost of pens:** 3 × $4 = **$12**\n2. **Total:** $12 + $8 = **$22**", "VI"
    ),
    Row("markdown", "The answer is **5 × 9 = 45**.", "V"),
    Row("markdown", "The answer is **5 × 9 = 54**.", "I"),
    Row("markdown", "> `7 * 6 = 42`", "V"),
    Row("markdown", "> `7 * 6 = 48`", "I"),
    Row("markdown", "| 3 × 4 = 12 | 12 + 1 = 13 |", "V"),
    Row("markdown", "| 3 × 4 = 12 | 12 + 1 = 14 |", "I"),
    Row("markdown", "So $5 \\times 3 = \\boxed{15}$.", "V"),
    Row("markdown", "So $5 \\times 3 = \\boxed{18}$.", "I"),
]
