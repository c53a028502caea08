"""Speed of the step checker, this checkout against an earlier commit, in one process.

``check_steps`` (segmentation, claims and their checks, no worker pool) over every GSM8K test
reference solution and every MATH-500 reference solution, solutions/s, the two versions run
in alternating rounds so that load from other work falls on both alike. The earlier version
is ``verifiers/steps/{claims,check,segment,symbolic}.py`` of ``--before``, read with ``git
show`` into a temporary package whose imports are pointed at itself (the shared number
reader, ``grpo.verifiers.math.arith``, is this checkout's).

    python scripts/steps_speed.py --before d0296dd [--rounds 3]

Needs ``GRPO_DATA_DIR`` (or ../shared/data) for the datasets.
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from grpo.services.tasks.datasets import data_dir
from grpo.verifiers.steps.check import check_steps

_MODULES = ("claims", "check", "segment", "symbolic")
_REPO = Path(__file__).resolve().parents[1]


def _old_checker(commit: str, into: Path) -> Callable[[str, int], object]:
    """``check_steps`` of ``commit``, materialized as the package ``stepsbefore``."""
    package = into / "stepsbefore"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    for name in _MODULES:
        source = subprocess.run(
            ["git", "show", f"{commit}:verifiers/steps/{name}.py"],
            cwd=_REPO,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        source = source.replace("grpo.verifiers.steps.", "stepsbefore.")
        source = source.replace("from grpo.verifiers.steps import", "from stepsbefore import")
        (package / f"{name}.py").write_text(source, encoding="utf-8")
    sys.path.insert(0, str(into))
    return importlib.import_module("stepsbefore.check").check_steps  # type: ignore[no-any-return]


def _texts(path: Path, key: str) -> list[str]:
    with path.open(encoding="utf-8") as fh:
        return [str(json.loads(line)[key]) for line in fh if line.strip()]


def main() -> None:
    """Print median [min .. max] solutions/s per version and dataset."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="commit of the earlier version")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    root = data_dir()
    data = {
        "gsm8k": _texts(root / "gsm8k" / "test.jsonl", "answer"),
        "math500": _texts(root / "math500" / "test.jsonl", "solution"),
    }
    with tempfile.TemporaryDirectory() as tmp:
        versions = {"before": _old_checker(args.before, Path(tmp)), "after": check_steps}
        for checker in versions.values():  # warm: sympy imported, caches filled
            for text in data["gsm8k"][:50] + data["math500"][:20]:
                checker(text, 200)
        speeds: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.rounds):
            for version, checker in versions.items():
                for name, texts in data.items():
                    start = time.perf_counter()
                    for text in texts:
                        checker(text, 200)
                    rate = len(texts) / (time.perf_counter() - start)
                    speeds.setdefault((version, name), []).append(rate)
    for (version, name), rates in speeds.items():
        print(
            f"{version} {name}: {statistics.median(rates):.1f} solutions/s "
            f"[{min(rates):.1f} .. {max(rates):.1f}] over {len(rates)} rounds"
        )


if __name__ == "__main__":
    main()
