"""Code verifier throughput on HumanEval: the warm path vs the spawn path vs bare spawn floors.

Measured side by side in one run, all with the same concurrency (``SLOTS`` threads), in
interleaved rounds (so load from other jobs on the machine falls on every path alike):

- floor: ``python3 -I -c pass`` and ``python3 -I -S -c pass`` (absolute interpreter path, no
  sandbox) once per sample;
- spawn: :class:`CodeVerifier` with ``sandbox.mode = spawn`` (a new bwrap + interpreter per
  sample: the previous path) on the 164 canonical solutions;
- warm: :class:`CodeVerifier` with ``sandbox.mode = warm`` (the default: a pre-imported zygote
  per slot forks each sample into fresh namespaces) on the same 164;
- warm on the 164 ``return None`` variants.

Prints samples/s per round and the median and range over ``ROUNDS`` rounds, the ratios
warm/spawn and warm/floors, and the pass counts (164/164 canonical pass and 0/164 ``return
None`` variants pass are the done-when checks).
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from grpo.v1 import common_pb2
from grpo.verifiers.code import CodeConfig, CodeVerifier, SandboxSettings

SLOTS = 2
ROUNDS = 5
DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "humaneval"


def _task(row: dict[str, Any]) -> common_pb2.Task:
    tests = common_pb2.CodeTests(
        test_code=row["test"], entry_point=row["entry_point"], program_prefix=row["prompt"]
    )
    return common_pb2.Task(id=row["task_id"], type="code", code_tests=tests)


def _rate(n: int, fn: Callable[[int], Any]) -> tuple[float, list[Any]]:
    start = time.perf_counter()
    with ThreadPoolExecutor(SLOTS) as pool:
        out = list(pool.map(fn, range(n)))
    return n / (time.perf_counter() - start), out


def _summary(values: list[float]) -> str:
    return f"{statistics.median(values):7.1f}  [{min(values):6.1f} .. {max(values):6.1f}]"


def main() -> None:
    """Run the interleaved rounds and print the table (see the module docstring)."""
    rows = [json.loads(line) for line in (DATA / "HumanEval.jsonl").open()]
    n = len(rows)
    python = str(
        Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    )
    none_bodies = [
        re.sub(r"(?m)^(\s*)return\b.*$", r"\1return None", r["canonical_solution"]) for r in rows
    ]
    warm = CodeVerifier(CodeConfig(sandbox=SandboxSettings(slots=SLOTS, uid_base=63000)))
    spawn = CodeVerifier(
        CodeConfig(sandbox=SandboxSettings(slots=SLOTS, uid_base=63100, mode="spawn"))
    )
    rates: dict[str, list[float]] = {
        k: [] for k in ("site", "nosite", "spawn", "warm", "warm_none")
    }
    passed: dict[str, list[int]] = {"spawn": [], "warm": [], "warm_none": []}
    latencies: list[float] = []
    try:
        for _ in range(ROUNDS):
            r, _ = _rate(n, lambda i: subprocess.run([python, "-I", "-c", "pass"], check=True))
            rates["site"].append(r)
            r, _ = _rate(
                n, lambda i: subprocess.run([python, "-I", "-S", "-c", "pass"], check=True)
            )
            rates["nosite"].append(r)
            for name, verifier, bodies in (
                ("spawn", spawn, [row["canonical_solution"] for row in rows]),
                ("warm", warm, [row["canonical_solution"] for row in rows]),
                ("warm_none", warm, none_bodies),
            ):
                r, scores = _rate(
                    n,
                    lambda i, v=verifier, b=bodies: v.verify(_task(rows[i]), b[i]),  # type: ignore[misc]
                )
                rates[name].append(r)
                passed[name].append(sum(s.reward == 1.0 for s in scores))
                if name == "warm":
                    latencies += [s.latency_s for s in scores]
    finally:
        warm.close()
        spawn.close()
    lat = sorted(latencies)
    print(f"concurrency {SLOTS} slots, {n} HumanEval samples per path, {ROUNDS} interleaved rounds")
    print("path                                              samples/s median [range]")
    print(f"floor  bare `python3 -I -c pass` per sample      : {_summary(rates['site'])}")
    print(f"floor  bare `python3 -I -S -c pass` (no site)    : {_summary(rates['nosite'])}")
    print(f"spawn  bwrap + interpreter per sample (old path) : {_summary(rates['spawn'])}")
    print(f"warm   zygote fork per sample (default)          : {_summary(rates['warm'])}")
    print(f"warm   `return None` variants                    : {_summary(rates['warm_none'])}")
    per_round = [w / s for w, s in zip(rates["warm"], rates["spawn"], strict=True)]
    print(
        f"ratio warm / spawn (per round)                   : {statistics.median(per_round):7.2f}"
        f"  [{min(per_round):.2f} .. {max(per_round):.2f}]"
    )
    for key, label in (("site", "python3 -I -c pass"), ("nosite", "python3 -I -S -c pass")):
        ratios = [w / f for w, f in zip(rates["warm"], rates[key], strict=True)]
        print(f"ratio warm / `{label}` floor".ljust(49) + f": {statistics.median(ratios):7.2f}")
    print(
        f"warm latency p50 {lat[len(lat) // 2] * 1e3:.0f} ms, "
        f"p99 {lat[int(len(lat) * 0.99)] * 1e3:.0f} ms"
    )
    print(f"canonical passing (spawn, warm, per round)       : {passed['spawn']}, {passed['warm']}")
    print(f"`return None` variants passing (warm, per round) : {passed['warm_none']} of {n}")


if __name__ == "__main__":
    main()
