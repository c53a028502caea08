"""Memory cost of the code verifier's stdout limit (docs/sandbox.md, docs/results/).

For one stdin/stdout pair printing all but a byte of ``stdout_capture_bytes`` (default
16 MiB) in three kinds of text (one-digit lines, control characters, 4-byte UTF-8
characters), each scored ``--runs`` times by a one-slot ``CodeVerifier``:

- service: the peak of this process's Python allocations during ``verify`` above what was
  allocated before (tracemalloc), median and range over the runs, and the seconds ``verify``
  took (under tracemalloc, so slower than without);
- sandbox: the smallest ``sandbox.memory_mb`` of 64, 96, 128 and 160 with which the pair
  still passes (the driver's copies of the output count against it).

    python scripts/code_output_memory.py [--runs 3]

Needs root and bubblewrap (the real sandbox).
"""

from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc

from grpo.v1 import common_pb2
from grpo.verifiers.code import CodeConfig, CodeVerifier, SandboxSettings
from grpo.verifiers.sdk.base import Verifier


def _task(expected: str) -> common_pb2.Task:
    io = [common_pb2.IoPair(stdin="", expected_stdout=expected)]
    return common_pb2.Task(id="io", type="code", code_tests=common_pb2.CodeTests(io_pairs=io))


def _cases(cap: int) -> list[tuple[str, str, str]]:
    """(label, program, expected output) of ``cap - 1`` bytes or just under."""
    lines, ctrl, astral = (cap - 2) // 2, cap - 1, (cap - 1) // 4
    return [
        ("one-digit lines", f"import sys\nsys.stdout.write('1\\n' * {lines})", "1\n" * lines),
        ("control chars", f"import sys\nsys.stdout.write('\\x01' * {ctrl})", "\x01" * ctrl),
        (
            "4-byte UTF-8",
            f"import sys\nsys.stdout.write('\\U0001F600' * {astral})",
            "\U0001f600" * astral,
        ),
    ]


def _peak_growth(verifier: Verifier, task: common_pb2.Task, program: str) -> tuple[float, float]:
    """(peak growth of Python allocations in MiB, seconds) of one ``verify`` (tracemalloc:
    RSS would hide memory reused from an earlier run); asserts the pair passed."""
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    start = time.perf_counter()
    score = verifier.verify(task, program)
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert score.reward == 1.0, score.detail
    return (peak - base) / 2**20, seconds


def main() -> None:
    """Print the service figures per kind of text, then the sandbox's memory_mb bound."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    config = CodeConfig(sandbox=SandboxSettings(slots=1, wall_time_s=20))
    cap = config.stdout_capture_bytes
    cases = _cases(cap)
    print(f"stdout_capture_bytes = {cap} ({cap / 2**20:.0f} MiB), {args.runs} runs")
    with CodeVerifier(config) as verifier:
        for label, program, expected in cases:
            task = _task(expected)
            runs = [_peak_growth(verifier, task, program) for _ in range(args.runs)]
            mib = [r[0] for r in runs]
            secs = [r[1] for r in runs]
            print(
                f"service, {label}: peak allocations {statistics.median(mib):.0f} MiB "
                f"[{min(mib):.0f} .. {max(mib):.0f}], verify {statistics.median(secs):.2f} s "
                f"[{min(secs):.2f} .. {max(secs):.2f}]"
            )
    for memory_mb in (64, 96, 128, 160):
        settings = SandboxSettings(slots=1, wall_time_s=20, memory_mb=memory_mb)
        with CodeVerifier(CodeConfig(sandbox=settings)) as verifier:
            passed = all(
                verifier.verify(_task(expected), program).reward == 1.0
                for _, program, expected in cases[:2]
            )
        print(f"sandbox memory_mb {memory_mb}: the full output {'passes' if passed else 'fails'}")
        if passed:
            break


if __name__ == "__main__":
    main()
