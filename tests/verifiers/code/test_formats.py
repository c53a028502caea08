"""Test formats end to end (MBPP asserts, stdin/stdout pairs, HumanEval checks), reward modes,
record/replay and bad input."""

from __future__ import annotations

import pytest

from grpo.errors import InvalidArgumentError
from grpo.v1 import common_pb2
from grpo.verifiers.code import CodeVerifier, suite_from_tests
from grpo.verifiers.code.tests_format import compare_stdout, record_calls

from .conftest import code_task

OK = common_pb2.SCORE_STATUS_OK
P, F, E = common_pb2.TEST_STATUS_PASSED, common_pb2.TEST_STATUS_FAILED, common_pb2.TEST_STATUS_ERROR


def _mbpp(asserts: list[str], imports: tuple[str, ...] = (), entry: str = "") -> common_pb2.Task:
    tests = common_pb2.CodeTests(test_list=asserts, test_imports=list(imports), entry_point=entry)
    return common_pb2.Task(id="mbpp", type="code", code_tests=tests)


def _stdio(pairs: list[tuple[str, str]]) -> common_pb2.Task:
    io = [common_pb2.IoPair(stdin=a, expected_stdout=b) for a, b in pairs]
    return common_pb2.Task(id="io", type="code", code_tests=common_pb2.CodeTests(io_pairs=io))


def test_mbpp_asserts_with_imports_give_fraction(verifier: CodeVerifier) -> None:
    task = _mbpp(
        [
            "assert math.isclose(area(2), 12.566, rel_tol=1e-3)",
            "assert area(0) == 0",
            "assert area(1) == 3",
        ],
        imports=("import math",),
    )
    score = verifier.verify(task, "import math\ndef area(r):\n    return math.pi * r * r\n")
    assert score.status == OK
    assert [t.status for t in score.tests] == [P, P, F]
    assert score.reward == pytest.approx(2 / 3)
    assert suite_from_tests(task.code_tests).entry_point == "area"


def test_candidate_exception_is_error_and_expected_exception_passes(verifier: CodeVerifier) -> None:
    task = _mbpp(
        [
            "assert inv(2) == 0.5",
            "try:\n    inv(0)\n    assert False\nexcept ZeroDivisionError:\n    pass",
            "assert inv('a') == 1",
        ],
        entry="inv",
    )
    score = verifier.verify(task, "def inv(x):\n    return 1 / x\n")
    assert [t.status for t in score.tests] == [P, P, E]
    assert score.tests[2].detail.startswith("TypeError")


def test_stdin_stdout_pairs(verifier: CodeVerifier) -> None:
    task = _stdio([("3 4\n", "7\n"), ("10 -2\n", "8"), ("1 1\n", "3\n")])
    program = "a, b = map(int, input().split())\nprint(a + b)\n"
    score = verifier.verify(task, f"```python\n{program}```")
    assert [t.status for t in score.tests] == [P, P, F]
    assert score.reward == pytest.approx(2 / 3)


def test_stdio_program_exiting_cleanly_still_passes(verifier: CodeVerifier) -> None:
    task = _stdio([("5\n", "25\n")])
    score = verifier.verify(
        task, "import sys\nn = int(sys.stdin.read())\nprint(n * n)\nsys.exit(0)\n"
    )
    assert score.reward == 1.0


def test_dependent_cases_run_inside_and_are_flagged(verifier: CodeVerifier) -> None:
    check = (
        "def check(candidate):\n"
        "    assert candidate(candidate(2)) == 2\n"
        "    assert candidate(4) == 0.25\n"
    )
    assert record_calls(suite_from_tests(code_task(check).code_tests)).inside == [0]
    score = verifier.verify(code_task(check), "def f(x):\n    return 1 / x\n")
    # the float-tolerance form records fine: arithmetic on the probe gives a probe
    tolerant = "def check(candidate):\n    assert abs(candidate(2) - 0.5) < 1e-9\n"
    assert record_calls(suite_from_tests(code_task(tolerant).code_tests)).inside == []
    assert score.reward == 1.0 and "weaker" in score.tests[0].detail
    assert "weaker" not in score.tests[1].detail


def test_all_or_nothing_and_fraction_modes() -> None:
    from grpo.verifiers.code.verifier import CodeConfig

    tests = [common_pb2.TestResult(status=s) for s in (P, F, P, P)]
    for mode, want in (("fraction", 0.75), ("all_or_nothing", 0.0)):
        v = CodeVerifier.__new__(CodeVerifier)
        v.cfg = CodeConfig(reward_mode=mode)
        assert v._reward(tests) == want


def test_syntax_error_is_runtime_error(verifier: CodeVerifier) -> None:
    score = verifier.verify(code_task("def check(c):\n    assert c(1) == 1\n"), "def f(:\n")
    assert score.status == common_pb2.SCORE_STATUS_RUNTIME_ERROR and score.reward == 0.0
    assert "SyntaxError" in score.detail


def test_empty_response_is_no_answer(verifier: CodeVerifier) -> None:
    score = verifier.verify(code_task("def check(c):\n    assert c(1) == 1\n"), "   \n")
    assert score.status == common_pb2.SCORE_STATUS_NO_ANSWER


@pytest.mark.parametrize(
    ("tests", "message"),
    [
        (common_pb2.CodeTests(), "no test_code, test_list or io_pairs"),
        (common_pb2.CodeTests(test_code="def check(c):\n    assert c(1)\n"), "entry_point"),
        (common_pb2.CodeTests(test_code="x = 1\n", entry_point="f"), r"check\(candidate\)"),
        (common_pb2.CodeTests(test_code="def check(:\n", entry_point="f"), "does not parse"),
        (common_pb2.CodeTests(test_list=["assert len([]) == 0"]), "entry_point is empty"),
    ],
)
def test_bad_tests_raise_invalid_argument(tests: common_pb2.CodeTests, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        suite_from_tests(tests, "bad")


def test_compare_stdout_ignores_trailing_whitespace_only() -> None:
    assert compare_stdout("1 \n2\n\n", "1\n2")
    assert not compare_stdout("1\n 2\n", "1\n2\n")


def test_diverged_case_is_rerun_inside(verifier: CodeVerifier) -> None:
    check = (
        "def check(candidate):\n"
        "    r = candidate(1)\n"
        "    if r == 5:\n"
        "        assert candidate(2) == 7\n"
        "    assert candidate(3) == 0\n"
    )
    score = verifier.verify(code_task(check), "def f(x):\n    return {1: 4, 3: 0}.get(x, -1)\n")
    assert score.status == OK and score.reward == 1.0, score
    assert "weaker" in score.tests[0].detail and not score.tests[1].detail


def test_test_setup_using_program_names_runs_inside(verifier: CodeVerifier) -> None:
    check = "K = helper(2)\ndef check(candidate):\n    assert candidate(K) == 4\n"
    good = verifier.verify(
        code_task(check), "def helper(x):\n    return x\ndef f(x):\n    return 2 * x\n"
    )
    bad = verifier.verify(
        code_task(check), "def helper(x):\n    return x\ndef f(x):\n    return 3 * x\n"
    )
    assert (good.status, good.reward, bad.status, bad.reward) == (OK, 1.0, OK, 0.0)
    assert "weaker" in good.tests[0].detail
