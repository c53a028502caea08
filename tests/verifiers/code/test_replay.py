"""Record/replay verdicts on the trusted side, with hand-made sandbox results (no sandbox)."""

from __future__ import annotations

from typing import Any

from grpo.v1 import common_pb2
from grpo.verifiers.code import codec
from grpo.verifiers.code.tests_format import record_calls, replay_cases, suite_from_tests

CHECK = (
    "def check(candidate):\n"
    "    x = 3\n"
    "    assert candidate(x) == 9\n"
    "    assert not candidate(0)\n"
    "    assert candidate(2, scale=2) == 8\n"
    "    for i in range(3):\n"
    "        assert candidate(i) == i * i\n"
)


def _suite() -> Any:
    return suite_from_tests(common_pb2.CodeTests(test_code=CHECK, entry_point="f"))


def _values(*values: object) -> list[dict[str, Any]]:
    return [{"k": "call", "i": i, "v": codec.encode_tree(v)} for i, v in enumerate(values)]


def test_recording_captures_every_call_in_order() -> None:
    suite = _suite()
    recording = record_calls(suite)
    assert [c.name for c in suite.cases] == [
        "check line 3",
        "check line 4",
        "check line 5",
        "check line 6",
    ]
    assert recording.inside == []
    decoded = [(codec.decode_tree(a), codec.decode_tree(k)) for a, k in recording.flat_calls()]
    assert decoded == [
        ((3,), {}),
        ((0,), {}),
        ((2,), {"scale": 2}),
        ((0,), {}),
        ((1,), {}),
        ((2,), {}),
    ]


def test_replay_decides_each_case_outside() -> None:
    suite = _suite()
    recording = record_calls(suite)
    verdicts = replay_cases(suite, recording, _values(9, 0, 8, 0, 1, 4))
    assert [v.outcome for v in verdicts.values()] == ["passed"] * 4
    wrong = replay_cases(suite, recording, _values(9, 1, 7.9, 0, 1, 5))
    assert [v.outcome for v in wrong.values()] == ["passed", "failed", "failed", "failed"]


def test_missing_raised_and_non_data_results() -> None:
    suite = _suite()
    recording = record_calls(suite)
    results: list[Any] = _values(9, 0, 8, 0, 1, 4)
    results[0] = {"k": "call", "i": 0, "unencodable": "Anything"}  # __eq__-always-True object
    results[1] = {"k": "call", "i": 1, "raised": "ZeroDivisionError", "msg": "division by zero"}
    results[2] = None  # the process ended first
    verdicts = replay_cases(suite, recording, results)
    assert verdicts[0].outcome == "failed"
    assert (verdicts[1].outcome, verdicts[1].kind) == ("raised", "ZeroDivisionError")
    assert (verdicts[2].outcome, verdicts[2].kind) == ("raised", "missing")
    assert verdicts[3].outcome == "passed"


def test_control_flow_on_results_is_detected_as_divergence() -> None:
    check = (
        "def check(candidate):\n"
        "    r = candidate(1)\n"
        "    if r == 5:\n"
        "        assert candidate(2) == 7\n"
        "    assert candidate(3) == 0\n"
    )
    suite = suite_from_tests(common_pb2.CodeTests(test_code=check, entry_point="f"))
    recording = record_calls(suite)
    assert len(recording.flat_calls()) == 3  # recorded with r == probe == 5
    verdicts = replay_cases(suite, recording, _values(4, 7, 0))  # real r != 5: fewer calls
    assert verdicts[0].outcome == "diverged"
