"""Answer extraction and normalization tables (pure functions, no worker pool)."""

from __future__ import annotations

import pytest

from grpo.verifiers.math import extract_answer, normalize_answer
from grpo.verifiers.math.extract import UnclosedBoxError


@pytest.mark.parametrize(
    ("response", "answer", "rule"),
    [
        (r"so $\boxed{\frac{1}{2}}$", r"\frac{1}{2}", "boxed"),
        (r"first \boxed{2} then \boxed{3}", "3", "boxed"),  # the last box wins
        (r"it is \boxed{2}, \boxed{3}", "2, 3", "boxed"),  # stated together: two parts
        (r"\boxed{7} and again \boxed{ 7 }", "7", "boxed"),  # equal boxes count once
        ("<think>\\boxed{4}</think>so \\boxed{5}", "5", "boxed"),  # drafts in the reasoning
        ("\\boxed{3} wait.\n**Final Answer**\n\\boxed{5}", "5", "boxed"),
        ("\\boxed{5}<|im_end|>\n<|im_start|>user\n\\boxed{6}", "5", "boxed"),  # next turn
        ("The answer is 12 apples.", "12", "answer_is"),
        ("The answers are 4 and 6.", "4, 6", "answer_is"),  # two parts
        ("The answer is $x<1$ or $x>2$.", "x<1$ or $x>2", "answer_is"),  # joined segments
        ("The answer is $5$, and $6$ is wrong.", "5", "answer_is"),  # the sentence goes on
        ("The answer is $4$.", "4", "answer_is"),  # math, not money
        ("The answer is 1:2.", "1:2", "answer_is"),  # a ratio stays whole
        ("The answer is 8, since 2*4=8.", "8", "answer_is"),
        ("The answer is 3 1/2", "3 1/2", "answer_is"),
        ("The answer is Evelyn.", "Evelyn", "answer_is"),
        ("**Answer:** **17**", "17", "answer_is"),
        ("The laptop costs $2,450.", "$2,450", "last_number"),
        ("so 1.5e3 in all", "1.5e3", "last_number"),
        (r"\boxed{\{1,\{2\}\}}", r"\{1,\{2\}\}", "boxed"),
        (r"\fbox{a{b{c}}d}", "a{b{c}}d", "boxed"),
        (r"\boxed 5 apples", "5", "boxed"),
        ("Natalia sold 48/2 = 24 clips.\n#### 1,234", "1,234", "gsm8k"),
        ("So the answer is $18. Done.", "$18", "answer_is"),
        ("The final answer is (B).", "(B)", "answer_is"),
        ("7+8=15,4+3+1=8:85", "85", "last_number"),  # the arithmetic job's format
        ("12*3=36,1*3=3:360", "360", "last_number"),
        ("it is 3.5 or maybe 1,000", "1,000", "last_number"),
        ("x = -7/2", "x = -7/2", "final_statement"),  # an assignment stays whole
        ("Final Answer: The final answer is 3. I hope it is correct.", "3", "answer_is"),
        ("The answer is **2**.", "2", "answer_is"),
        ("**Answer:** 42", "42", "answer_is"),
        (r"The probability is $\frac{1}{2}$.", r"\frac{1}{2}", "final_statement"),
        (r"so \(x^2+1\) it is", "x^2+1", "final_statement"),
        ("She paid $5 an hour, so she made $40.", "$40", "last_number"),
    ],
)
def test_extract_answer(response: str, answer: str, rule: str) -> None:
    found = extract_answer(response)
    assert found is not None
    assert (found.text, found.rule) == (answer, rule)


def test_extract_nothing_and_unclosed_box() -> None:
    assert extract_answer("no digits at all") is None
    assert extract_answer("QX7ZK") is None  # digits inside a word are not a number
    with pytest.raises(UnclosedBoxError):
        extract_answer(r"the answer is \boxed{12")


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        (r"\text{13}", "13"),
        (r"\dfrac{1}{2}", r"\frac{1}{2}"),
        (r"\tfrac{3}{4}", r"\frac{3}{4}"),
        (r"\left( 3, \frac{\pi}{2} \right)", r"( 3, \frac{\pi}{2} )"),
        ("1,000", "1000"),
        ("115,000", "115000"),
        ("0,1", "0,1"),  # a list, not 1 or 01
        ("1, 2, 3", "1, 2, 3"),
        (r"\$1,234.50", "1234.50"),
        (r"10\%", "10%"),  # kept: the answer model reads the percent
        (r"1,\!234", "1234"),
        (r"1{,}234", "1234"),
        (r"3 \text{ thousand}", r"3\times10^{3}"),
        (r"\begin{pmatrix} 1 \\ -2 \end{pmatrix}", r"\begin{pmatrix} 1 \\ -2 \end{pmatrix}"),
        (r"\varnothing", r"\emptyset"),
        (r"\{\}", r"\emptyset"),
        ("**17**", "17"),
        (r"3\sqrt(3)", r"3\sqrt{3}"),
        ("12 apples", "12"),
        (r"5 \text{ cm}", "5"),
        ("12 dollars", "12"),
        ("2√2", r"2\sqrt{2}"),
        ("√(x+1)", r"\sqrt{x+1}"),
        ("30°", "30"),
        ("∞", r"\infty"),
        ("½", r"\frac{1}{2}"),
        ("−3", "-3"),
        ("4\u200b2\ufeff", "42"),
        ("7.", "7"),
    ],
)
def test_normalize_answer(raw: str, normalized: str) -> None:
    assert normalize_answer(raw) == normalized
