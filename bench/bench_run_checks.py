"""How long ``grpo run`` takes to refuse a run before any work (issue 29: under 5 s).

Wall time from the command's start (a fresh ``python -m grpo.cli run`` process, as a user
starts it) to its exit, for each refusal of the pre-run check, on ``configs/e2e-tiny.yaml``:

- ``unreachable``: ``verifiers.outcome`` names a loopback port nothing listens on
  (connection refused: UNAVAILABLE at once);
- ``silent``: the endpoint accepts the TCP connection but never answers (a hung process):
  the Describe deadline ``verifiers.check_timeout_s`` (1.5 s) bounds it;
- ``wrong task type``: ``verifiers.outcome: grpo.verifiers.example:SERVICE`` (declares only
  ``exact``) on arithmetic tasks;
- ``typo``: an unknown key inside ``verifiers.extra.verifier-steps``.

Each case runs ``RUNS`` times; the median and range are printed with the exit code (2 for
every refusal) and the refusal's line.
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUNS = 5


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _grpo_run(run_dir: Path, *sets: str) -> tuple[float, int, str]:
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env.update(OMP_NUM_THREADS="1", COLUMNS="400")
    cmd = [sys.executable, "-m", "grpo.cli", "run", str(REPO / "configs" / "e2e-tiny.yaml"),
           "--run-dir", str(run_dir)]  # fmt: skip
    for item in sets:
        cmd += ["--set", item]
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    wall = time.perf_counter() - started
    lines = [x for x in (done.stdout + done.stderr).splitlines() if x.strip()]
    return wall, done.returncode, lines[-1] if lines else ""


def main() -> None:
    silent = socket.socket()  # listens, accepts, never speaks: a hung verifier
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)
    cases = {
        "unreachable": (f"verifiers.outcome=127.0.0.1:{_closed_port()}",),
        "silent": (f"verifiers.outcome=127.0.0.1:{silent.getsockname()[1]}",),
        "wrong task type": ("verifiers.outcome=grpo.verifiers.example:SERVICE",),
        "typo": ("verifiers.extra.verifier-steps.verifier.pool.workrs=1",),
    }
    print(f"grpo run configs/e2e-tiny.yaml refused before any work; {RUNS} runs each, "
          "wall seconds from the command's start")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for name, sets in cases.items():
            walls, codes, last = [], set(), ""
            for i in range(RUNS):
                wall, code, last = _grpo_run(Path(tmp) / f"{name}-{i}".replace(" ", "-"), *sets)
                walls.append(wall)
                codes.add(code)
            print(f"  {name:16s} median {statistics.median(walls):.2f} s "
                  f"(range {min(walls):.2f}-{max(walls):.2f}), exit {sorted(codes)}: "
                  f"{last[:160]}")  # fmt: skip
    silent.close()


if __name__ == "__main__":
    main()
