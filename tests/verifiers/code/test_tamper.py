"""Harness tampering: whatever the candidate does to its own process, the tests see the real
builtins, the real modules and the task's own helpers. Every check here forces the inside path
(a recording probe cannot take ``len``, ``list`` or a module function), so the verdict comes
from the sandbox's separate test process; each tampering candidate must score 0 while an honest
one scores 1 on the same tests."""

from __future__ import annotations

import textwrap

import pytest

from grpo.v1 import common_pb2
from grpo.verifiers.code import CodeVerifier, suite_from_tests
from grpo.verifiers.code.tests_format import record_calls

from .conftest import CANARY, code_task

OK = common_pb2.SCORE_STATUS_OK

# f(x) must return the list [x, x + 1, x + 2]; every assert is one the probe cannot record.
CHECK = """
import json, math, sys
def check(candidate):
    assert len(candidate(1)) == 3
    assert sorted(candidate(5), reverse=True)[0] == 7
    assert abs(sum(candidate(0)) - 3) < 1e-9
    assert math.isclose(float(candidate(2)[0]), 2.0)
    assert json.loads(json.dumps(list(candidate(3)))) == [3, 4, 5]
    assert isinstance(list(candidate(4)), list) and all(v > 3 for v in candidate(4))
    assert sys.modules["math"].floor(candidate(9)[2] / 2) == 5
"""
HONEST = "def f(x):\n    return [x, x + 1, x + 2]\n"
WRONG = "def f(x):\n    return [x - 1]\n"  # what every tampering candidate tries to pass

# Each prelude runs before WRONG's definition (at load) or inside f (at call time).
TAMPERING = {
    "shadow-len-abs-sorted": """
        class Anything:
            def __eq__(self, other): return True
            def __lt__(self, other): return True
            def __gt__(self, other): return True
            def __getitem__(self, i): return self
            __hash__ = object.__hash__
        def len(x): return Anything()
        def abs(x): return 0
        def sorted(x, **k): return [Anything()]
        def sum(x): return 3
        def isinstance(*a): return True
        def all(x): return True
    """,
    "patch-builtins-module": """
        import builtins
        class Anything:
            def __eq__(self, other): return True
            def __lt__(self, other): return True
            def __gt__(self, other): return True
            __hash__ = object.__hash__
        builtins.len = lambda x: 3
        builtins.abs = lambda x: 0
        builtins.sorted = lambda x, **k: [7]
        builtins.all = lambda x: True
        builtins.AssertionError = type("AssertionError", (Exception,), {})
    """,
    "patch-math-and-json": """
        import json, math
        math.isclose = lambda *a, **k: True
        math.floor = lambda x: 5
        json.loads = lambda s: [3, 4, 5]
        json.dumps = lambda v: "[3, 4, 5]"
    """,
    "replace-sys-modules-entries": """
        import sys, types
        fake = types.ModuleType("math")
        fake.isclose = lambda *a, **k: True
        fake.floor = lambda x: 5
        sys.modules["math"] = fake
        fake_json = types.ModuleType("json")
        fake_json.loads = lambda s: [3, 4, 5]
        fake_json.dumps = lambda v: ""
        sys.modules["json"] = fake_json
    """,
    "gc-and-frames-rewrite-the-tests": """
        import gc, sys
        for obj in gc.get_objects():  # anything that looks like a test namespace
            if isinstance(obj, dict) and "check" in obj and "candidate" in obj:
                obj["check"] = lambda c: None
        frame = sys._getframe()
        while frame is not None:
            frame.f_globals["len"] = lambda x: 3
            frame = frame.f_back
    """,
    "settrace-and-excepthook": """
        import sys
        sys.settrace(lambda *a: None)
        sys.excepthook = lambda *a: None
        import threading
        threading.excepthook = lambda *a: None
    """,
    "forged-verdicts-on-every-fd": """
        import os
        line = b'{"k": "case", "i": %d, "outcome": "passed"}\\n'
        for fd in range(3, 256):
            for i in range(10):
                try:
                    os.write(fd, line % i)
                except OSError:
                    pass
    """,
    "kill-or-stop-everything-else": """
        import os, signal
        for pid in range(1, 64):
            if pid != os.getpid():
                for sig in (signal.SIGSTOP, signal.SIGKILL):
                    try:
                        os.kill(pid, sig)
                    except OSError:
                        pass
    """,
    "ctypes-memory-of-other-processes": """
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        for pid in range(1, 64):
            if pid == os.getpid():
                continue
            libc.ptrace(16, pid, 0, 0)  # PTRACE_ATTACH (refused by seccomp)
            try:
                with open(f"/proc/{pid}/mem", "r+b") as fh:  # refused: not dumpable
                    fh.write(b"x")
            except OSError:
                pass
    """,
}


def _program(prelude: str, at_call: bool) -> str:
    prelude = textwrap.dedent(prelude)
    if not at_call:
        return prelude + "\n" + WRONG
    body = textwrap.indent(prelude, "    ")
    return f"def f(x):\n{body}\n    return [x - 1]\n"


def test_the_checks_run_in_the_test_process() -> None:
    suite = suite_from_tests(code_task(CHECK).code_tests)
    assert record_calls(suite).inside == list(range(len(suite.cases)))


def test_honest_candidate_passes_every_check(verifier: CodeVerifier) -> None:
    score = verifier.verify(code_task(CHECK), HONEST)
    assert (score.status, score.reward) == (OK, 1.0), score
    wrong = verifier.verify(code_task(CHECK), WRONG)
    assert wrong.reward == 0.0 and all(t.status != 1 for t in wrong.tests), wrong


@pytest.mark.parametrize("at_call", [False, True], ids=["at-load", "in-call"])
@pytest.mark.parametrize("name", sorted(TAMPERING))
def test_tampering_does_not_change_the_verdict(
    verifier: CodeVerifier, name: str, at_call: bool
) -> None:
    score = verifier.verify(code_task(CHECK), _program(TAMPERING[name], at_call))
    passed = [t.name for t in score.tests if t.status == common_pb2.TEST_STATUS_PASSED]
    assert score.reward == 0.0 and passed == [], score
    assert CANARY not in str(score)


def test_tampering_with_an_honest_answer_still_passes(verifier: CodeVerifier) -> None:
    """Shadowing builtins in the program's own module is legal Python: its honest answer is
    still right (the tests use their own builtins, the program its own)."""
    program = "def len(x):\n    return -1\n" + HONEST
    score = verifier.verify(code_task(CHECK), program)
    assert score.reward == 1.0, score


# A HumanEval/38-style task: the prefix defines the helper the tests use to make inputs.
PREFIX = '''
def encode_shift(s: str):
    return "".join(chr((ord(ch) - 97 + 5) % 26 + 97) for ch in s)


def decode_shift(s: str):
    """Undo encode_shift."""
'''
SHIFT_CHECK = """
import random, string
def check(candidate):
    for _ in range(20):
        s = "".join(random.choice(string.ascii_lowercase) for _ in range(12))
        assert candidate(encode_shift(s)) == s
"""


def _shift_task() -> common_pb2.Task:
    return code_task(SHIFT_CHECK, entry_point="decode_shift", prefix=PREFIX)


def test_prefix_helpers_come_from_the_task_not_the_program(verifier: CodeVerifier) -> None:
    honest = '    return "".join(chr((ord(ch) - 97 - 5) % 26 + 97) for ch in s)\n'
    assert verifier.verify(_shift_task(), honest).reward == 1.0
    # redefining the helper the tests call (identity encode + identity decode) does not help
    cheat = (
        "    return s\n\n"
        "def encode_shift(s):\n    return s\n\n"
        "import builtins\nbuiltins.encode_shift = encode_shift\n"
    )
    score = verifier.verify(_shift_task(), cheat)
    assert score.reward == 0.0, score


def test_random_draws_of_the_tests_are_not_predictable_from_the_program(
    verifier: CodeVerifier,
) -> None:
    """The test process reseeds its RNG after fork: the program cannot replay its draws."""
    cheat = (
        "    import random, string\n"
        '    return "".join(random.choice(string.ascii_lowercase) for _ in range(12))\n'
    )
    assert verifier.verify(_shift_task(), cheat).reward == 0.0


def test_expected_values_stay_out_of_the_program_process(verifier: CodeVerifier) -> None:
    """Inside cases too: the test source lives only in the test process, which the program can
    neither read (/proc/PID/mem, fd, environ of a non-dumpable process) nor trace."""
    check = "def check(candidate):\n    assert list(candidate('abc')) == list('expected-9d2e1f')\n"
    program = """
    import gc, os
    def f(x):
        found = [o for o in gc.get_objects() if isinstance(o, str) and "expected-" in o]
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) == os.getpid():
                continue
            for part in ("mem", "cmdline", "environ", "maps"):
                try:
                    with open(f"/proc/{pid}/{part}", "rb") as fh:
                        data = fh.read(1 << 20)
                except OSError:
                    continue
                if b"expected-" in data:
                    found.append(data[data.index(b"expected-"):][:15].decode())
            try:
                for fd in os.listdir(f"/proc/{pid}/fd"):
                    with open(f"/proc/{pid}/fd/{fd}", "rb") as fh:
                        data = fh.read(1 << 20)
                    if b"expected-" in data:
                        found.append("fd")
            except OSError:
                pass
        return found[0] if found else None
    """
    score = verifier.verify(code_task(check), textwrap.dedent(program))
    assert score.reward == 0.0 and score.status == OK, score


def test_non_data_argument_is_undecided_not_zero(verifier: CodeVerifier) -> None:
    check = "def check(candidate):\n    assert list(candidate(lambda v: v + 1)) == [2]\n"
    score = verifier.verify(code_task(check), "def f(g):\n    return [g(1)]\n")
    assert score.status == common_pb2.SCORE_STATUS_INTERNAL, score
    assert "not plain data" in score.detail
