# ruff: noqa: E501 - a table of hand-written rows; one row per line reads best
r"""Hand-written cases of issue 27's ten fault kinds, in the styles real models write.

Each row is (kind, gold, response, expected reward). ``expected`` is what is *right*: the
answer the response gives, compared with the gold; 0 when it gives none (an echo, a hedge, a
truncated computation, a number inside something else). The rows are new cases of each kind,
not the issue's own examples (those are in ``test_math_extract_kinds.py`` beside them), and
imitate Qwen-Math (``\boxed{}`` in ``\(..\)``), DeepSeek-R1 / R1-Zero (``<think>``,
``<answer>``), Llama ("The final answer is"), GSM8K-tuned (``####``, ``A:``) and base models
(prose, echoes, invented next turns). Run by ``tests/verifiers/test_math_extract_kinds.py``
and by ``python -m bench verifiers_kinds`` beside math-verify.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["KINDS", "ROWS", "Row"]


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
    # kinds found in real outputs after the redesign (the adjudicated rows it still missed)
    "broken_tag": "11. answer tags as small models break or name them",
    "garbage": "12. an answer, then degenerate text (other scripts, invented tasks)",
    "program_check": "13. a conclusion, then a program that confirms it, then nothing stated",
    "feedback": "14. an answer, then an invented grader's turn ('Great job! Your answer is correct')",
    "count_words": "15. a final count in words ('The graph has two y-intercepts.')",
    "bare_command": "16. bare unknown LaTeX commands of degenerate text are no value",
}

R = Row
ROWS: list[Row] = [
    # ---- 1. a number guessed from inside something else ----
    R(
        "inside",
        "5",
        r"<think>The diagonal is \(\sqrt{5}\).</think> <answer> \(\sqrt{5}\) </answer>",
        0,
    ),
    R("inside", "2", r"So the side length must be $2^{3}$", 0),
    R("inside", "8", r"So the side length must be $2^{3}$", 1),
    R("inside", "7", "<answer> 3, 7 </answer>", 0),
    R("inside", "3, 7", "<answer> 3, 7 </answer>", 1),
    R("inside", "4", r"Expanding gives 3x^2 + 12x + 4y^4", 0),
    R("inside", "1", "We compute x_1 + x_2 = -b/a and then", 0),
    R("inside", "12", "```python\nprint(12 * 3)\n```", 0),
    R("inside", "36", "```python\nprint(12 * 3)\n```\n```output\n36\n```\nSo the total is 36.", 1),
    R("inside", "6", r"The area is \frac{1}{2} \cdot 3 \cdot 4 = 6 square units.", 1),
    R("inside", "2", r"The area is \frac{1}{2} \cdot 3 \cdot 4 = 6 square units.", 0),
    R("inside", "10", "First, 2 * 5 = 10. Then we need to add the", 0),
    R("inside", "3", "Tom has 3 apples and buys 4 more. How many apples does Tom have?", 0),
    R("inside", "15", "So far we have 3 * 5 = 15, and next we multiply 15 by", 0),
    R("inside", "9", r"Thus the answer is \(3^2 + 4^2\)", 0),
    R("inside", "25", r"Thus the answer is \(3^2 + 4^2\)", 1),
    R("inside", "3", "We know that z = 3. Therefore, we can solve for x as follows:", 0),
    R("inside", "40", "Mia saved $40 in May and $55 in June, for a total of $95.", 0),
    # ---- 2. thousands inside tuples, intervals, sets ----
    R("thousands", "2100", r"The point is $\boxed{(2,100)}$.", 0),
    R("thousands", "(2,100)", r"The point is $\boxed{(2, 100)}$.", 1),
    R("thousands", "(2, 100)", r"The point is $\boxed{(2,100)}$.", 1),
    R("thousands", r"\{1,250\}", r"\boxed{\{250, 1\}}", 1),
    R("thousands", "1250", r"\boxed{\{1,250\}}", 0),
    R("thousands", "[3,500)", r"\boxed{[3, 500)}", 1),
    R("thousands", r"(-\infty, 1) \cup (2, 400]", r"\boxed{(-\infty,1)\cup(2,400]}", 1),
    R("thousands", "12,\\! 345", r"\boxed{12345}", 1),
    R("thousands", "12345", r"The total is $\boxed{12,\! 345}$.", 1),
    R("thousands", "12345", r"The total is $\boxed{12{,}345}$.", 1),
    R("thousands", "3,\\! 200", r"\boxed{3,200}", 1),
    R("thousands", "3200", r"So she earns $3,200 in total.", 1),
    # ---- 3. <answer> tags after an answer phrase ----
    R("tag_after_phrase", "42", "<think>6*7</think> The final answer is <answer>42</answer>", 1),
    R("tag_after_phrase", "42", "<think>6*7</think> Answer: <answer> 42 </answer>", 1),
    R("tag_after_phrase", "42", "<think>6*7</think>\n**Answer:** <answer>$42$</answer>", 1),
    R("tag_after_phrase", "41", "<think>6*7</think> The answer is <answer>42</answer>", 0),
    R("tag_after_phrase", r"\frac{3}{4}", r"The answer is <answer>\frac{3}{4}</answer>", 1),
    R("tag_after_phrase", "x=3", "Therefore the answer is: <answer> x = 3 </answer>", 1),
    R("tag_after_phrase", "17", "answer: < answer > 17 </ answer >", 1),
    # ---- 4. "Answer:" followed by a sentence ----
    R("answer_sentence", "45", "Answer: The car uses 45 liters of fuel.", 1),
    R("answer_sentence", "45", "Answer: The car uses 54 liters of fuel.", 0),
    R("answer_sentence", "2250", "The answer is: he paid $2,250 for the bikes.", 1),
    R("answer_sentence", "12", "**Answer:** Maria needs 12 more stamps.", 1),
    R("answer_sentence", "8", "Answer: After 3 weeks, Sam has 8 marbles left.", 1),
    R("answer_sentence", "3", "Answer: After 3 weeks, Sam has 8 marbles left.", 0),
    R("answer_sentence", "30", "Final answer: The rectangle's perimeter is 30 cm.", 1),
    R("answer_sentence", "6", "Answer: Each friend gets 6 cookies out of the 24.", 1),
    R("answer_sentence", "Paris", "The answer is Paris.", 1),
    R("answer_sentence", "150", "Answer: In total, the school raised $150 for charity.", 1),
    R("answer_sentence", "5", "A: Jill has 5 pencils.", 1),
    R("answer_sentence", "95", "Mia saved $40 in May and $55 in June, for a total of $95.", 1),
    R("answer_sentence", "2", "We need 2 more cups.\n\nNote: the recipe uses 3 eggs.", 1),
    # ---- 5. chains, arrows, named quantities at the end ----
    R("chain", "24", r"So the total is $4 \times 5 + 4 = 20 + 4 = 24$.", 1),
    R("chain", "20", r"So the total is $4 \times 5 + 4 = 20 + 4 = 24$.", 0),
    R("chain", "5", r"$2x + 3 = 13 \implies x = 5$", 1),
    R("chain", "5", r"$2x + 3 = 13 \Longrightarrow 2x = 10 \Longrightarrow x = 5$", 1),
    R("chain", "65", r"Therefore $m\angle ABC = 65^\circ$.", 1),
    R("chain", "7", r"Hence $AB = 7$.", 1),
    R("chain", "12", r"So $f(3) = 12$.", 1),
    R("chain", "12", r"So the area is \( 3 \times 4 = 12 \) square meters.", 1),
    R("chain", "17", "Adding them, m + n = 17.", 1),
    R("chain", "4", r"Finally, $\log_2 16 = 4$.", 1),
    R("chain", "y = 2x + 1", r"The line is $y = 2x + 1$.", 1),
    R("chain", "x^2 + y^2 = 25", r"The circle is $x^2 + y^2 = 25$.", 1),
    R("chain", "2", r"So $2x = 4$.", 0),
    R("chain", r"\frac{\sqrt{3}}{2}", r"So $\sin 60^\circ = \frac{\sqrt{3}}{2} \approx 0.866$.", 1),
    # ---- 6. a stray </think>, units glued to the value ----
    R("think_units", "250", "The bottle holds 250ml </think>", 1),
    R("think_units", "250", "so 1000 - 750 = 250ml\n</think>", 1),
    R("think_units", "3", "Each box weighs 3kg.", 1),
    R("think_units", "45", "The trip takes 45min in total.", 1),
    R("think_units", "60", "The car drives at 60km/h.", 1),
    R("think_units", "9", "The wall is 9m tall.", 1),
    R("think_units", "9", "The wall is 8m tall.", 0),
    R("think_units", "5", "<think>draft \\boxed{4}</think>\nSo the answer is \\boxed{5}.", 1),
    R("think_units", "4", "<think>draft \\boxed{4}</think>\nSo the answer is \\boxed{5}.", 0),
    R("think_units", "5", "<think>We get \\boxed{5}. </think>", 1),
    # ---- 7. hallucinated continuations ----
    R(
        "continuation",
        "14",
        "So he has \\boxed{14} cards.\nUser: Now how many if he loses 3?\nAssistant: \\boxed{11}",
        1,
    ),
    R(
        "continuation",
        "11",
        "So he has \\boxed{14} cards.\nUser: Now how many if he loses 3?\nAssistant: \\boxed{11}",
        0,
    ),
    R(
        "continuation",
        "14",
        "The answer is 14.<end_of_turn>\n<start_of_turn>user\nAnd 3 more? The answer is 17.",
        1,
    ),
    R(
        "continuation",
        "14",
        "The answer is 14.\n[INST] And with 3 more? [/INST] The answer is 17.",
        1,
    ),
    R(
        "continuation",
        "14",
        "The answer is 14. <|user|>\nand 3 more? <|assistant|> The answer is 17.",
        1,
    ),
    R("continuation", "14", "The answer is 14.<|im_end|>\n<|im_start|>user\nThe answer is 17.", 1),
    R(
        "continuation",
        "14",
        "#### 14\n\nQuestion: Ann has 5 pens and buys 12. How many?\nAnswer: 12 + 5 = 17\n#### 17",
        1,
    ),
    R(
        "continuation",
        "17",
        "#### 14\n\nQuestion: Ann has 5 pens and buys 12. How many?\nAnswer: 12 + 5 = 17\n#### 17",
        0,
    ),
    R("continuation", "14", "Human: The answer is 14.\n\nHuman: what about 17?", 1),
    R("continuation", "8", "A: 8\n\nQ: What is 3 + 4?\nA: 7", 1),
    R(
        "continuation",
        "6",
        "The final answer is $\\boxed{6}$\n\nProblem 2: Compute $5+5$. The final answer is $\\boxed{10}$",
        1,
    ),
    # an invented user turn answered by an invented assistant turn: the user's words are
    # never the answer (real row a15efca6c7)
    R(
        "continuation",
        "3",
        "<answer> … </think>\nUser: Tom had 8 pens and gave away 3. How many are left?\nAssistant: <think> …</think>\n",
        0,
    ),
    R(
        "continuation",
        "1",
        "<answer> … </think>\nUser: Mia has 5 cards and buys 4 more. How many?\nAssistant: <think> …</think>\nLet's solve each.\n\n### Problem 1: Smores\nEach box makes 24 smores, so we need 1 box.\n\n### Problem 2: Cards\nMia has 5 + 4 = 9 cards.",
        1,
    ),
    R(
        "continuation",
        "9",
        "<answer> … </think>\nUser: Mia has 5 cards and buys 4 more. How many?\nAssistant: <think> …</think>\nLet's solve each.\n\n### Problem 1: Smores\nEach box makes 24 smores, so we need 1 box.\n\n### Problem 2: Cards\nMia has 5 + 4 = 9 cards.",
        0,
    ),
    R("continuation", "56", "User: Compute 7 * 8.\nAssistant: 7 * 8 = 56", 1),
    R("continuation", "8", "User: Compute 7 * 8.\nAssistant: The product is 56.", 0),
    R(
        "continuation",
        "14",
        "The total is 14.\nUser: Great. Now if Sam gives 5 away?\nAssistant: 9",
        1,
    ),
    R(
        "continuation",
        "9",
        "The total is 14.\nUser: Great. Now if Sam gives 5 away?\nAssistant: 9",
        0,
    ),
    # ---- 8. approximations ----
    R("approximation", r"\frac{2}{3}", r"\boxed{0.6667}", 0),
    R("approximation", r"\frac{2}{3}", r"\boxed{\frac{4}{6}}", 1),
    R("approximation", r"\sqrt{2}", r"\boxed{1.4142135623730951}", 0),
    R("approximation", r"\pi", r"\boxed{3.14159}", 0),
    R("approximation", r"\frac{\pi}{4}", r"\boxed{0.25\pi}", 1),
    R("approximation", "0.67", r"\boxed{0.67}", 1),
    R("approximation", "0.67", r"\boxed{\frac{2}{3}}", 0),
    R("approximation", "1.5", r"\boxed{\frac{3}{2}}", 1),
    R("approximation", r"\frac{3}{8}", r"\boxed{0.375}", 1),
    R("approximation", r"2\sqrt{3}", r"\boxed{3.4641}", 0),
    R("approximation", "3.46", r"\boxed{3.46}", 1),
    # ---- 9. clock times, hedges ----
    R("clock_hedge", "3:00", r"\boxed{6:00}", 0),
    R("clock_hedge", "3:00", r"\boxed{3:00}", 1),
    R("clock_hedge", "9:30", r"The train arrives at \boxed{9:30 \text{ AM}}.", 1),
    R("clock_hedge", "2:15", r"\boxed{4:30}", 0),
    R("clock_hedge", "1:3", r"\boxed{2:6}", 1),
    R("clock_hedge", "12", "The answer is 12, or possibly 13.", 0),
    R("clock_hedge", "12", "The answer is 12 (or maybe 13).", 0),
    R("clock_hedge", "12", r"It is either \boxed{12} or \boxed{13}.", 0),
    R("clock_hedge", "12, 13", r"The roots are \boxed{12} or \boxed{13}.", 1),
    R("clock_hedge", "12", "The answer is 12, because 3 * 4 = 12.", 1),
    # a hedge in the next sentence (found by a fresh-user trial): another value offered
    R("clock_hedge", "5", "The answer is 5. Or maybe 7.", 0),
    R("clock_hedge", "5", "The answer is 5. Maybe it's 7.", 0),
    R("clock_hedge", "5", "So the answer is 5. It could also be 7.", 0),
    R("clock_hedge", "5", "The answer is 5. Alternatively, 6 if we count the start.", 0),
    R("clock_hedge", "5", "The answer is 5. Or, to check, 2 + 3 = 5 works.", 1),
    R("clock_hedge", "5", "The answer is 5. Perhaps 5 apples is a lot, but it is right.", 1),
    R("clock_hedge", "5", "The answer is 5. Maybe we should double-check: 2 + 3 = 5.", 1),
    # ---- 10. missing forms ----
    R("forms", "(3,-2)", r"\boxed{a=3, b=-2}", 1),
    R("forms", "(3,-2)", r"\boxed{a=-2, b=3}", 0),
    R("forms", "(2,5,7)", r"\boxed{(p,q,r)=(2,5,7)}", 1),
    R("forms", "(2,5,7)", r"\boxed{(p,q,r)=(2,7,5)}", 0),
    R(
        "forms",
        r"\begin{pmatrix} 1 & 0 \\ 0 & 1 \end{pmatrix}",
        r"\boxed{\left[\begin{array}{cc} 1 & 0 \\ 0 & 1 \end{array}\right]}",
        1,
    ),
    R(
        "forms",
        r"\begin{pmatrix} 1 & 0 \\ 0 & 1 \end{pmatrix}",
        r"\boxed{\left[\begin{array}{cc} 0 & 1 \\ 1 & 0 \end{array}\right]}",
        0,
    ),
    R("forms", "12", r"\boxed{12\textnormal{ cm}}", 1),
    R("forms", "3", r"\boxed{3 \text{ m/s}^2}", 1),
    R("forms", "40", r"\boxed{40\ \text{km/h}}", 1),
    R("forms", r"\frac{BD}{DC}=\frac{3}{5}", r"\boxed{\frac{3}{5}}", 1),
    R("forms", r"\frac{BD}{DC}=\frac{3}{5}", r"\boxed{\frac{5}{3}}", 0),
    R("forms", r"x=\pm 3, 4", r"\boxed{-3, 3, 4}", 1),
    R("forms", r"x=\pm 3, 4", r"\boxed{3, 4}", 0),
    R("forms", r"0 < x < y < 2", r"\boxed{0<x<y<2}", 1),
    R("forms", r"0 < x < y < 2", r"\boxed{2 > y > x > 0}", 1),
    R("forms", r"0 < x < y < 2", r"\boxed{0<y<x<2}", 0),
    R("forms", "7", r"\boxed{\lceil 6.3 \rceil}", 1),
    R("forms", "6", r"\boxed{\lfloor 6.9 \rfloor}", 1),
    R("forms", "5", r"\boxed{|3-4i|}", 1),
    R("forms", "5", r"\boxed{|3+4i|^2}", 0),
    R("forms", "(1, 2)", "The point is (1, 2).", 1),
    R("forms", "2", "The point is (1, 2).", 0),
    R("forms", "[0,1)", "So the range is [0, 1).", 1),
    R("forms", r"\{1,2\}", r"The set is \{1, 2\}.", 1),
    # ---- 11. answer tags as small models break or name them (real rows: a2eabde353, c5ceb4606c) ----
    R("broken_tag", "20", "so the count is 20.</ think> <answer> 20</ answers >", 1),
    R("broken_tag", "21", "so the count is 20.</ think> <answer> 20</ answers >", 0),
    R("broken_tag", r"\frac{3}{4}", r"</think> <answer> \frac{3}{4} </ANSWER", 1),
    R("broken_tag", "42", "6 * 7 = 42 </think>\n<answer> 42 </", 1),
    R("broken_tag", "41", "6 * 7 = 42 </think>\n<answer> 42 </", 0),
    R(
        "broken_tag",
        "12",
        "So the total is \\boxed{12}.\n\nIn this format the reasoning goes in the < think > tag and the answer in the < answer >section, 3 parts in all.",
        1,
    ),
    R(
        "broken_tag",
        "3",
        "So the total is \\boxed{12}.\n\nIn this format the reasoning goes in the < think > tag and the answer in the < answer >section, 3 parts in all.",
        0,
    ),
    R(
        "broken_tag",
        "6",
        "The sum is \\(\\boxed{11}\\). The number in the < answer > tag is 6.",
        0,
    ),
    R(
        "broken_tag",
        r"-\frac{\pi}{6}",
        r"</ think > <answer> \(\arcsin(-\frac12) = -\frac{\pi}{6}\)</ answer > The answer is \(\boxed{-\frac{\pi}{6}}\). The user asks a question and the answer enclosed within the < answer >tag is 1 value.",
        1,
    ),
    R("broken_tag", "9", "We put the answer between <think> and <answer> tags: 4 + 5 = 9", 1),
    R("broken_tag", "4", "We put the answer between <think> and <answer> tags: 4 + 5 = 9", 0),
    # ---- 12. an answer, then degenerate text (real rows: 24a4bfaca6, 25aa0754f0) ----
    R(
        "garbage",
        "15x - 80",
        "This simplifies to:$$-80$$\nPutting it all together, the simplified expression is:$$15x - 80$$</ дня>\n Cool五官. What grade 方orio\n9. She通风 蒙 mon\nNow the sum of the numbers in the tags is 5 + 6 = 11, so \\(\\boxed{11}\\).",
        1,
    ),
    R(
        "garbage",
        "11",
        "This simplifies to:$$-80$$\nPutting it all together, the simplified expression is:$$15x - 80$$</ дня>\n Cool五官. What grade 方orio\n9. She通风 蒙 mon\nNow the sum of the numbers in the tags is 5 + 6 = 11, so \\(\\boxed{11}\\).",
        0,
    ),
    R(
        "garbage",
        "36",
        "Therefore, the total number of marbles is 36.\n收到 Hello世界 the 清洗 answer\nQuestion 2 asks for 3 * 4 = 12, so \\boxed{12}.",
        1,
    ),
    R(
        "garbage",
        "12",
        "Therefore, the total number of marbles is 36.\n收到 Hello世界 the 清洗 answer\nQuestion 2 asks for 3 * 4 = 12, so \\boxed{12}.",
        0,
    ),
    R(
        "garbage",
        "71",
        "Thus, the value of \\(11 \\# 5\\) is \\(\\boxed{71}\\).</th头> <th>th</th> 咏2 fined路面大学1 任何形式 allow",
        1,
    ),
    R(
        "garbage",
        r"\frac{3}{4}",
        "Thus the sum of the series is \\(\\frac{3}{4}\\).\n\nFinally, theלין sum is left as it is.\n\nSo, the final answer is:\n\n\\[\n\\boxed{\\frac{3}{4}}\n\\]en\n并没有 Alternate顾客 or another 뭄~决赛ups",
        1,
    ),
    R(
        "garbage",
        r"\frac{1}{2}",
        "Thus the sum of the series is \\(\\frac{3}{4}\\).\n\nFinally, theלין sum is left as it is.\n\nSo, the final answer is:\n\n\\[\n\\boxed{\\frac{3}{4}}\n\\]en\n并没有 Alternate顾客 or another 뭄~决赛ups",
        0,
    ),
    # the value is never written before the garbage: the conclusion states nothing
    R(
        "garbage",
        "7",
        "We add 3 and 4. Thus, the total is 收到 Hello世界 the 清洗 answer 方orio wenig\n\nQuestion: what is 3 + 4? The answer is \\boxed{7}.",
        0,
    ),
    R(
        "garbage",
        "5",
        "So we have 2 + 3 here 收到 Hello世界 the 清洗 answer 方orio, and the final answer is \\boxed{5}.",
        1,
    ),
    # ---- 13. a conclusion, then a program that confirms it (real row f17e35c085) ----
    R(
        "program_check",
        "108",
        "From the above, the pair is $a = 6$ and $b = 18$. Therefore, the value of $ab$ is $6 \\cdot 18 = 108$. Let's confirm this.\n```python\na_val = 6\nb_val = 18\nprint(a_val * b_val)\n```\n```output\n108\n```\nThe correct value",
        1,
    ),
    R(
        "program_check",
        "18",
        "From the above, the pair is $a = 6$ and $b = 18$. Therefore, the value of $ab$ is $6 \\cdot 18 = 108$. Let's confirm this.\n```python\na_val = 6\nb_val = 18\nprint(a_val * b_val)\n```\n```output\n108\n```\nThe correct value",
        0,
    ),
    R(
        "program_check",
        "24",
        "Hence, the area is $\\frac{1}{2} \\cdot 8 \\cdot 6 = 24$. Let's verify with Python.\n```python\nprint(0.5 * 8 * 6)\n```\n```output\n24.0\n```\nThe code confirms our calculation.",
        1,
    ),
    # the program disagrees: the conclusion is not confirmed, and nothing else is stated
    R(
        "program_check",
        "19",
        "Therefore, the total is $12 + 7 = 19$. Let's verify.\n```python\nprint(12 + 8)\n```\n```output\n20\n```\nSo the",
        0,
    ),
    R(
        "program_check",
        "20",
        "Therefore, the total is $12 + 7 = 19$. Let's verify.\n```python\nprint(12 + 8)\n```\n```output\n20\n```\nSo the",
        0,
    ),
    # a statement after the program wins
    R(
        "program_check",
        "5",
        "Thus x = 5. Let's confirm.\n```python\nprint(5)\n```\n```output\n5\n```\nSo the answer is 6.",
        0,
    ),
    R(
        "program_check",
        "6",
        "Thus x = 5. Let's confirm.\n```python\nprint(5)\n```\n```output\n5\n```\nSo the answer is 6.",
        1,
    ),
    # no conclusion before the program: an intermediate value is not confirmed as the answer
    R(
        "program_check",
        "45",
        "First we compute 3 * 15 = 45. Let's check this step.\n```python\nprint(3 * 15)\n```\n```output\n45\n```\nNext we",
        0,
    ),
    # ---- 14. an answer, then an invented grader's turn (real row af39a39197) ----
    R(
        "feedback",
        "12",
        "The answer is 12. Great job! Your answer is correct. However, the total should be 15.",
        1,
    ),
    R(
        "feedback",
        "15",
        "The answer is 12. Great job! Your answer is correct. However, the total should be 15.",
        0,
    ),
    R(
        "feedback",
        "7",
        "So there are \\boxed{7} ways.\n\nWell done! Your solution is right, but note that \\boxed{8} also counts the empty set.",
        1,
    ),
    R(
        "feedback",
        "8",
        "So there are \\boxed{7} ways.\n\nWell done! Your solution is right, but note that \\boxed{8} also counts the empty set.",
        0,
    ),
    R(
        "feedback",
        "3",
        "Answer: She needs 3 packs. $\\color{green}{\\checkmark}$ Good job, Assistant! Your reasoning process and answer are correct. The final answer is that she needs 4 packs.",
        1,
    ),
    R(
        "feedback",
        "4",
        "Answer: She needs 3 packs. $\\color{green}{\\checkmark}$ Good job, Assistant! Your reasoning process and answer are correct. The final answer is that she needs 4 packs.",
        0,
    ),
    R("feedback", "9", "The answer is 8.\nYour reasoning is wrong. The correct answer is 9.", 0),
    R("feedback", "8", "The answer is 8.\nYour reasoning is wrong. The correct answer is 9.", 1),
    R(
        "feedback",
        "12",
        "So the answer is 12.\n\nGreat, your answer is correct! Now try: 3 more apples make 15.",
        1,
    ),
    R(
        "feedback",
        "15",
        "So the answer is 12.\n\nGreat, your answer is correct! Now try: 3 more apples make 15.",
        0,
    ),
    # praise before any answer cuts nothing
    R("feedback", "42", "Let's compute. Great job so far! Now 6 * 7 = 42.", 1),
    # ---- 15. a final count in words (real row 25edb784c6) ----
    R(
        "count_words",
        "2",
        "Solving gives \\( y = 2 \\pm \\sqrt{5} \\).\nThe graph of the parabola has two \\( y \\)-intercepts.",
        1,
    ),
    R(
        "count_words",
        "1",
        "Solving gives \\( y = 2 \\pm \\sqrt{5} \\).\nThe graph of the parabola has two \\( y \\)-intercepts.",
        0,
    ),
    R(
        "count_words",
        "3",
        "The discriminant is positive and the cubic changes sign twice. Therefore, there are three real solutions.",
        1,
    ),
    R(
        "count_words",
        "12",
        "Each interior angle is $150^\\circ$.\nSo the polygon has twelve sides.",
        1,
    ),
    R("count_words", "2", "We solve $x^2 = 4$. There are two cases to consider.", 0),
    R("count_words", "4", "First, there are four choices for the first digit.", 0),
    R("count_words", "2", "The two roots are distinct.", 0),
    R("count_words", "3", "The bag has two red balls and three blue balls.", 0),
    R("count_words", "5", "The set has five elements. Its sum is $15$.", 0),
    R("count_words", "15", "The set has five elements. Its sum is $15$.", 1),
    # ---- 16. bare unknown commands of degenerate text are no value (real row 1b700388d4) ----
    R(
        "bare_command",
        "14",
        "So, the simplified expression is indeed \\boxed{14}. tighter cases\n\\] < wenig > < answer > \\end{ array }\n\\] < \\ Mystery \\] < \\atrix > \\] < \\matrix > \\] < \\matrix > \\] < \\matrix > \\]",
        1,
    ),
    R(
        "bare_command",
        "13",
        "So, the simplified expression is indeed \\boxed{14}. tighter cases\n\\] < wenig > < answer > \\end{ array }\n\\] < \\ Mystery \\] < \\atrix > \\] < \\matrix > \\] < \\matrix > \\] < \\matrix > \\]",
        0,
    ),
    R("bare_command", "7", "We computed $3 + 4 = 7$ above.\n\\matrix \\atrix \\checkmark", 1),
    R("bare_command", "5", "We get $x = 5$. <answer> $\\checkmark$ </answer>", 1),
    R("bare_command", r"\infty", "The limit diverges, so the answer is $\\infty$.", 1),
    R("bare_command", r"\cos x", "So the derivative is $\\cos x$.", 1),
    R("bare_command", r"\frac{\pi}{2}", "The angle is therefore \\frac{\\pi}{2}.", 1),
    R("bare_command", "2", "The angle is therefore \\frac{\\pi}{2}.", 0),
]
