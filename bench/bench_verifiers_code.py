"""Code verifier throughput on HumanEval against the floor of one bare interpreter spawn.

Measured side by side in one run, both with the same concurrency (``SLOTS`` threads):

- floor: ``python3 -I -c pass`` (absolute interpreter path, no sandbox) once per sample;
- verifier: :class:`CodeVerifier` on the 164 canonical solutions (hardened bwrap spawn per
  sample, record/replay, per-slot uid, sweep), and on their ``return None`` variants.

Prints samples/s of each, the ratio verifier/floor, and the pass counts (164/164 canonical
pass and 0/164 ``return None`` variants pass are the done-when checks).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from grpo.v1 import common_pb2
from grpo.verifiers.code import CodeConfig, CodeVerifier, SandboxSettings

SLOTS = 2
DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "humaneval"


def _task(row: dict) -> common_pb2.Task:
    tests = common_pb2.CodeTests(
        test_code=row["test"], entry_point=row["entry_point"], program_prefix=row["prompt"]
    )
    return common_pb2.Task(id=row["task_id"], type="code", code_tests=tests)


def _rate(n: int, fn) -> tuple[float, list]:
    start = time.perf_counter()
    with ThreadPoolExecutor(SLOTS) as pool:
        out = list(pool.map(fn, range(n)))
    return n / (time.perf_counter() - start), out


def main() -> None:
    rows = [json.loads(line) for line in (DATA / "HumanEval.jsonl").open()]
    python = str(
        Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    )
    verifier = CodeVerifier(CodeConfig(sandbox=SandboxSettings(slots=SLOTS, uid_base=63000)))
    try:
        floor, _ = _rate(
            len(rows), lambda i: subprocess.run([python, "-I", "-c", "pass"], check=True)
        )
        rate, scores = _rate(
            len(rows), lambda i: verifier.verify(_task(rows[i]), rows[i]["canonical_solution"])
        )
        floor2, _ = _rate(
            len(rows), lambda i: subprocess.run([python, "-I", "-c", "pass"], check=True)
        )
        bare_s, _ = _rate(
            len(rows), lambda i: subprocess.run([python, "-I", "-S", "-c", "pass"], check=True)
        )
        none_bodies = [
            re.sub(r"(?m)^(\s*)return\b.*$", r"\1return None", r["canonical_solution"])
            for r in rows
        ]
        _, none_scores = _rate(len(rows), lambda i: verifier.verify(_task(rows[i]), none_bodies[i]))
    finally:
        verifier.close()
    floor = (floor + floor2) / 2
    passed = sum(s.reward == 1.0 for s in scores)
    none_passed = sum(s.reward == 1.0 for s in none_scores)
    lat = sorted(s.latency_s for s in scores)
    print(f"concurrency {SLOTS} slots on this machine")
    print(f"floor  bare `python3 -I -c pass` per sample : {floor:7.1f} samples/s")
    print(
        f"verify HumanEval canonical (bwrap)        : {rate:7.1f} samples/s "
        f"({rate / SLOTS:.1f}/s per slot), p50 {lat[len(lat) // 2] * 1e3:.0f} ms, "
        f"p99 {lat[int(len(lat) * 0.99)] * 1e3:.0f} ms"
    )
    print(f"floor  bare `python3 -I -S -c pass` (no site, as the sandbox runs): {bare_s:7.1f}/s")
    print(f"ratio verifier / floor                    : {rate / floor:7.2f}")
    print(f"ratio verifier / no-site floor            : {rate / bare_s:7.2f}")
    print(f"canonical solutions passing               : {passed}/{len(rows)}")
    print(f"`return None` variants passing            : {none_passed}/{len(rows)}")


if __name__ == "__main__":
    main()
