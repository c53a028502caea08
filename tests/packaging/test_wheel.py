"""The wheel holds every module: build it from a copy of the sources (no network, no build
isolation) and check that each ``.py`` under learner/, services/ and verifiers/ is packaged as
``grpo/<folder>/...`` (a folder without ``__init__.py`` is silently left out by setuptools'
package discovery, and ``grpo serve`` then fails only once installed)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FOLDERS = ("learner", "services", "verifiers")


def _sources(root: Path) -> set[str]:
    """``grpo/<folder>/<path>.py`` for every module under the source folders."""
    out = set()
    for folder in FOLDERS:
        for path in (root / folder).rglob("*.py"):
            if "__pycache__" not in path.parts:
                out.add(f"grpo/{path.relative_to(root).as_posix()}")
    return out


def test_wheel_contains_every_module(tmp_path: Path) -> None:
    src = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for folder in (*FOLDERS, "grpo"):
        shutil.copytree(REPO / folder, src / folder, symlinks=True, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    out = tmp_path / "dist"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--no-index", "-q", "-w", str(out), str(src)],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = out.glob("grpo_pipeline-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = sorted(_sources(src) - names)
    assert not missing, f"modules left out of the wheel: {missing}"
    assert {"grpo/v1/common_pb2.py", "grpo/cli.py", "grpo/py.typed"} <= names
