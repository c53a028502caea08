"""Lay out the ``grpo`` package as Python imports it, for mypy.

``pyproject.toml`` assembles ``grpo`` from four top-level folders with setuptools' package-dir
(``grpo.learner`` from ``learner/``, ``grpo.services`` from ``services/``, ``grpo.verifiers``
from ``verifiers/``). Installed, the import system follows that map; mypy reads the file system
and cannot follow an editable install's import hook. This script builds, under the folder it is
given (``make lint`` uses ``.tools/typing``, ignored by git), a ``grpo/`` of symbolic links to
the real files with the three folders linked in, so ``mypy -p grpo`` run there checks every
module. Nothing in the repository itself is a link.

Usage: ``python scripts/typing_view.py DEST``
"""

from __future__ import annotations

import shutil
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def build(dest: Path) -> None:
    """Recreate ``dest/grpo`` from ``[tool.setuptools] package-dir`` of pyproject.toml.

    Raises:
        KeyError: pyproject.toml has no ``package-dir`` table.
    """
    dirs = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    shutil.rmtree(dest, ignore_errors=True)
    root = dest / "grpo"
    root.mkdir(parents=True)
    for entry in (REPO / dirs["grpo"]).iterdir():
        if entry.name != "__pycache__":
            (root / entry.name).symlink_to(entry)
    for package, folder in dirs.items():
        if package != "grpo":
            (root / package.split(".", 1)[1]).symlink_to(REPO / folder)


if __name__ == "__main__":
    build(Path(sys.argv[1]).resolve())
