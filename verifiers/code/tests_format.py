"""Code test formats and the record/replay protocol that keeps verdicts out of the sandbox.

Formats (``grpo.v1.CodeTests``):

- HumanEval: ``test_code`` defines ``check(candidate)``; each top-level statement of the body
  of ``check`` that contains an ``assert`` is one test case (with the plain statements before
  it as its setup), named by its line.
- MBPP: ``test_list`` holds one ``assert`` per case, ``test_imports`` run first; the candidate
  is bound to ``entry_point`` (inferred from the first assert when empty).
- stdin/stdout: ``io_pairs``; the program runs as ``__main__`` per pair, and its output is
  compared as ``output_compare`` says (:func:`compare_stdout`; default: the judges' rule,
  whitespace-separated tokens with decimal numbers within ``float_tolerance``, 1e-6).

Record/replay (for the first two formats). The test code is trusted, the candidate is not, so
the verdict is computed on the trusted side:

1. :func:`record_calls` runs each case here with a recording stand-in for the candidate that
   snapshots its arguments (through the strict codec) and returns a probe (``==`` is true,
   arithmetic and ordering give probes, truthiness tried both ways). A case that cannot be
   recorded this way (it iterates a result, uses ``is``, calls names the program defines,
   passes non-data arguments) is marked ``inside``.
2. The sandbox calls the candidate on the recorded arguments only and returns plain values;
   the test source and its expected values never enter the sandbox for recorded cases.
3. :func:`replay_cases` re-runs each recorded case here with a stand-in that checks the
   arguments match and returns the sandbox's decoded values; assertions decide.
   A case whose calls diverge from the recording (control flow depends on results) is
   reported as ``diverged`` and re-run inside.

``inside`` cases run in the sandbox's separate *test process* (``driver.py``): a process no
candidate code has run in, with the real builtins and modules, the task's ``program_prefix``
helpers, and the candidate reachable only through plain-data calls to the program process
(:func:`free_names` lists the names the tests take from the program). The candidate cannot
reach that process's namespace or memory, so shadowed builtins, patched modules and forged
records do not change those verdicts; they are still flagged, since the verdict is made
inside the sandbox rather than here.
"""

from __future__ import annotations

import ast
import builtins
import decimal
import functools
import math
import operator
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import CodeType
from typing import Any, Literal

from grpo.errors import InvalidArgumentError
from grpo.v1 import common_pb2
from grpo.verifiers.code import codec

__all__ = [
    "CaseVerdict",
    "Recording",
    "TestCase",
    "TestSuite",
    "compare_stdout",
    "free_names",
    "output_rule",
    "record_calls",
    "replay_cases",
    "suite_from_tests",
]

_MAX_PROBE_OPS = 10_000  # probe uses per recording before a case is declared dependent
_MAX_CALLS = 10_000  # candidate calls recorded per suite


@dataclass(frozen=True)
class TestCase:
    """One test case: module-level statements run with the candidate bound to the suite's arg.

    Attributes:
        name: display name (``"check line 12"``, the assert text, ``"io[3]"``).
        source: Python statements (empty for stdin/stdout pairs).
        stdin: input text (stdin/stdout pairs only).
        expected_stdout: expected output (stdin/stdout pairs only).
    """

    name: str
    source: str = ""
    stdin: str = ""
    expected_stdout: str = ""


@dataclass(frozen=True)
class TestSuite:
    """A task's tests in one normalized form.

    Attributes:
        style: ``"check"`` (HumanEval), ``"asserts"`` (MBPP) or ``"stdio"``.
        entry_point: name of the function under test (empty for stdio).
        arg: the name the cases use for the candidate (``candidate`` or the entry point).
        setup: module-level test source run before the cases (imports, helpers, check).
        cases: the test cases, in order.
        compare: stdout comparison of stdio suites (a ``common_pb2.OUTPUT_COMPARE_*`` value,
            never UNSPECIFIED).
        float_tolerance: absolute-or-relative tolerance of ``OUTPUT_COMPARE_TOKENS_FLOAT``.
    """

    style: Literal["check", "asserts", "stdio"]
    entry_point: str
    arg: str
    setup: str
    cases: tuple[TestCase, ...]
    compare: int = common_pb2.OUTPUT_COMPARE_TOKENS_FLOAT
    float_tolerance: float = 1e-6


def _contains_assert(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Assert) for n in ast.walk(node))


@functools.lru_cache(maxsize=4096)
def _code(source: str) -> CodeType:
    """Compiled test source (tasks repeat G times per group: compile each text once)."""
    return compile(source, "<tests>", "exec")


def _compiles(source: str) -> bool:
    try:
        _code(source)
    except SyntaxError:
        return False
    return True


@functools.lru_cache(maxsize=1024)
def _check_cases(test_code: str, task_id: str) -> tuple[str, tuple[TestCase, ...]]:
    try:
        tree = ast.parse(test_code)
    except SyntaxError as exc:
        raise InvalidArgumentError(
            f"task {task_id!r}: code_tests.test_code does not parse: {exc.msg} (line {exc.lineno})"
        ) from exc
    checks = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"]
    if not checks or len(checks[-1].args.args) != 1:
        raise InvalidArgumentError(
            f"task {task_id!r}: code_tests.test_code must define check(candidate) with one argument"
        )
    check = checks[-1]
    arg = check.args.args[0].arg
    cases: list[TestCase] = []
    pending: list[ast.stmt] = []
    for stmt in check.body:
        pending.append(stmt)
        if _contains_assert(stmt):
            source = ast.unparse(ast.Module(body=pending, type_ignores=[]))
            cases.append(TestCase(name=f"check line {stmt.lineno}", source=source))
            pending = []
    if pending and cases:
        tail = ast.unparse(ast.Module(body=pending, type_ignores=[]))
        cases[-1] = TestCase(name=cases[-1].name, source=cases[-1].source + "\n" + tail)
    if not cases or not all(_compiles(c.source) for c in cases):
        cases = [TestCase(name="check", source=f"check({arg})")]
    return arg, tuple(cases)


def _infer_entry_point(asserts: Sequence[str]) -> str:
    for text in asserts:
        for node in ast.walk(ast.parse(text)):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and not hasattr(builtins, node.func.id)
            ):
                return node.func.id
    return ""


DEFAULT_FLOAT_TOLERANCE = 1e-6
"""The judges' tolerance (Codeforces/AtCoder checkers): absolute or relative error <= 1e-6."""

_COMPARE_NAMES = {
    v: k for k, v in common_pb2.OutputCompare.items() if k != "OUTPUT_COMPARE_UNSPECIFIED"
}


def output_rule(mode: int, tolerance: float, *, stdio: bool) -> tuple[int, float]:
    """The validated stdout comparison of a task: ``(mode, tolerance)`` to compare with.

    The one rule for ``CodeTests.output_compare`` / ``float_tolerance``, used by the verifier
    and by the readers of task files (``grpo score`` / ``grpo eval`` inputs).

    Args:
        mode: ``CodeTests.output_compare`` (an ``OUTPUT_COMPARE_*`` value; UNSPECIFIED means
            ``OUTPUT_COMPARE_TOKENS_FLOAT``).
        tolerance: ``CodeTests.float_tolerance`` (absolute or relative; 0 means
            :data:`DEFAULT_FLOAT_TOLERANCE`).
        stdio: the task's tests are ``io_pairs`` (the only form the settings apply to).

    Returns:
        ``(mode, tolerance)`` with the defaults filled in (mode never UNSPECIFIED).

    Raises:
        InvalidArgumentError: ``mode`` is not an ``OutputCompare`` value, a setting is given
            for a task without ``io_pairs``, ``tolerance`` is not in [0, 1) (NaN included),
            or ``tolerance`` is set with a mode other than ``TOKENS_FLOAT``. The message starts
            with the field name (``output_compare``/``float_tolerance``).
    """
    mode, tol = int(mode), float(tolerance)
    if mode != common_pb2.OUTPUT_COMPARE_UNSPECIFIED and mode not in _COMPARE_NAMES:
        raise InvalidArgumentError(f"output_compare={mode} is not an OutputCompare value")
    if not stdio and (mode or tol):
        raise InvalidArgumentError(
            "output_compare/float_tolerance apply to io_pairs only (test_code and test_list "
            "are decided by their assertions)"
        )
    if not (math.isfinite(tol) and 0.0 <= tol < 1.0):
        raise InvalidArgumentError(f"float_tolerance={tol} must be in [0, 1)")
    mode = mode or common_pb2.OUTPUT_COMPARE_TOKENS_FLOAT
    if tol and mode != common_pb2.OUTPUT_COMPARE_TOKENS_FLOAT:
        raise InvalidArgumentError(
            f"float_tolerance is set but output_compare is {_COMPARE_NAMES[mode]}; it applies "
            "to OUTPUT_COMPARE_TOKENS_FLOAT only"
        )
    return mode, tol or DEFAULT_FLOAT_TOLERANCE


def _output_rule(tests: common_pb2.CodeTests, task_id: str, stdio: bool) -> tuple[int, float]:
    """:func:`output_rule` of a task's ``CodeTests``, its errors naming the task."""
    try:
        return output_rule(tests.output_compare, tests.float_tolerance, stdio=stdio)
    except InvalidArgumentError as exc:
        raise InvalidArgumentError(f"task {task_id!r}: code_tests.{exc}") from None


def suite_from_tests(tests: common_pb2.CodeTests, task_id: str = "") -> TestSuite:
    """Normalize a task's ``CodeTests`` into a :class:`TestSuite`.

    Precedence when several formats are set: ``test_code`` > ``test_list`` > ``io_pairs``.

    Raises:
        InvalidArgumentError: no tests are set, the test source does not parse, ``check``
            is missing, no entry point is given or inferable, or ``output_compare`` /
            ``float_tolerance`` are unknown, out of range or set on a non-stdio task; the
            message names the field.
    """
    if tests.test_code.strip():
        _output_rule(tests, task_id, stdio=False)
        if not tests.entry_point:
            raise InvalidArgumentError(
                f"task {task_id!r}: code_tests.entry_point is required with test_code"
            )
        arg, cases = _check_cases(tests.test_code, task_id)
        return TestSuite("check", tests.entry_point, arg, tests.test_code, cases)
    if tests.test_list:
        _output_rule(tests, task_id, stdio=False)
        for i, text in enumerate(tests.test_list):
            try:
                ast.parse(text)
            except SyntaxError as exc:
                raise InvalidArgumentError(
                    f"task {task_id!r}: code_tests.test_list[{i}] does not parse: {exc.msg}"
                ) from exc
        entry = tests.entry_point or _infer_entry_point(tests.test_list)
        if not entry:
            raise InvalidArgumentError(
                f"task {task_id!r}: code_tests.entry_point is empty and no function call "
                "was found in test_list to infer it"
            )
        setup = "\n".join(tests.test_imports)
        cases = tuple(TestCase(name=t.strip()[:200], source=t) for t in tests.test_list)
        return TestSuite("asserts", entry, entry, setup, cases)
    if tests.io_pairs:
        mode, tol = _output_rule(tests, task_id, stdio=True)
        cases = tuple(
            TestCase(name=f"io[{i}]", stdin=p.stdin, expected_stdout=p.expected_stdout)
            for i, p in enumerate(tests.io_pairs)
        )
        return TestSuite("stdio", "", "", "", cases, compare=mode, float_tolerance=tol)
    raise InvalidArgumentError(
        f"task {task_id!r}: code_tests has no test_code, test_list or io_pairs"
    )


_CHUNK_CHARS = 1 << 20
_SPACE = re.compile(r"\s")  # str.isspace(), as str.split() uses


def _lines(text: str) -> Iterator[list[str]]:
    """The lines of ``text`` right-stripped (so a CR before LF goes), trailing blank lines
    dropped, in chunks of about ``_CHUNK_CHARS`` characters: a big output costs no list of
    all its lines. (Dropping trailing blank lines of the right-stripped lines is splitting
    ``text.rstrip()``.)"""
    text = text.rstrip()
    pos = 0
    while text:
        end = text.find("\n", min(pos + _CHUNK_CHARS, len(text)))
        if end < 0:
            yield [line.rstrip() for line in text[pos:].split("\n")]
            return
        yield [line.rstrip() for line in text[pos:end].split("\n")]
        pos = end + 1


def _tokens(text: str) -> Iterator[list[str]]:
    """The whitespace-separated tokens of ``text`` (``text.split()``) in chunks of about
    ``_CHUNK_CHARS`` characters, each cut at whitespace so that no token is split."""
    pos = 0
    while pos < len(text):
        end = pos + _CHUNK_CHARS
        cut = _SPACE.search(text, end) if end < len(text) else None
        end = cut.start() if cut is not None else len(text)
        yield text[pos:end].split()
        pos = end


def _same_stream(
    got: Iterator[list[str]], want: Iterator[list[str]], same: Callable[[str, str], bool]
) -> bool:
    """True when the two chunked sequences have the same length and ``same`` holds for every
    aligned pair; equal runs are compared as lists (at C speed), ``same`` only where they
    differ."""
    a: list[str] = []
    e: list[str] = []
    ai = ei = 0
    while True:
        if ai == len(a):
            chunk = next(got, None)
            if chunk is None:
                return ei == len(e) and not any(want)
            a, ai = chunk, 0
            continue
        if ei == len(e):
            chunk = next(want, None)
            if chunk is None:
                return False  # actual has more items (a holds at least one)
            e, ei = chunk, 0
            continue
        k = min(len(a) - ai, len(e) - ei)
        part_a, part_e = a[ai : ai + k], e[ei : ei + k]
        if part_a != part_e and not all(map(same, part_a, part_e)):
            return False
        ai += k
        ei += k


_INTEGER = re.compile(r"[+-]?[0-9]+", re.ASCII)
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)


def _integer_key(token: str) -> tuple[bool, str]:
    """(negative, digits without leading zeros) of an integer token: exact, no int() limit."""
    digits = token.lstrip("+-").lstrip("0") or "0"
    return token.startswith("-") and digits != "0", digits


def _tokens_close(actual: str, expected: str, tolerance: float) -> bool:
    """Judges' number rule for one token pair (testlib ``doubleCompare``): integers exactly;
    otherwise both decimal numbers with ``|a - e| <= tolerance * max(1, |e|)``."""
    if actual == expected:
        return True
    if _INTEGER.fullmatch(actual) and _INTEGER.fullmatch(expected):
        return _integer_key(actual) == _integer_key(expected)
    if not (_DECIMAL.fullmatch(actual) and _DECIMAL.fullmatch(expected)):
        return False
    with decimal.localcontext() as ctx:
        ctx.prec, ctx.Emax, ctx.Emin = 40, decimal.MAX_EMAX, decimal.MIN_EMIN
        ctx.traps[decimal.Overflow] = ctx.traps[decimal.InvalidOperation] = False
        a, e = decimal.Decimal(actual), decimal.Decimal(expected)
        bound = decimal.Decimal(repr(tolerance)) * max(decimal.Decimal(1), abs(e))
        return abs(a - e) <= bound


def compare_stdout(
    actual: str,
    expected: str,
    mode: int = common_pb2.OUTPUT_COMPARE_LINES,
    tolerance: float = DEFAULT_FLOAT_TOLERANCE,
) -> bool:
    """True when a program's stdout matches the expected output under ``mode``.

    Args:
        actual: the program's stdout (text).
        expected: the task's expected_stdout.
        mode: ``OUTPUT_COMPARE_EXACT`` (same text), ``LINES`` (per line, trailing whitespace,
            CR and trailing blank lines ignored), ``TOKENS`` (same whitespace-separated
            tokens), ``TOKENS_FLOAT`` (tokens; two integer tokens must be equal, any other two
            decimal numbers may differ by ``tolerance`` absolutely or relatively to the
            expected one, as Codeforces/AtCoder checkers do; ``nan``/``inf`` compare as text).
        tolerance: the float tolerance (only ``TOKENS_FLOAT``).

    Lines and tokens are compared as they are read, never listed: a 16 MiB output of
    one-character lines would otherwise be ~8 M string objects (~450 MiB) per side.

    Raises:
        ValueError: ``mode`` is not a known comparison.
    """
    if mode == common_pb2.OUTPUT_COMPARE_EXACT:
        return actual == expected
    if mode == common_pb2.OUTPUT_COMPARE_LINES:
        return _same_stream(_lines(actual), _lines(expected), operator.eq)
    if mode not in (common_pb2.OUTPUT_COMPARE_TOKENS, common_pb2.OUTPUT_COMPARE_TOKENS_FLOAT):
        raise ValueError(f"unknown output comparison {mode}")
    if mode == common_pb2.OUTPUT_COMPARE_TOKENS:
        return _same_stream(_tokens(actual), _tokens(expected), operator.eq)
    return _same_stream(
        _tokens(actual), _tokens(expected), lambda a, e: _tokens_close(a, e, tolerance)
    )


def free_names(suite: TestSuite) -> tuple[str, ...]:
    """Names the test code reads but never binds and that are not builtins, sorted.

    These are the program's names the tests use (the entry point, helpers); the sandbox's test
    process takes them from the task's prefix when it defines them, else from the program
    process as plain-data values or remote functions.
    """
    loaded: set[str] = set()
    bound: set[str] = set()
    for source in (suite.setup, *(c.source for c in suite.cases)):
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                bound.add(node.name)
            elif isinstance(node, ast.arg):
                bound.add(node.arg)
            elif isinstance(node, ast.alias):
                bound.add((node.asname or node.name).split(".")[0])
    names = loaded - bound - set(dir(builtins))
    names.add(suite.entry_point)
    return tuple(sorted(names))


class _RecordingLimitError(Exception):
    """The recording stand-in was used too often (likely a loop on a probe)."""


class _Probe:
    """Placeholder result during recording.

    ``==`` is true and ``!=`` false; truthiness is fixed per pass; arithmetic, ordering,
    and ``abs``/``round`` give another probe, so checks such as
    ``abs(f(x) - 0.5) < 1e-6`` still record. Anything else (iteration, ``is``, conversion to
    a real number) fails the recording of that case, which then runs inside.
    """

    __slots__ = ("_recorder",)

    def __init__(self, recorder: _Recorder) -> None:
        self._recorder = recorder

    def __eq__(self, other: object) -> bool:
        self._recorder.tick()
        return True

    def __ne__(self, other: object) -> bool:
        self._recorder.tick()
        return False

    def __bool__(self) -> bool:
        self._recorder.tick()
        return self._recorder.truth

    def _derived(self, *_: object) -> _Probe:
        self._recorder.tick()
        return _Probe(self._recorder)

    __hash__ = object.__hash__
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _derived
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = _derived
    __mod__ = __rmod__ = __pow__ = __rpow__ = _derived
    __neg__ = __pos__ = __abs__ = __round__ = _derived
    __lt__ = __le__ = __gt__ = __ge__ = _derived


class _Recorder:
    def __init__(self, truth: bool) -> None:
        self.truth = truth
        self.calls: list[tuple[list[Any], list[Any]]] = []
        self.ops = 0

    def tick(self) -> None:
        self.ops += 1
        if self.ops > _MAX_PROBE_OPS:
            raise _RecordingLimitError("probe used too often")

    def __call__(self, *args: Any, **kwargs: Any) -> _Probe:
        self.tick()
        if len(self.calls) >= _MAX_CALLS:
            raise _RecordingLimitError("too many candidate calls")
        self.calls.append((codec.encode_tree(args), codec.encode_tree(kwargs)))
        return _Probe(self)


@dataclass
class Recording:
    """Calls recorded per case; ``None`` marks a case that must run inside the sandbox.

    Attributes:
        per_case: for case i, the list of (args tree, kwargs tree) in call order, or None.
    """

    per_case: list[list[tuple[list[Any], list[Any]]] | None] = field(default_factory=list)

    @property
    def inside(self) -> list[int]:
        """Indices of cases that must run inside the sandbox."""
        return [i for i, calls in enumerate(self.per_case) if calls is None]

    def flat_calls(self) -> list[tuple[list[Any], list[Any]]]:
        """All recorded calls in case order (the sandbox job's ``calls``)."""
        return [call for calls in self.per_case if calls is not None for call in calls]


def _record_pass(suite: TestSuite, truth: bool) -> list[list[tuple[list[Any], list[Any]]] | None]:
    out: list[list[tuple[list[Any], list[Any]]] | None] = []
    namespace: dict[str, Any] = {"__name__": "__tests__"}
    try:
        exec(_code(suite.setup), namespace)
    except Exception:
        return [None] * len(suite.cases)
    for case in suite.cases:
        recorder = _Recorder(truth)
        namespace[suite.arg] = recorder
        try:
            exec(_code(case.source), namespace)
        except Exception:
            out.append(None)
            continue
        out.append(recorder.calls)
    return out


def record_calls(suite: TestSuite) -> Recording:
    """Run each case on the trusted side with a recording stand-in; collect its calls.

    Two passes (probe truthy, probe falsy) so that both ``assert f(x)`` and ``assert not f(x)``
    record; a case keeps the first pass in which it ran to the end.

    Returns:
        The :class:`Recording` (``None`` for cases that must run inside).
    """
    passes = [_record_pass(suite, truth) for truth in (True, False)]
    per_case = [a if a is not None else b for a, b in zip(*passes, strict=True)]
    return Recording(per_case=per_case)


class CandidateRaisedError(Exception):
    """The candidate raised inside the sandbox (or returned nothing) for a replayed call."""

    def __init__(self, kind: str, message: str = "") -> None:
        super().__init__(kind)
        self.kind = kind
        self.message = message


class _Diverged(Exception):
    """Replay asked for a call that was not recorded (control flow depends on results)."""


class _Opaque:
    """Stand-in for a result that was not plain data: equal to nothing but itself."""

    __slots__ = ("type_name",)

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<non-data result of type {self.type_name}>"


_RAISABLE = {
    name: obj
    for name, obj in vars(builtins).items()
    if isinstance(obj, type) and issubclass(obj, Exception)
}


class _Replayer:
    def __init__(
        self, calls: list[tuple[list[Any], list[Any]]], results: Sequence[Mapping[str, Any] | None]
    ) -> None:
        self.calls = calls
        self.results = results
        self.next = 0
        self.candidate_error: CandidateRaisedError | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        k = self.next
        if k >= len(self.calls):
            raise _Diverged("more calls than recorded")
        try:
            same = (codec.encode_tree(args), codec.encode_tree(kwargs)) == self.calls[k]
        except codec.CodecError:
            same = False
        if not same:
            raise _Diverged("arguments differ from the recording")
        self.next += 1
        record = self.results[k]
        if record is None:
            self.candidate_error = CandidateRaisedError("missing")
            raise self.candidate_error
        if "v" in record:
            return codec.decode_tree(record["v"])
        if "unencodable" in record:
            return _Opaque(str(record["unencodable"])[:80])
        kind = str(record.get("raised", "Error"))[:80]
        message = str(record.get("msg", ""))[:300]
        self.candidate_error = CandidateRaisedError(kind, message)
        exc_type = _RAISABLE.get(kind)
        if exc_type is not None:
            try:
                raise exc_type(message) from self.candidate_error
            except TypeError:  # exception types with other constructor signatures
                pass
        raise self.candidate_error


@dataclass(frozen=True)
class CaseVerdict:
    """Replay outcome of one case.

    Attributes:
        outcome: ``passed``, ``failed`` (assertion or a wrong value), ``raised`` (the candidate
            raised; ``kind`` holds its exception type, ``missing`` when no result came back),
            or ``diverged`` (needs an inside run).
        kind: exception type name for ``failed``/``raised``.
        message: the candidate's own exception message (``raised`` only; never test values).
    """

    outcome: Literal["passed", "failed", "raised", "diverged"]
    kind: str = ""
    message: str = ""


def replay_cases(
    suite: TestSuite,
    recording: Recording,
    call_results: Sequence[Mapping[str, Any] | None],
) -> dict[int, CaseVerdict]:
    """Re-run every recorded case here, feeding it the sandbox's results.

    Args:
        suite: the suite that was recorded.
        recording: from :func:`record_calls`.
        call_results: per flat call index, the driver's ``call`` record or None when missing.

    Returns:
        Case index -> :class:`CaseVerdict` for every recorded (non-inside) case.
    """
    verdicts: dict[int, CaseVerdict] = {}
    if all(calls is None for calls in recording.per_case):
        return verdicts  # every case runs inside (e.g. the setup itself needs the program)
    namespace: dict[str, Any] = {"__name__": "__tests__"}
    exec(_code(suite.setup), namespace)
    offset = 0
    for i, calls in enumerate(recording.per_case):
        if calls is None:
            continue
        replayer = _Replayer(calls, call_results[offset : offset + len(calls)])
        offset += len(calls)
        namespace[suite.arg] = replayer
        verdicts[i] = _replay_one(suite.cases[i].source, namespace, replayer)
    return verdicts


def _replay_one(source: str, namespace: dict[str, Any], replayer: _Replayer) -> CaseVerdict:
    try:
        exec(_code(source), namespace)
    except _Diverged:
        return CaseVerdict("diverged")
    except AssertionError:
        if replayer.candidate_error is not None:
            err = replayer.candidate_error
            return CaseVerdict("raised", err.kind, err.message)
        return CaseVerdict("failed", "AssertionError")
    except Exception as exc:
        if replayer.candidate_error is not None:
            err = replayer.candidate_error
            return CaseVerdict("raised", err.kind, err.message)
        return CaseVerdict("failed", type(exc).__name__)
    if replayer.next < len(replayer.calls):
        return CaseVerdict("diverged")
    return CaseVerdict("passed")
