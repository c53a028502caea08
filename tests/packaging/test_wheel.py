"""The wheel holds every module: build it from a copy of the sources (no network, no build
isolation) and check that each ``.py`` under learner/, services/ and verifiers/ is packaged as
``grpo/<folder>/...`` (a folder without ``__init__.py`` is silently left out by setuptools'
package discovery, and ``grpo serve`` then fails only once installed). The build warns of
nothing (setuptools' deprecations, e.g. a ``project.license`` table, are warnings until the
day the build breaks) and the metadata carries the SPDX licence expression (PEP 639)."""

from __future__ import annotations

import re
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
        shutil.copytree(REPO / folder, src / folder, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    out = tmp_path / "dist"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--no-index", "-v", "-w", str(out), str(src)],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr[-3000:]
    # The backend's warnings reach pip's output only with -v ("SetuptoolsDeprecationWarning:",
    # "BuildBackendWarning: `project.license` as a TOML table is deprecated").
    warned = re.findall(r"^.*\b\w+Warning\b.*$", build.stdout + build.stderr, re.MULTILINE)
    assert not warned, "the build warns:\n" + "\n".join(warned)
    (wheel,) = out.glob("grpo_pipeline-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
    headers = zipfile.ZipFile(wheel).read(metadata).decode().partition("\n\n")[0].splitlines()
    assert "License-Expression: Apache-2.0" in headers
    assert not [h for h in headers if h.startswith("License:")]  # the deprecated field
    missing = sorted(_sources(src) - names)
    assert not missing, f"modules left out of the wheel: {missing}"
    assert {"grpo/v1/common_pb2.py", "grpo/cli.py", "grpo/py.typed"} <= names
    local = {f"grpo/{p.relative_to(src / 'grpo').as_posix()}" for p in (src / "grpo").rglob("*.py")}
    assert not sorted(local - names), "grpo/ modules left out of the wheel"
