"""Run every benchmark module (``bench/bench_*.py``), or those named on the command line.

Usage: ``python -m bench [NAME ...]`` where NAME is e.g. ``learner`` for ``bench_learner``.
Each module prints its own measurements as ratios taken side by side in the same run.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    here = Path(__file__).parent
    names = argv or sorted(p.stem.removeprefix("bench_") for p in here.glob("bench_*.py"))
    for name in names:
        print(f"\n=== bench {name} ===", flush=True)
        importlib.import_module(f"bench.bench_{name}").main()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
