"""The sandboxed code verifier: extract the program, run the task's tests, score the result.

Pipeline for one response (one fresh sandbox per sample):
:func:`~grpo.verifiers.code.extract.source_text` (BOM, CRLF) ->
:func:`~grpo.verifiers.code.extract.extract_program` -> ``code_tests.program_prefix`` +
program -> :func:`~grpo.verifiers.code.tests_format.record_calls` on the trusted side ->
one :class:`~grpo.verifiers.code.sandbox.Sandbox` run whose program process calls the
candidate on the recorded arguments and whose separate test process runs the ``inside``
cases -> :func:`replay_cases` decides each recorded case here; stdin/stdout outputs are
compared here by :func:`compare_stdout` (``code_tests.output_compare``). Exit codes and stdout
are never read as a verdict.

Per-test statuses: PASSED; FAILED (assertion false, wrong/non-data value, wrong stdout);
ERROR (the candidate raised, or ended before the test ran); TIMEOUT (the wall clock killed
the run before the test finished); MEMORY (the candidate raised MemoryError).

Score status mapping:

=============  ==================================================================  =========
status         when                                                                reward
=============  ==================================================================  =========
OK             the program loaded and the run ended by itself (tests may fail)     from tests
NO_ANSWER      the response holds no program (empty after extraction)              0
RUNTIME_ERROR  the program cannot be loaded (SyntaxError, import-time exception,    0
               exit or crash while loading, MemoryError at load, a lone surrogate
               in the source: no UTF-8 file can hold it)
TIMEOUT        the wall clock killed the run (finished tests keep their status,    from tests
               the rest are TIMEOUT)
INTERNAL       the sandbox itself failed to start, or a test passes the program    0 (missing)
               something that is not plain data (the verifier cannot decide)
=============  ==================================================================  =========

Reward: ``fraction`` = passed / total tests, or ``all_or_nothing`` = 1 only when every test
passed (the HumanEval pass@1 convention, and the default). For RL, note that RUNTIME_ERROR and
TIMEOUT are failures of the *candidate*: their reward 0 is a real verdict, not a missing one.
"""

from __future__ import annotations

import binascii
import sys
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from grpo.v1 import common_pb2, verifier_pb2
from grpo.verifiers.code import codec
from grpo.verifiers.code.extract import extract_program, source_text, unencodable_at
from grpo.verifiers.code.sandbox import RunResult, Sandbox, SandboxSettings
from grpo.verifiers.code.tests_format import (
    CaseVerdict,
    Recording,
    TestSuite,
    compare_stdout,
    free_names,
    record_calls,
    replay_cases,
    suite_from_tests,
)
from grpo.verifiers.sdk.base import Verifier, make_score

__all__ = ["CodeConfig", "CodeVerifier"]

_PASSED = common_pb2.TEST_STATUS_PASSED
_FAILED = common_pb2.TEST_STATUS_FAILED
_ERROR = common_pb2.TEST_STATUS_ERROR
_TIMEOUT = common_pb2.TEST_STATUS_TIMEOUT
_MEMORY = common_pb2.TEST_STATUS_MEMORY
_OK = common_pb2.SCORE_STATUS_OK
_EXTRACTED_CHARS = 4000  # head of the extracted program reported in Score.extracted_answer
_SELF_TEST_TASK = common_pb2.Task(
    id="self-test",
    type="code",
    code_tests=common_pb2.CodeTests(
        test_code=(
            "def check(candidate):\n    assert candidate(2) == 4\n    assert candidate(-3) == -6\n"
        ),
        entry_point="double",
    ),
)
_SELF_TEST_CANDIDATES = (  # (which, response, the statuses its two tests must get)
    ("passing", "```python\ndef double(x):\n    return 2 * x\n```", ("PASSED", "PASSED")),
    ("failing", "```python\ndef double(x):\n    return x + 2\n```", ("PASSED", "FAILED")),
)
_INSIDE_NOTE = (
    "ran in the sandbox's test process (isolated from the program, but decided inside: weaker)"
)


STDOUT_CAPTURE_DEFAULT = 16 * 1024 * 1024
"""Default ``stdout_capture_bytes``: 16 MiB per stdin/stdout test (judges allow as much)."""


def stdio_record_bytes(stdout_bytes: int) -> int:
    """Bytes of the result-pipe record of one stdin/stdout pair that printed ``stdout_bytes``:
    the base64 of the output (4 per 3 bytes) and 1 KiB for the record's other fields."""
    return 4 * -(-stdout_bytes // 3) + 1024


class CodeConfig(BaseModel):
    """Configuration of the code verifier."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reward_mode: Literal["fraction", "all_or_nothing"] = Field(
        default="all_or_nothing",
        description="'all_or_nothing': 1 only if every test passed (pass@1); 'fraction': "
        "share of tests passed.",
    )
    max_program_chars: int = Field(
        default=100_000, ge=100, description="Longer programs are not run (RUNTIME_ERROR)."
    )
    stdout_capture_bytes: int = Field(
        default=STDOUT_CAPTURE_DEFAULT,
        ge=1024,
        description="Most stdout bytes a stdin/stdout test may print; more fails the test "
        "(OutputLimit). Memory per sample running at once: up to this much in the sandbox's "
        "capture file, the driver's copies (16 MiB fit in sandbox.memory_mb 96) and ~8x it "
        "at peak in the service (measured: docs/sandbox.md).",
    )
    sandbox: SandboxSettings = Field(
        default_factory=SandboxSettings, description="Isolation, slots and limits."
    )

    @model_validator(mode="after")
    def _output_fits(self) -> CodeConfig:
        need = stdio_record_bytes(self.stdout_capture_bytes)
        if self.sandbox.result_cap_bytes < need:
            raise ValueError(
                f"sandbox.result_cap_bytes ({self.sandbox.result_cap_bytes}) cannot hold one "
                f"stdin/stdout test's output at stdout_capture_bytes="
                f"{self.stdout_capture_bytes} ({need} bytes on the result pipe, base64): "
                "raise result_cap_bytes or lower stdout_capture_bytes"
            )
        return self


class CodeVerifier(Verifier):
    """Outcome verifier for code tasks (``task.code_tests``) run in a bubblewrap sandbox.

    Creating one raises this process's recursion limit to at least ``codec.RECURSION_LIMIT``
    (arguments and results may nest ``codec.MAX_DEPTH`` containers deep, and the replayed
    tests compare them here).

    Args:
        config: reward mode and sandbox settings.

    Raises:
        FailedPreconditionError: bubblewrap is missing and ``allow_unsandboxed`` is false.
        ResourceExhaustedError: no free slot uid in the configured range.
    """

    name: ClassVar[str] = "code"
    kind: ClassVar[int] = verifier_pb2.VERIFIER_KIND_OUTCOME
    task_types: ClassVar[tuple[str, ...]] = ("code",)
    required_task_fields: ClassVar[tuple[str, ...]] = ("code_tests",)

    def __init__(self, config: CodeConfig | None = None) -> None:
        cfg = config or CodeConfig()
        # replayed tests compare decoded values up to codec.MAX_DEPTH deep (== recurses per
        # level): raise this process's limit to codec.RECURSION_LIMIT, never lower it
        if sys.getrecursionlimit() < codec.RECURSION_LIMIT:
            sys.setrecursionlimit(codec.RECURSION_LIMIT)
        super().__init__(cfg)
        self.cfg = cfg
        self.sandbox = Sandbox(cfg.sandbox)
        self.last_self_test = "not run yet"
        """Outcome of the last :meth:`self_test`: ``passed``, or the reason it failed."""

    def config_items(self) -> dict[str, str]:
        """Resolved configuration, plus whether runs are really sandboxed."""
        items = super().config_items()
        items["sandboxed"] = str(self.sandbox.sandboxed)
        items["self_test"] = self.last_self_test
        return items

    def close(self) -> None:
        """Release the sandbox's slot uids."""
        self.sandbox.close()

    def self_test(self) -> str | None:
        """Judge a passing and a failing candidate in the configured sandbox, as requests are.

        The passing one (``double(x) = 2 * x``) must score OK with both tests PASSED, the
        failing one (``x + 2``: right at 2, wrong at -3) OK with the first PASSED and the second
        FAILED; anything else — a sandbox that cannot start (INTERNAL), a timeout, a wrong
        verdict — is a failure. The service stays NOT_SERVING until this passes
        (``SelfTestWorker``).

        Returns:
            None when both were judged right, else one line naming the sandbox, the candidate,
            the status and test verdicts it got. The outcome is also kept for ``Describe``
            (``self_test`` in the config map).
        """
        reason = None
        for which, response, want in _SELF_TEST_CANDIDATES:
            score = self.verify(_SELF_TEST_TASK, response)
            got = tuple(common_pb2.TestStatus.Name(t.status).removeprefix("TEST_STATUS_")
                        for t in score.tests)  # fmt: skip
            if score.status != _OK or got != want:
                status = common_pb2.ScoreStatus.Name(score.status)
                reason = (
                    f"sandbox self-test ({self.sandbox.describe()}): the {which} candidate got "
                    f"{status} with tests {list(got)}, want SCORE_STATUS_OK with {list(want)}: "
                    f"{score.detail}"
                )
                break
        self.last_self_test = "passed" if reason is None else reason
        return reason

    def score(self, task: common_pb2.Task, response: str) -> common_pb2.Score:
        """Run ``response``'s program against ``task.code_tests`` and score it.

        Returns:
            A Score (status mapping in the module docstring) with one TestResult per case;
            ``extracted_answer`` holds the head of the extracted program.

        Raises:
            InvalidArgumentError: the task's tests are malformed (names the field).
        """
        suite = suite_from_tests(task.code_tests, task.id)
        body = extract_program(source_text(response))
        if not body.strip():
            return make_score(common_pb2.SCORE_STATUS_NO_ANSWER, detail="no program in response")
        prefix = source_text(task.code_tests.program_prefix)
        program = prefix + source_text(body)
        bad = unencodable_at(program)
        if bad is not None:
            detail = (
                f"program text holds a lone surrogate U+{ord(program[bad]):04X} at character "
                f"{bad}: not UTF-8, no source file can hold it (SyntaxError under python3)"
            )
            tests = [_result(c.name, _ERROR, detail) for c in suite.cases]
            score = make_score(common_pb2.SCORE_STATUS_RUNTIME_ERROR, tests=tests, detail=detail)
            score.extracted_answer = _safe(body[:_EXTRACTED_CHARS])
            return score
        if len(program) > self.cfg.max_program_chars:
            return make_score(
                common_pb2.SCORE_STATUS_RUNTIME_ERROR,
                detail=f"program has {len(program)} characters, more than "
                f"max_program_chars={self.cfg.max_program_chars}",
            )
        if suite.style == "stdio":
            result = self._score_stdio(suite, program)
        else:
            result = self._score_calls(suite, program, prefix)
        result.extracted_answer = body[:_EXTRACTED_CHARS]
        return result

    def _reward(self, tests: list[common_pb2.TestResult]) -> float:
        passed = sum(t.status == _PASSED for t in tests)
        if self.cfg.reward_mode == "fraction":
            return passed / len(tests)
        return float(passed == len(tests))

    def _unstarted(self, run: RunResult) -> common_pb2.Score | None:
        if run.started:
            return None
        if run.start_error:
            return make_score(common_pb2.SCORE_STATUS_INTERNAL, detail=_safe(run.start_error))
        if run.timed_out:
            return make_score(common_pb2.SCORE_STATUS_INTERNAL, detail="sandbox start timed out")
        tail = run.stderr[-500:].decode("utf-8", "replace").strip()
        return make_score(
            common_pb2.SCORE_STATUS_INTERNAL,
            detail=f"sandbox failed to start (exit status {run.exit_code}): {tail}",
        )

    def _load_failure(self, suite: TestSuite, run: RunResult) -> common_pb2.Score | None:
        kinds = {r["k"] for r in run.records}
        if "loaded" in kinds:
            return None
        error = next((r for r in run.records if r["k"] == "load_error"), None)
        if error is not None:
            kind = str(error.get("type", "Error"))[:80]
            status = _MEMORY if kind == "MemoryError" else _ERROR
            detail = _safe(f"program failed to load: {kind}: {str(error.get('msg', ''))[:300]}")
        elif run.timed_out:
            tests = [
                _result(c.name, _TIMEOUT, "wall-clock limit while loading") for c in suite.cases
            ]
            return make_score(
                common_pb2.SCORE_STATUS_TIMEOUT,
                tests=tests,
                detail="wall-clock limit hit while loading the program",
            )
        else:
            status, detail = _ERROR, "program ended while loading (exit, crash or rlimit)"
        tests = [_result(c.name, status, detail) for c in suite.cases]
        return make_score(common_pb2.SCORE_STATUS_RUNTIME_ERROR, tests=tests, detail=detail)

    def _finish(
        self, run: RunResult, tests: list[common_pb2.TestResult], note: str
    ) -> common_pb2.Score:
        status = common_pb2.SCORE_STATUS_TIMEOUT if run.timed_out else common_pb2.SCORE_STATUS_OK
        passed = sum(t.status == _PASSED for t in tests)
        detail = f"{passed}/{len(tests)} tests passed" + (f"; {note}" if note else "")
        if run.timed_out:
            detail += "; wall-clock limit hit"
        return make_score(status, self._reward(tests), tests=tests, detail=detail)

    def _score_calls(self, suite: TestSuite, program: str, prefix: str) -> common_pb2.Score:
        recording = record_calls(suite)
        job = _calls_job(suite, program, recording)
        run = self.sandbox.run(job, _tests_job(suite, prefix, recording.inside))
        early = self._unstarted(run) or self._load_failure(suite, run)
        if early is not None:
            return early
        verdicts = replay_cases(suite, recording, _call_results(run, len(recording.flat_calls())))
        inside = {i: _case_record(run, i) for i in recording.inside}
        diverged = [i for i, v in verdicts.items() if v.outcome == "diverged"]
        if diverged:  # rare: control flow depends on results; rerun those cases inside
            rerun = self.sandbox.run(
                _calls_job(suite, program, Recording([None] * len(suite.cases))),
                _tests_job(suite, prefix, diverged),
            )
            for i in diverged:
                inside[i] = _case_record(rerun, i)
                run.timed_out = run.timed_out or rerun.timed_out
        unsupported = [r for r in inside.values() if r and r.get("outcome") == "unsupported"]
        if unsupported:
            detail = _safe(f"cannot decide: {str(unsupported[0].get('msg', ''))[:300]}")
            return make_score(common_pb2.SCORE_STATUS_INTERNAL, detail=detail)
        tests: list[common_pb2.TestResult] = []
        for i, case in enumerate(suite.cases):
            if i in inside:
                tests.append(_inside_result(case.name, inside[i], run.timed_out))
            else:
                tests.append(_replayed_result(case.name, verdicts[i], run.timed_out))
        note = f"{len(inside)} case(s) ran inside the sandbox (weaker)" if inside else ""
        return self._finish(run, tests, note)

    def _score_stdio(self, suite: TestSuite, program: str) -> common_pb2.Score:
        """Run every stdin/stdout pair and compare its output here.

        The pairs' outputs come back on the result pipe (``sandbox.result_cap_bytes`` per
        run). When it fills before every pair has reported, the pairs without a record run
        again in a fresh sandbox, from the first of them: each pair runs in a fresh fork of
        its own anyway, so a split run judges exactly as one run would.
        """
        n = len(suite.cases)
        records: list[dict[str, Any] | None] = [None] * n
        start = 0
        while True:
            job = {
                "mode": "stdio",
                "program": program,
                "stdin": [c.stdin for c in suite.cases[start:]],
                "stdout_cap_bytes": self.cfg.stdout_capture_bytes,
            }
            run = self.sandbox.run(job)
            early = self._unstarted(run) or self._load_failure(suite, run)
            if early is not None:
                return early
            for j, record in enumerate(_indexed(run, "io", n - start)):
                records[start + j] = record
            if run.timed_out or not run.results_truncated:
                break
            rest = next((i for i in range(start, n) if records[i] is None), None)
            if rest is None or rest == start:  # done, or one pair's record cannot fit
                break
            start = rest
        tests = []
        for i, case in enumerate(suite.cases):
            record = records[i]
            if record is None:
                tests.append(_missing_result(case.name, run.timed_out))
            elif "out" in record:
                ok = _stdout_matches(record["out"], case.expected_stdout, suite)
                tests.append(
                    _result(case.name, _PASSED if ok else _FAILED, "" if ok else "stdout differs")
                )
            else:
                tests.append(_raised_result(case.name, record))
        return self._finish(run, tests, "")


def _stdout_matches(encoded: Any, expected: str, suite: TestSuite) -> bool:
    """Compare a pair's stdout (base64 of its bytes, from the driver) with ``expected``;
    malformed base64 is a wrong output. Invalid UTF-8 is read with U+FFFD, as a judge's
    text checker would see a mismatch."""
    if type(encoded) is not str:
        return False
    try:
        raw = binascii.a2b_base64(encoded, strict_mode=True)
    except (binascii.Error, ValueError):
        return False
    actual = raw.decode("utf-8", "replace")
    del raw
    return compare_stdout(actual, expected, suite.compare, suite.float_tolerance)


def _safe(text: str) -> str:
    """``text`` with lone surrogates escaped (``\\ud800``): protobuf strings must be UTF-8."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _result(name: str, status: int, detail: str = "") -> common_pb2.TestResult:
    return common_pb2.TestResult(name=_safe(name), status=status, detail=_safe(detail))  # type: ignore[arg-type]


def _missing_result(name: str, timed_out: bool) -> common_pb2.TestResult:
    if timed_out:
        return _result(name, _TIMEOUT, "wall-clock limit hit before this test finished")
    return _result(name, _ERROR, "program ended before this test ran")


def _raised_result(name: str, record: Mapping[str, Any]) -> common_pb2.TestResult:
    kind = str(record.get("raised", "Error"))[:80]
    msg = str(record.get("msg", ""))[:300]
    return _result(name, _MEMORY if kind == "MemoryError" else _ERROR, f"{kind}: {msg}")


def _replayed_result(name: str, verdict: CaseVerdict, timed_out: bool) -> common_pb2.TestResult:
    if verdict.outcome == "passed":
        return _result(name, _PASSED)
    if verdict.outcome == "failed":
        return _result(name, _FAILED, verdict.kind)
    if verdict.kind == "missing":
        return _missing_result(name, timed_out)
    status = _MEMORY if verdict.kind == "MemoryError" else _ERROR
    return _result(name, status, f"{verdict.kind}: {verdict.message}")


def _inside_result(
    name: str, record: Mapping[str, Any] | None, timed_out: bool
) -> common_pb2.TestResult:
    if record is None:
        result = _missing_result(name, timed_out)
    elif record.get("outcome") == "passed":
        result = _result(name, _PASSED)
    elif record.get("outcome") == "failed":
        result = _result(name, _FAILED, "AssertionError")
    else:
        result = _raised_result(name, record)
    result.detail = f"{result.detail}; {_INSIDE_NOTE}" if result.detail else _INSIDE_NOTE
    return result


def _calls_job(suite: TestSuite, program: str, recording: Recording) -> dict[str, Any]:
    """The program process's job: load ``program``, make the recorded calls, then serve."""
    return {
        "mode": "calls",
        "program": program,
        "entry_point": suite.entry_point,
        "calls": recording.flat_calls(),
    }


def _tests_job(suite: TestSuite, prefix: str, report: list[int]) -> dict[str, Any] | None:
    """The test process's job (cases ``report`` are decided inside), or None when none is."""
    if not report:
        return None
    return {
        "prefix": prefix,
        "setup": suite.setup,
        "cases": [c.source for c in suite.cases],
        "report": report,
        "arg": suite.arg,
        "entry_point": suite.entry_point,
        "names": list(free_names(suite)),
    }


def _indexed(run: RunResult, kind: str, n: int) -> list[dict[str, Any] | None]:
    """First record of ``kind`` per index 0..n-1 (later duplicates are ignored)."""
    out: list[dict[str, Any] | None] = [None] * n
    for record in run.records:
        i = record.get("i")
        if record.get("k") == kind and type(i) is int and 0 <= i < n and out[i] is None:
            out[i] = record
    return out


def _call_results(run: RunResult, n: int) -> list[dict[str, Any] | None]:
    return _indexed(run, "call", n)


def _case_record(run: RunResult, i: int) -> dict[str, Any] | None:
    """The test process's verdict on case ``i`` (never read from the program's fd)."""
    for record in run.verdicts:
        if record.get("k") == "case" and record.get("i") == i and type(record.get("i")) is int:
            return record
    return None
