"""Issue 27's extraction: the ten fault kinds, candidates with provenance, answer formats.

- every row of ``data/extraction_kinds.py`` (new cases of each kind, written here) and every
  example the issue gives, scored by the check a worker runs;
- the provenance of each candidate kind and the one precedence between them;
- the per-task ``answer_format`` (``Task.metadata["answer_format"]``, else the config): a
  strict format never falls back to another rule; an unknown format is a task error.
"""

from __future__ import annotations

import pytest
from data.extraction_kinds import KINDS, ROWS, Row

from grpo.v1 import common_pb2
from grpo.verifiers.math import MathConfig, MathVerifier, extract_answer
from grpo.verifiers.math.check import check_answer
from grpo.verifiers.math.extract import FORMATS, RULES, AnswerFormatError

OK = common_pb2.SCORE_STATUS_OK
NO_ANSWER = common_pb2.SCORE_STATUS_NO_ANSWER
INTERNAL = common_pb2.SCORE_STATUS_INTERNAL


def test_every_kind_has_right_and_wrong_rows() -> None:
    assert len(ROWS) >= 100
    for kind in KINDS:
        rows = [r for r in ROWS if r.kind == kind]
        assert len(rows) >= 6, kind
        assert any(r.expected == 1 for r in rows) and any(r.expected == 0 for r in rows), kind


@pytest.mark.parametrize("row", ROWS, ids=[f"{i}-{r.kind}" for i, r in enumerate(ROWS)])
def test_kind_row(row: Row) -> None:
    status, reward, extracted, detail = check_answer(row.gold, row.response)
    assert reward == row.expected, (extracted, detail)
    assert status != INTERNAL, detail


# the issue's own examples of each kind (gold, response, reward)
ISSUE = [
    ("3", "… so the side is <answer> \\sqrt{3} </answer>", 0),
    ("4", "<answer> -2, 4 </answer>", 0),
    ("2", "Let's expand: x^2 + 2xy + 0.25y^2", 0),
    ("4500", "\\boxed{(4,500)}", 0),
    ("(3,250)", "\\boxed{(3, 250)}", 1),
    ("7,\\! 020", "\\boxed{7020}", 1),
    ("7020", "\\boxed{7,\\! 020}", 1),
    ("58", "The answer is <answer> 58 </answer>", 1),
    ("58", "Answer: <answer>58</answer>", 1),
    ("120", "Answer: The train travels 120 miles.", 1),
    ("4300", "The answer is: she saved $4,300.", 1),
    ("19", "So $3x + 2 = 17 + 2 = 19$", 1),
    ("8", "$\\Rightarrow y = 8$", 1),
    ("40", "$\\angle C = 40^\\circ$", 1),
    ("6", "\\( 18 \\div 3 = 6 \\) cups", 1),
    ("350", "so total = 350ml </think>", 1),
    ("12", "the bag weighs 12kg", 1),
    ("5", "\\boxed{5}\nUser: now solve 2+2\nAssistant: \\boxed{4}", 1),
    ("5", "\\boxed{5}<start_of_turn>user\nsolve \\boxed{4}", 1),
    ("\\sqrt{3}", "\\boxed{1.73205}", 0),
    ("8:00", "\\boxed{4:00}", 0),
    ("7", "The answer is 7, or perhaps 9.", 0),
    ("(2,-1)", "\\boxed{x=2, y=-1}", 1),
    ("(1,4,9)", "\\boxed{(a,b,c)=(1,4,9)}", 1),
    (
        "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}",
        "\\boxed{\\left[\\begin{array}{cc}1&2\\\\3&4\\end{array}\\right]}",
        1,
    ),
    ("5", "\\boxed{5\\textnormal{ cm}}", 1),
    ("5", "\\boxed{5\\text{ m/s}}", 1),
    ("\\frac{AB}{CD}=\\frac{2}{3}", "\\boxed{\\frac23}", 1),
    ("x=\\pm 2, 3", "\\boxed{-2, 2, 3}", 1),
    ("0 < a < b < 1", "\\boxed{0<a<b<1}", 1),
    ("4", "\\boxed{\\lfloor 4.2 \\rfloor}", 1),
    ("10", "\\boxed{|6+8i|}", 1),
]


@pytest.mark.parametrize(("gold", "response", "reward"), ISSUE)
def test_issue_example(gold: str, response: str, reward: float) -> None:
    status, got, extracted, detail = check_answer(gold, response)
    assert got == reward, (extracted, detail)
    assert status != INTERNAL, detail


@pytest.mark.parametrize(
    ("response", "rule", "text"),
    [
        ("<think>\\boxed{2}</think> <answer> 3 </answer>", "answer_tag", "3"),
        ("<answer>\\boxed{7}</answer>", "answer_tag", "7"),
        ("<answer> x </answer> then \\boxed{7}", "boxed", "7"),  # the box ends the response
        ("\\boxed{7} <answer> 8 </answer>", "answer_tag", "8"),
        ("\\boxed{7}\n#### 8", "boxed", "7"),
        ("She had 3.\n#### 8", "gsm8k", "8"),
        ("The answer is 9. So 2 + 2 = 4.", "answer_is", "9"),
        ("So $x = 4$.", "final_statement", "x = 4"),
        ("So she has 25 marbles.", "last_number", "25"),
    ],
)
def test_provenance_and_precedence(response: str, rule: str, text: str) -> None:
    found = extract_answer(response)
    assert found is not None and (found.rule, found.text) == (rule, text)
    assert rule in RULES


def test_boxes_form_a_list_only_for_a_list_gold() -> None:
    response = r"We try \boxed{2}. Checking, the roots are \boxed{3} and \boxed{-5}."
    assert check_answer("3, -5", response)[1] == 1.0  # the last boxes, stated together
    assert check_answer("-5", response)[1] == 0.0  # two values stated: a list, not -5
    assert check_answer("2, 3, -5", response)[1] == 0.0  # 2 was a draft
    drafts = r"We try \boxed{2}. No: the root is \boxed{3}. The other root is \boxed{-5}."
    assert check_answer("-5", drafts)[1] == 1.0  # not a list gold: the last box wins
    assert check_answer("3, -5", drafts)[1] == 0.0  # a list gold: all the boxes (2 too)
    single = extract_answer(r"\boxed{2} no wait \boxed{3}")
    listed = extract_answer(r"\boxed{2} no wait \boxed{3}", several=True)
    assert single is not None and single.text == "3"
    assert listed is not None and listed.text == "2, 3"


STRICT = [
    # (format, response, reward, status)
    ("boxed", r"The answer is $\boxed{5}$.", 1.0, OK),
    ("boxed", "The answer is 5.", 0.0, NO_ANSWER),
    ("boxed", "<answer>5</answer>", 0.0, NO_ANSWER),
    ("boxed", "#### 5", 0.0, NO_ANSWER),
    ("answer_tag", "<think>so 5</think><answer>5</answer>", 1.0, OK),
    ("answer_tag", "<answer>\\boxed{5}</answer>", 1.0, OK),
    ("answer_tag", r"<think>so 5</think> \boxed{5}", 0.0, NO_ANSWER),
    ("answer_tag", "<answer> </answer> The answer is 5.", 0.0, NO_ANSWER),
    ("answer_tag", "<answer> answer here </answer> so 5", 0.0, NO_ANSWER),
    ("answer_tag", "so 5</ think> <answer> 5</ answers >", 1.0, OK),
    ("answer_tag", "The answer goes in the <answer> tags: 5", 0.0, NO_ANSWER),
    ("gsm8k", "5 + 0 = 5\n#### 5", 1.0, OK),
    ("gsm8k", r"5 + 0 = 5, so \boxed{5}", 0.0, NO_ANSWER),
    ("gsm8k", "The answer is 5.", 0.0, NO_ANSWER),
    ("lenient", "The answer is 5.", 1.0, OK),
    ("lenient", "So 2 + 3 = 5.", 1.0, OK),
]


@pytest.mark.parametrize(("answer_format", "response", "reward", "status"), STRICT)
def test_answer_formats(answer_format: str, response: str, reward: float, status: int) -> None:
    got_status, got, _, detail = check_answer("5", response, answer_format)
    assert (got_status, got) == (status, reward), detail


def test_unknown_format_is_a_task_error() -> None:
    status, reward, _, detail = check_answer("5", r"\boxed{5}", "latex")
    assert (status, reward) == (INTERNAL, 0.0) and "'latex'" in detail
    with pytest.raises(AnswerFormatError):
        extract_answer(r"\boxed{5}", "latex")
    assert set(FORMATS) == {"lenient", "boxed", "answer_tag", "gsm8k"}


def test_the_task_metadata_chooses_the_format(math_verifier: MathVerifier) -> None:
    response = "So she has 5 apples."
    lenient = common_pb2.Task(id="t", type="math", gold_answer="5")
    boxed = common_pb2.Task(
        id="t", type="math", gold_answer="5", metadata={"answer_format": "boxed"}
    )
    bad = common_pb2.Task(id="t", type="math", gold_answer="5", metadata={"answer_format": "x"})
    assert math_verifier.verify(lenient, response).reward == 1.0
    assert math_verifier.verify(boxed, response).status == NO_ANSWER
    assert math_verifier.verify(bad, response).status == INTERNAL


def test_the_config_chooses_the_default_format_and_approximation() -> None:
    config = MathConfig(answer_format="boxed", approximation="tolerance")
    with MathVerifier(config) as strict:
        task = common_pb2.Task(id="t", type="math", gold_answer=r"\frac13")
        assert strict.verify(task, "So it is 0.333333.").status == NO_ANSWER
        assert strict.verify(task, r"\boxed{0.333333}").reward == 1.0  # the opt-in tolerance
        tagged = common_pb2.Task(
            id="t", type="math", gold_answer="5", metadata={"answer_format": "lenient"}
        )
        assert strict.verify(tagged, "So it is 5.").reward == 1.0


def test_the_prompt_restated_is_no_answer() -> None:
    prompt = "Tom has 12 apples and gives 5 away. How many apples does Tom have left?"
    echo = "Tom has 12 apples and gives 5 away."
    assert check_answer("5", echo, prompt=prompt)[1] == 0.0
    assert check_answer("5", echo)[1] == 1.0  # without the prompt the echo reads as a statement
    assert check_answer("950", "475*2", prompt="475*2=")[1] == 0.0
    assert check_answer("950", "475*2=950", prompt="475*2=")[1] == 1.0
