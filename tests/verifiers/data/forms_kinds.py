# ruff: noqa: E501 - a table of hand-written rows; one row per line reads best
r"""A second, held-out-style table of issue 27's kinds: new cases of the ten fault kinds and
of four kinds the issue left out (unit conversions, number words in prose, a function
written for an expression gold, commas inside a gold's brackets).

Each row is (kind, gold, response, expected reward); ``expected`` is what is *right*: the
answer the response gives compared with the gold, 0 when it gives none. The rows use other
numbers, spacings and LaTeX spellings than the issue's examples and the earlier tables
(``extraction_kinds.py``, ``math_equivalence.py``): ``\dfrac``/``\tfrac``, ``\!``/``\,``/
``{,}`` separators, degrees, percent, ``\$``, mixed numbers, intervals with infinity, set
braces, ``\cup``, and near misses that must stay 0. They were written before the code of
2026-12-05 was changed for them; the first run's figures are in
``docs/results/2026-12-05-verifiers-kinds.md``.

**Unit conversions** follow the MATH and GSM8K graders: a gold's number is the value in the
unit the question asks for, so an answer in another unit is wrong even when its number is
converted (gold ``150`` or ``150 \text{ cm}``, answer ``1.5 \text{ m}``: 0), and the graders
never convert. Beyond them, two different known units never agree (``150 \text{ cm}`` vs
``150 \text{ m}``: 0; the graders, dropping units, would give 1).

Run by ``tests/verifiers/test_math_forms_kinds.py`` and by ``python -m bench verifiers_kinds``
beside math-verify.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["KINDS", "KNOWN_WRONG", "ROWS", "Row"]


class Row(NamedTuple):
    kind: str
    gold: str
    response: str
    expected: float


KINDS = {
    "inside": "1. a number guessed from inside something else",
    "thousands": "2. thousands separators inside tuples, intervals, sets",
    "tag_after_phrase": "3. <answer> tags after an answer phrase",
    "answer_sentence": "4. 'Answer:' followed by a sentence",
    "chain": "5. chains, arrows, named quantities at the end",
    "think_units": "6. a stray </think>, units glued to the value",
    "continuation": "7. hallucinated continuations",
    "approximation": "8. decimals for non-terminating exact golds",
    "clock_hedge": "9. clock times, hedges",
    "forms": "10. missing forms",
    "unit_conversion": "11. an answer in another unit than the gold's",
    "number_words": "12. number words in prose",
    "function_gold": "13. f(x) = ... against an expression gold",
    "gold_thousands": "14. commas inside a gold's brackets",
}

R = Row
ROWS: list[Row] = [
    # ---- 1. a number guessed from inside something else ----
    R("inside", "7", r"<think>the root</think> <answer> \sqrt{7} </answer>", 0),
    R("inside", "5", r"So the edge length is $\sqrt[3]{5}$", 0),
    R("inside", "3", r"So the edge length is $\sqrt[3]{5}$", 0),
    R("inside", "2", r"<answer> 2, 6 </answer>", 0),
    R("inside", "6", r"The solutions are $x = 2$ and $x = 6$.", 0),
    R("inside", "3", r"Expanding, we get 4a^3 - 2ab + 0.5b^3", 0),
    R("inside", "10", r"Thus the result is \(\log_{10} 1000\).", 0),
    R("inside", "3", r"Thus the result is \(\log_{10} 1000\).", 1),
    R("inside", "16", "```python\nx = 4 ** 2\nprint(x)\n```", 0),
    R("inside", "2", r"We substitute $x_2$ into the equation and", 0),
    R("inside", "4", r"So the area is $\dfrac{\pi r^2}{4}$.", 0),
    R("inside", "45", r"The answer is $\sin 45^\circ$.", 0),
    R(
        "inside",
        "12",
        "Maria has 12 stickers and gives away 5. How many stickers does Maria have now?",
        0,
    ),
    R("inside", "100", r"Let's compute $2^{100} \bmod 7$. We", 0),
    R("inside", "8", r"So $a = \tfrac{8}{3}$.", 0),
    R("inside", r"\frac{8}{3}", r"So $a = \tfrac{8}{3}$.", 1),
    # ---- 2. thousands inside tuples, intervals, sets ----
    R("thousands", "5200", r"\boxed{(5,200)}", 0),
    R("thousands", "(5,200)", r"\boxed{(5, 200)}", 1),
    R("thousands", "(5, 200)", r"The vertex is $\boxed{(5,200)}$.", 1),
    R("thousands", r"\{2,375\}", r"\boxed{\{375,2\}}", 1),
    R("thousands", "2375", r"\boxed{\{2,375\}}", 0),
    R("thousands", r"(-\infty, 4] \cup [6, 125)", r"\boxed{(-\infty,4]\cup[6,125)}", 1),
    R("thousands", "[0,120]", r"\boxed{[0, 120]}", 1),
    R("thousands", "[0,120]", r"\boxed{120}", 0),
    R("thousands", r"8,\! 640", r"\boxed{8640}", 1),
    R("thousands", "8640", r"The total is $\boxed{8,\!640}$", 1),
    R("thousands", "8640", r"\boxed{8{,}640}", 1),
    R("thousands", "8640", r"\boxed{8\,640}", 1),
    R("thousands", "86400", r"\boxed{8,640}", 0),
    R("thousands", r"1,\!000,\!000", r"\boxed{1000000}", 1),
    R("thousands", "1000000", r"\boxed{1,\! 000,\! 000}", 1),
    R("thousands", r"\$1,\!250", r"\boxed{\$1250}", 1),
    R("thousands", r"(1,\!500, 3)", r"\boxed{(1500,3)}", 1),
    R("thousands", "(1,500)", r"\boxed{1500}", 0),
    # ---- 3. <answer> tags after an answer phrase ----
    R("tag_after_phrase", "64", "The final answer is: <answer> 64 </answer>", 1),
    R("tag_after_phrase", "64", r"So the answer is <answer>\(64\)</answer>.", 1),
    R("tag_after_phrase", "64", r"**Final Answer** <answer>$\boxed{64}$</answer>", 1),
    R("tag_after_phrase", "46", "The answer is <answer> 64 </answer>", 0),
    R("tag_after_phrase", r"\frac{5}{12}", r"Answer: <answer> \dfrac{5}{12} </answer>", 1),
    R("tag_after_phrase", r"\frac{5}{12}", r"Answer: <answer> \tfrac{5}{13} </answer>", 0),
    R("tag_after_phrase", "-3", "Therefore, the answer is <answer>-3</answer>", 1),
    R("tag_after_phrase", "(2,3)", "The answer is <answer>(2, 3)</answer>", 1),
    R("tag_after_phrase", "(2,3)", "The answer is <answer>(3, 2)</answer>", 0),
    R(
        "tag_after_phrase",
        "15",
        "<think>3*5=15</think>\nThe answer is <answer>15 apples</answer>",
        1,
    ),
    R("tag_after_phrase", r"15\%", r"Answer: <answer>15\%</answer>", 1),
    R("tag_after_phrase", "2500", r"the answer is < answer > \$2,500 </ answer >", 1),
    R("tag_after_phrase", "x=4", "Final answer: <answer>x = 4</answer>", 1),
    R("tag_after_phrase", "11", "The answer is <answer>\n11\n</answer>", 1),
    # ---- 4. "Answer:" followed by a sentence ----
    R("answer_sentence", "84", "Answer: The farmer has 84 chickens.", 1),
    R("answer_sentence", "84", "Answer: The farmer has 48 chickens.", 0),
    R("answer_sentence", "3600", r"The answer is: the company earned \$3,600 last month.", 1),
    R("answer_sentence", "3600", r"The answer is: the company earned \$36,000 last month.", 0),
    R("answer_sentence", "7", "**Answer:** Jake needs 7 more boxes.", 1),
    R("answer_sentence", "25", "Final Answer: After 4 days, the tank holds 25 liters.", 1),
    R("answer_sentence", "4", "Final Answer: After 4 days, the tank holds 25 liters.", 0),
    R("answer_sentence", "18", "Answer: Each of the 3 teams gets 18 players.", 1),
    R("answer_sentence", "60", "Answer: The speed is 60 km/h.", 1),
    R("answer_sentence", "0.75", "Answer: The probability is 0.75.", 1),
    R("answer_sentence", r"\frac{3}{4}", r"Answer: The probability is $\frac{3}{4}$.", 1),
    R("answer_sentence", "9", "Answer: She will be 9 years old.", 1),
    R("answer_sentence", "32", "The answer is: there are 32 students in the class.", 1),
    R("answer_sentence", "1250", "A: The total cost is $1,250.", 1),
    R("answer_sentence", "1250", "A: The total cost is $1,205.", 0),
    # ---- 5. chains, arrows, named quantities at the end ----
    R("chain", "31", r"$5 \times 6 + 1 = 30 + 1 = 31$", 1),
    R("chain", "30", r"$5 \times 6 + 1 = 30 + 1 = 31$", 0),
    R("chain", "6", r"$3y - 4 = 14 \Rightarrow 3y = 18 \Rightarrow y = 6$", 1),
    R("chain", "18", r"$3y - 4 = 14 \Rightarrow 3y = 18 \Rightarrow y = 6$", 0),
    R("chain", "7", r"$\implies n = 7$", 1),
    R("chain", "55", r"Thus $\angle B = 55^{\circ}$.", 1),
    R("chain", "125", r"Thus $m\angle XYZ = 125^\circ$.", 1),
    R("chain", "13", r"So $BC = 13$.", 1),
    R("chain", "9", r"Therefore $g(2) = 9$.", 1),
    R("chain", "5", r"Hence \( 45 \div 9 = 5 \) bags.", 1),
    R("chain", "9", r"Hence \( 45 \div 9 = 5 \) bags.", 0),
    R("chain", "3", r"Finally, $\log_3 27 = 3$.", 1),
    R("chain", "27", r"Finally, $\log_3 27 = 3$.", 0),
    R("chain", "x = 3y - 2", r"The relation is $x = 3y - 2$.", 1),
    R("chain", r"\frac{\pi}{3}", r"So $\theta = \frac{\pi}{3} \approx 1.047$.", 1),
    # ---- 6. a stray </think>, units glued to the value ----
    R("think_units", "480", "so the tank has 480L </think>", 1),
    R("think_units", "480", "so the total = 480ml\n</think>\n", 1),
    R("think_units", "75", "The cyclist rides 75km.", 1),
    R("think_units", "57", "The cyclist rides 75km.", 0),
    R("think_units", "20", "The parcel weighs 20kg.", 1),
    R("think_units", "2", "The parcel weighs 20kg.", 0),
    R("think_units", "90", "It takes 90min.", 1),
    R("think_units", "5", "The rope is 5cm long.", 1),
    R("think_units", "3.5", "The jug holds 3.5L of water.", 1),
    R("think_units", "8", "<think>maybe \\boxed{6}</think>\nThus, \\boxed{8}.", 1),
    R("think_units", "6", "<think>maybe \\boxed{6}</think>\nThus, \\boxed{8}.", 0),
    R("think_units", "12", "<think>so we get \\boxed{12}.</think>", 1),
    R("think_units", "250", r"\boxed{250\text{g}}", 1),
    R("think_units", "72", "The answer is 72mph.", 1),
    R("think_units", "45", "so the angle is 45° </think>", 1),
    # ---- 7. hallucinated continuations ----
    R(
        "continuation",
        "21",
        "So she has \\boxed{21} stickers.\nUser: What if she buys 4 more?\nAssistant: \\boxed{25}",
        1,
    ),
    R(
        "continuation",
        "25",
        "So she has \\boxed{21} stickers.\nUser: What if she buys 4 more?\nAssistant: \\boxed{25}",
        0,
    ),
    R(
        "continuation",
        "9",
        "The answer is 9.<|eot_id|><|start_header_id|>user<|end_header_id|>\nAnd 2 more? The answer is 11.",
        1,
    ),
    R("continuation", "9", "The answer is 9.\n<start_of_turn>user\nadd 2 \\boxed{11}", 1),
    R("continuation", "11", "The answer is 9.\n<start_of_turn>user\nadd 2 \\boxed{11}", 0),
    R(
        "continuation",
        "9",
        "The final answer is $\\boxed{9}$ [INST] next: 4+4 [/INST] $\\boxed{8}$",
        1,
    ),
    R(
        "continuation",
        "9",
        "#### 9\n\nQuestion: Tim has 6 cars and buys 2. How many?\nAnswer: 6 + 2 = 8\n#### 8",
        1,
    ),
    R(
        "continuation",
        "8",
        "#### 9\n\nQuestion: Tim has 6 cars and buys 2. How many?\nAnswer: 6 + 2 = 8\n#### 8",
        0,
    ),
    R(
        "continuation",
        "30",
        "Hence the answer is 30.\n\nHuman: Thanks! Now what is 5 times 7?\n\nAssistant: 35",
        1,
    ),
    R(
        "continuation",
        "35",
        "Hence the answer is 30.\n\nHuman: Thanks! Now what is 5 times 7?\n\nAssistant: 35",
        0,
    ),
    R("continuation", "4", "A: 4\n\nQ: What is 10 - 3?\nA: 7", 1),
    R("continuation", "7", "A: 4\n\nQ: What is 10 - 3?\nA: 7", 0),
    R(
        "continuation",
        "16",
        "The answer is \\boxed{16}.\n\nProblem 3: Find $2^5$. Solution: \\boxed{32}",
        1,
    ),
    R(
        "continuation",
        "16",
        "The answer is 16.<|im_end|>\n<|im_start|>user\nNow double it.<|im_end|>\n<|im_start|>assistant\n32",
        1,
    ),
    R(
        "continuation",
        "16",
        "So the answer is \\boxed{16}.<|user|>\nWhat is 3+3?<|assistant|>\\boxed{6}",
        1,
    ),
    # ---- 8. approximations (the MATH convention, the default) ----
    R("approximation", r"\frac{1}{7}", r"\boxed{0.142857}", 0),
    R("approximation", r"\frac{1}{7}", r"\boxed{\frac{2}{14}}", 1),
    R("approximation", r"\sqrt{5}", r"\boxed{2.236}", 0),
    R("approximation", r"\sqrt{5}", r"\boxed{5^{1/2}}", 1),
    R("approximation", "e", r"\boxed{2.71828}", 0),
    R("approximation", r"2\pi", r"\boxed{6.2832}", 0),
    R("approximation", r"\frac{3\pi}{2}", r"\boxed{1.5\pi}", 1),
    R("approximation", "0.33", r"\boxed{0.33}", 1),
    R("approximation", "0.33", r"\boxed{\frac{1}{3}}", 0),
    R("approximation", "2.5", r"\boxed{\dfrac{5}{2}}", 1),
    R("approximation", "2.5", r"\boxed{2\frac{1}{2}}", 1),
    R("approximation", r"\frac{7}{16}", r"\boxed{0.4375}", 1),
    R("approximation", r"\frac{5}{6}", r"\boxed{0.8\overline{3}}", 1),
    R("approximation", r"\frac{5}{6}", r"\boxed{0.833}", 0),
    R("approximation", r"\sqrt{2}", r"\boxed{\approx 1.414}", 0),
    R("approximation", r"12.5\%", r"\boxed{12.5\%}", 1),
    R("approximation", r"\frac{1}{8}", r"\boxed{12.5\%}", 1),
    R("approximation", r"\frac{\sqrt{3}}{3}", r"\boxed{0.57735}", 0),
    # ---- 9. clock times, hedges ----
    R("clock_hedge", "5:00", r"\boxed{10:00}", 0),
    R("clock_hedge", "5:00", r"\boxed{5:00}", 1),
    R("clock_hedge", "5:00", r"\boxed{17:00}", 1),
    R("clock_hedge", "6:45", r"\boxed{6:45 \text{ PM}}", 1),
    R("clock_hedge", "6:45", r"\boxed{2:15}", 0),
    R("clock_hedge", "11:20", r"The meeting ends at \boxed{11:20 a.m.}", 1),
    R("clock_hedge", "2:3", r"\boxed{4:6}", 1),
    R("clock_hedge", "15", "The answer is 15, or possibly 16.", 0),
    R("clock_hedge", "15", "The answer is probably 15 or 16.", 0),
    R("clock_hedge", "15", r"It is either $\boxed{15}$ or $\boxed{16}$.", 0),
    R("clock_hedge", "15", "The answer is 15. Or maybe 17.", 0),
    R("clock_hedge", "15", "The answer is 15 (or perhaps 16).", 0),
    R("clock_hedge", "15", r"The answer is 15, since $3 \cdot 5 = 15$.", 1),
    R("clock_hedge", "15, 16", r"The roots are \boxed{15} and \boxed{16}.", 1),
    R("clock_hedge", "15", "So the answer is 15. Alternatively, it might be 20.", 0),
    # ---- 10. missing forms ----
    R("forms", "(4,-3)", r"\boxed{x=4, y=-3}", 1),
    R("forms", "(4,-3)", r"\boxed{x=-3, y=4}", 0),
    R("forms", "(4,-3)", r"\boxed{x = 4,\ y = -3}", 1),
    R("forms", "(1,0,-2)", r"\boxed{(x, y, z) = (1, 0, -2)}", 1),
    R("forms", "(1,0,-2)", r"\boxed{(x,y,z)=(1,-2,0)}", 0),
    R(
        "forms",
        r"\begin{pmatrix} 2 & -1 \\ 0 & 3 \end{pmatrix}",
        r"\boxed{\left[\begin{array}{rr} 2 & -1 \\ 0 & 3 \end{array}\right]}",
        1,
    ),
    R(
        "forms",
        r"\begin{pmatrix} 2 & -1 \\ 0 & 3 \end{pmatrix}",
        r"\boxed{\left[\begin{array}{rr} 2 & 0 \\ -1 & 3 \end{array}\right]}",
        0,
    ),
    R("forms", "8", r"\boxed{8 \textnormal{ m/s}}", 1),
    R("forms", "8", r"\boxed{8\,\text{m/s}}", 1),
    R("forms", "90", r"\boxed{90 \text{ km/h}}", 1),
    R("forms", "90", r"\boxed{9 \text{ km/h}}", 0),
    R("forms", r"\frac{AE}{EC}=\frac{4}{7}", r"\boxed{\frac47}", 1),
    R("forms", r"\frac{AE}{EC}=\frac{4}{7}", r"\boxed{\dfrac{7}{4}}", 0),
    R("forms", r"x = \pm 5, 1", r"\boxed{5, -5, 1}", 1),
    R("forms", r"x = \pm 5, 1", r"\boxed{5, 1}", 0),
    R("forms", r"-1 < p < q < 3", r"\boxed{-1<p<q<3}", 1),
    R("forms", r"-1 < p < q < 3", r"\boxed{-1 < q < p < 3}", 0),
    R("forms", "5", r"\boxed{\lfloor 5.7 \rfloor}", 1),
    R("forms", "6", r"\boxed{\lfloor 5.7 \rfloor}", 0),
    R("forms", "13", r"\boxed{|5+12i|}", 1),
    R("forms", "13", r"\boxed{\left|5-12i\right|}", 1),
    R("forms", "17", r"\boxed{|5+12i|}", 0),
    R("forms", "-4", r"\boxed{\lceil -4.5 \rceil}", 1),
    # ---- 11. unit conversions: never converted (the graders' rule) ----
    R("unit_conversion", "150", r"\boxed{150 \text{ cm}}", 1),
    R("unit_conversion", "150", r"\boxed{1.5 \text{ m}}", 0),
    R("unit_conversion", r"150 \text{ cm}", r"\boxed{1.5 \text{ m}}", 0),
    R("unit_conversion", r"150 \text{ cm}", r"\boxed{150 \text{ m}}", 0),
    R("unit_conversion", r"150 \text{ cm}", r"\boxed{150}", 1),
    R("unit_conversion", r"150 \text{ cm}", r"\boxed{150 \text{ centimeters}}", 1),
    R("unit_conversion", "2", r"\boxed{120 \text{ minutes}}", 0),
    R("unit_conversion", r"2 \text{ hours}", r"\boxed{2 \text{ hrs}}", 1),
    R("unit_conversion", r"2 \text{ hours}", r"\boxed{2 \text{ minutes}}", 0),
    R("unit_conversion", "3.5", r"\boxed{3500 \text{ g}}", 0),
    R("unit_conversion", "3500", r"\boxed{3.5 \text{ kg}}", 0),
    R("unit_conversion", "500", r"The bottle holds \boxed{0.5 \text{ L}}", 0),
    R("unit_conversion", "500", r"\boxed{500 \text{ mL}}", 1),
    R("unit_conversion", r"\$5", r"\boxed{500 \text{ cents}}", 0),
    R("unit_conversion", r"5 \text{ dollars}", r"\boxed{\$5}", 1),
    R("unit_conversion", "36", r"\boxed{36 \text{ in}^2}", 1),
    R("unit_conversion", r"36 \text{ in}^2", r"\boxed{36 \text{ in}}", 0),
    R("unit_conversion", "20", r"\boxed{20 \text{ m/s}}", 1),
    R("unit_conversion", r"20 \text{ m/s}", r"\boxed{72 \text{ km/h}}", 0),
    R("unit_conversion", r"72 \text{ km/h}", r"\boxed{72 \text{ m/s}}", 0),
    R("unit_conversion", r"72 \text{ km/h}", r"\boxed{72 \text{ kilometers per hour}}", 1),
    R("unit_conversion", "12", r"\boxed{1 \text{ ft}}", 0),
    # ---- 12. number words in prose ----
    R("number_words", "12", "The answer is twelve.", 1),
    R("number_words", "12", "The answer is eleven.", 0),
    R("number_words", "25", "The answer is twenty-five.", 1),
    R("number_words", "25", "The answer is twenty five.", 1),
    R("number_words", "52", "The answer is twenty-five.", 0),
    R("number_words", "3", "There are three apples left.", 1),
    R("number_words", "4", "So Tom has four marbles.", 1),
    R("number_words", "5", "So Tom has four marbles.", 0),
    R("number_words", "100", "The answer is one hundred.", 1),
    R("number_words", "120", "The answer is one hundred twenty.", 1),
    R("number_words", "7", r"\boxed{\text{seven}}", 1),
    R("number_words", "7", r"\boxed{\text{eight}}", 0),
    R("number_words", "2", "The graph has two $x$-intercepts.", 1),
    R("number_words", "0", "The answer is zero.", 1),
    R("number_words", "40", "The answer is forty.", 1),
    R("number_words", "14", "The answer is forty.", 0),
    R("number_words", "1000", "The answer is one thousand.", 1),
    R("number_words", "3", "Sarah needs three more cups.", 1),
    R("number_words", "99", "The answer is ninety-nine.", 1),
    # ---- 13. a function written for an expression gold ----
    R("function_gold", "x^2+1", r"\boxed{f(x)=x^2+1}", 1),
    R("function_gold", "x^2+1", r"\boxed{f(x)=x^2+2}", 0),
    R("function_gold", "x^2+1", r"\boxed{f(x) = 1 + x^2}", 1),
    R("function_gold", "f(x)=x^2+1", r"\boxed{x^2+1}", 1),
    R("function_gold", r"\frac{x-3}{2}", r"\boxed{f^{-1}(x) = \frac{x-3}{2}}", 1),
    R("function_gold", r"\frac{x-3}{2}", r"\boxed{f^{-1}(x)=\dfrac{x+3}{2}}", 0),
    R("function_gold", "2x+3", r"\boxed{y = 2x + 3}", 1),
    R("function_gold", "2x", r"\boxed{f'(x) = 2x}", 1),
    R("function_gold", "2x", r"\boxed{f'(x) = 2}", 0),
    R("function_gold", "3t^2", r"\boxed{v(t)=3t^2}", 1),
    R("function_gold", "5", r"\boxed{f(2)=5}", 1),
    R("function_gold", "x^2+1", r"\boxed{f(2)=5}", 0),
    R("function_gold", "x^2+1", r"The function is $f(x) = x^2 + 1$.", 1),
    R("function_gold", r"\sin x", r"\boxed{g(x) = \sin x}", 1),
    R("function_gold", r"\sin x", r"\boxed{g(x) = \cos x}", 0),
    R("function_gold", "x^2+1", r"\boxed{f(x)=(x+1)^2}", 0),
    R("function_gold", "4x-1", r"\boxed{h(x) = 4x - 1}", 1),
    R("function_gold", "e^x", r"\boxed{p(x)=e^{x}}", 1),
    # ---- 14. commas inside a gold's brackets ----
    R("gold_thousands", r"(2,12) \cup (12,102)", r"\boxed{(2,12)\cup(12,102)}", 1),
    R("gold_thousands", r"(2,12) \cup (12,102)", r"\boxed{(2, 12) \cup (12, 102)}", 1),
    R("gold_thousands", r"(2,12) \cup (12,102)", r"\boxed{(2,102)}", 0),
    R("gold_thousands", r"(2,12) \cup (12,102)", r"\boxed{(2,12)\cup(12,120)}", 0),
    R("gold_thousands", r"[1,100] \cup [200,300]", r"\boxed{[1, 100] \cup [200, 300]}", 1),
    R("gold_thousands", "(0,365]", r"\boxed{(0, 365]}", 1),
    R("gold_thousands", "(0,365]", r"\boxed{365}", 0),
    R("gold_thousands", r"\{10,100,1000\}", r"\boxed{\{10, 100, 1000\}}", 1),
    R("gold_thousands", r"\{10,100,1000\}", r"\boxed{10, 100, 1000}", 1),
    R("gold_thousands", r"\{10,100,1000\}", r"\boxed{\{10100, 1000\}}", 0),
    R("gold_thousands", r"(1,\!000, 2,\!000)", r"\boxed{(1000,2000)}", 1),
    R("gold_thousands", r"[3,\!500, 4,\!200]", r"\boxed{[3500, 4200]}", 1),
    R("gold_thousands", r"[3,\!500, 4,\!200]", r"\boxed{[3, 500]}", 0),
    R("gold_thousands", "1,234", r"\boxed{1234}", 1),
    R("gold_thousands", "(6,750)", r"\boxed{6750}", 0),
    R("gold_thousands", r"x \in [5,125]", r"\boxed{[5,125]}", 1),
    R("gold_thousands", r"(-\infty, 100) \cup (100, \infty)", r"\boxed{x \neq 100}", 1),
    R("gold_thousands", r"12,\! 500", r"\boxed{12500}", 1),
]

KNOWN_WRONG: dict[tuple[str, str], str] = {
    # (gold, response): why ours is still wrong. A ratchet: the test fails when a row listed
    # here becomes right (remove it) or a row not listed is wrong. Never a false positive.
    (
        "3",
        "There are three apples left.",
    ): "a number word in a final statement is no value (extraction)",
    (
        "4",
        "So Tom has four marbles.",
    ): "a number word in a final statement is no value (extraction)",
    (
        "2",
        "The graph has two $x$-intercepts.",
    ): "a number word in a final statement is no value (extraction)",
    (
        "3",
        "Sarah needs three more cups.",
    ): "a number word in a final statement is no value (extraction)",
}
