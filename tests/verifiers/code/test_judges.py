"""Correct programs score 1 as real judges would: float-tolerant tokens, exit()/quit(), stdin
through fd 0, big integers, BOM and CRLF sources; a lone surrogate is the candidate's error."""

from __future__ import annotations

import pytest

from grpo.errors import InvalidArgumentError
from grpo.v1 import common_pb2
from grpo.verifiers.code import CodeVerifier, suite_from_tests
from grpo.verifiers.code.tests_format import compare_stdout

from .conftest import code_task

OK = common_pb2.SCORE_STATUS_OK
RUNTIME_ERROR = common_pb2.SCORE_STATUS_RUNTIME_ERROR
EXACT, LINES = common_pb2.OUTPUT_COMPARE_EXACT, common_pb2.OUTPUT_COMPARE_LINES
TOKENS, FLOAT = common_pb2.OUTPUT_COMPARE_TOKENS, common_pb2.OUTPUT_COMPARE_TOKENS_FLOAT


def _stdio(
    pairs: list[tuple[str, str]], compare: int = 0, tolerance: float = 0.0
) -> common_pb2.Task:
    io = [common_pb2.IoPair(stdin=a, expected_stdout=b) for a, b in pairs]
    tests = common_pb2.CodeTests(io_pairs=io, output_compare=compare, float_tolerance=tolerance)  # type: ignore[arg-type]
    return common_pb2.Task(id="io", type="code", code_tests=tests)


@pytest.mark.parametrize(
    ("actual", "expected", "mode", "tol", "same"),
    [
        ("0.6666666666666666\n", "0.666667", FLOAT, 1e-6, True),  # print(2/3)
        ("1.0000001 5\n", "1 5", FLOAT, 1e-6, True),
        ("0.67\n", "0.666667", FLOAT, 1e-6, False),
        ("1000001", "1000000", FLOAT, 1e-6, False),  # integers compare exactly
        ("007 -0", "7 0", FLOAT, 1e-6, True),
        ("1e-7", "0", FLOAT, 1e-6, True),  # absolute error
        ("1000000.5", "1000000", FLOAT, 1e-6, True),  # relative error 5e-7
        ("1000002.5", "1000000", FLOAT, 1e-6, False),
        ("0.667", "0.666667", FLOAT, 1e-3, True),
        ("nan", "nan", FLOAT, 1e-6, True),
        ("nan", "0.5", FLOAT, 1e-6, False),
        ("inf", "1e400", FLOAT, 1e-6, False),
        ("1 2\n3", "1 2 3", FLOAT, 1e-6, True),  # tokens: line breaks are whitespace
        ("1 2", "1 2 3", FLOAT, 1e-6, False),
        ("YES", "yes", FLOAT, 1e-6, False),
        (str(3**9000), str(3**9000), FLOAT, 1e-6, True),  # past int()'s 4300 digits
        (str(3**9000 + 1), str(3**9000), FLOAT, 1e-6, False),
        ("0.5000001", "0.5", TOKENS, 1e-6, False),
        ("a  b\n", "a b", TOKENS, 1e-6, True),
        ("1 \n2\n\n", "1\n2", LINES, 1e-6, True),
        ("1\n 2\n", "1\n2\n", LINES, 1e-6, False),
        ("1\r\n2", "1\n2", LINES, 1e-6, True),
        ("7\n", "7", EXACT, 1e-6, False),
        ("7", "7", EXACT, 1e-6, True),
    ],
)
def test_compare_stdout_modes(
    actual: str, expected: str, mode: int, tol: float, same: bool
) -> None:
    assert compare_stdout(actual, expected, mode, tol) is same


def test_io_pairs_default_to_the_judges_rule() -> None:
    suite = suite_from_tests(_stdio([("", "1")]).code_tests)
    assert (suite.compare, suite.float_tolerance) == (FLOAT, 1e-6)
    custom = suite_from_tests(_stdio([("", "1")], FLOAT, 1e-4).code_tests)
    assert custom.float_tolerance == 1e-4


@pytest.mark.parametrize(
    ("tests", "message"),
    [
        (_stdio([("", "1")], EXACT, 1e-3).code_tests, "applies to OUTPUT_COMPARE_TOKENS_FLOAT"),
        (_stdio([("", "1")], FLOAT, -1.0).code_tests, r"must be in \[0, 1\)"),
        (_stdio([("", "1")], FLOAT, float("nan")).code_tests, r"must be in \[0, 1\)"),
        (_stdio([("", "1")], 99).code_tests, "not an OutputCompare value"),
        (
            common_pb2.CodeTests(
                test_code="def check(c):\n    assert c(1)\n", entry_point="f", output_compare=EXACT
            ),
            "io_pairs only",
        ),
    ],
)
def test_bad_output_settings_raise_invalid_argument(
    tests: common_pb2.CodeTests, message: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        suite_from_tests(tests, "bad")


@pytest.mark.parametrize(
    ("program", "stdin", "expected", "reward"),
    [
        ("print(2/3)", "", "0.666667", 1.0),
        ('print("1.0000001 5")', "", "1 5", 1.0),
        ("print(0.67)", "", "0.666667", 0.0),
        ("print(7); exit()", "", "7", 1.0),
        ("print(7)\nquit()\nprint(8)", "", "7", 1.0),
        ("print(7); exit(3)", "", "7", 0.0),  # a non-zero exit status fails, as on a judge
        ("print(open(0).read().split()[1])", "4 5\n", "5", 1.0),
        ("import os\nprint(int(os.read(0, 100)) * 2)", "21\n", "42", 1.0),
        (
            "import os, sys\nprint(os.read(sys.stdin.fileno(), 9).decode().strip())",
            "hi\n",
            "hi",
            1.0,
        ),
        ("import sys\nprint(sum(map(int, sys.stdin.buffer.read().split())))", "1 2 3", "6", 1.0),
        ("import os\nos.write(1, b'17\\n')", "", "17", 1.0),  # straight to fd 1
        ("print(3**9000)", "", str(3**9000), 1.0),
        ("n = int(input())\nprint(10**n)", "5000\n", "1" + "0" * 5000, 1.0),
        ("\ufeffprint(input())", "bom\n", "bom", 1.0),  # UTF-8 byte-order mark
        ("x = int(input())\r\nif x:\r\n    print(x + 1)\r\n", "1\n", "2", 1.0),  # CRLF
        ("x = 1\rprint(x)\r", "", "1", 1.0),  # lone CR line ends, as a file would read
        ("import threading\nthreading.Thread(target=lambda: print(9)).start()", "", "9", 1.0),
        ("import atexit\natexit.register(lambda: print(5))", "", "5", 1.0),
    ],
)
def test_stdio_programs_score_as_on_a_judge(
    verifier: CodeVerifier, program: str, stdin: str, expected: str, reward: float
) -> None:
    score = verifier.verify(_stdio([(stdin, expected)]), f"```python\n{program}\n```")
    assert (score.status, score.reward) == (OK, reward), score


def test_each_pair_runs_in_a_fresh_process(verifier: CodeVerifier) -> None:
    program = "import math\nprint(getattr(math, 'seen', 0))\nmath.seen = 1\n"
    score = verifier.verify(_stdio([("", "0"), ("", "0"), ("", "0")]), program)
    assert score.reward == 1.0, score


def test_output_past_the_capture_limit_fails(verifier: CodeVerifier) -> None:
    cap = verifier.cfg.stdout_capture_bytes
    score = verifier.verify(_stdio([("", "x")]), f"print('x' * {cap + 10})")
    assert score.reward == 0.0 and "OutputLimit" in score.tests[0].detail


def test_crlf_response_with_fences_and_bom(verifier: CodeVerifier) -> None:
    check = "def check(candidate):\n    assert candidate(3) == 10**6000 + 3\n"
    response = "Here:\r\n```python\r\n\ufeffdef f(x):\r\n    return 10**6000 + x\r\n```\r\n"
    score = verifier.verify(code_task(check), response)
    assert (score.status, score.reward) == (OK, 1.0), score


def test_big_integer_results_and_arguments_cross(verifier: CodeVerifier) -> None:
    check = (
        "def check(candidate):\n"
        "    assert candidate(10**6000) == 10**6000 + 1\n"
        "    assert str(candidate(3**9000)) == str(3**9000 + 1)\n"
    )
    score = verifier.verify(code_task(check), "def f(x):\n    return x + 1\n")
    assert (score.status, score.reward) == (OK, 1.0), score
    wrong = verifier.verify(code_task(check), "def f(x):\n    return x + 2\n")
    assert (wrong.status, wrong.reward) == (OK, 0.0), wrong


@pytest.mark.parametrize(
    "program",
    [
        "def f(x):\n    return '\ud800'\n",  # a lone surrogate in the source text itself
        "def f(x):\n    return x\n# \udfff\n",
    ],
)
def test_lone_surrogate_in_the_source_is_the_candidates_error(
    verifier: CodeVerifier, program: str
) -> None:
    score = verifier.verify(code_task("def check(c):\n    assert c(1) == 1\n"), program)
    assert (score.status, score.reward) == (RUNTIME_ERROR, 0.0), score
    assert "surrogate" in score.detail


@pytest.mark.parametrize(
    ("program", "status", "reward"),
    [
        ("def f(x):\n    raise ValueError('\\ud800')\n", OK, 0.0),  # made at run time
        ("def f(x):\n    return '\\ud800'\n", OK, 1.0),  # equal to the expected value
        ("def f(x):\n    print('\\ud800')\n    return '\\ud800'\n", OK, 0.0),  # as python3
    ],
)
def test_lone_surrogates_made_at_run_time_are_data(
    verifier: CodeVerifier, program: str, status: int, reward: float
) -> None:
    check = "def check(c):\n    assert c(1) == '\\ud800'\n"
    score = verifier.verify(code_task(check), program)
    assert (score.status, score.reward) == (status, reward), score


def test_printing_a_lone_surrogate_is_a_runtime_error_of_the_pair(verifier: CodeVerifier) -> None:
    score = verifier.verify(_stdio([("", "x")]), "print('\\ud800')")
    assert score.status == OK and score.reward == 0.0
    assert score.tests[0].status == common_pb2.TEST_STATUS_ERROR
    assert "UnicodeEncodeError" in score.tests[0].detail
