"""The interpreter the sandbox runs: its paths and a world-readable hard-linked mirror.

The service's base interpreter may live under a directory the unprivileged slot uids cannot
traverse (pyenv under ``/root``, mode 0700), and bwrap started as such a uid resolves bind
sources with that uid's permissions. :func:`build_mirror` therefore hard-links (or copies,
across file systems) the binary, ``libpython`` and the stdlib — without site-packages and the
stdlib's test suite — into a root-owned 0755 directory once; the sandbox binds that mirror
read-only at the original prefix, so the binary's RUNPATH and ``sys.prefix`` still hold.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path

from grpo.errors import FailedPreconditionError

__all__ = ["build_mirror", "interpreter_paths"]

_STDLIB_SKIP = frozenset(
    {"site-packages", "test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3"}
)


def interpreter_paths(prefix: Path) -> tuple[Path, Path, Path | None]:
    """Return (python binary, stdlib dir, libpython or None) of the interpreter at ``prefix``."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    binary = prefix / "bin" / version
    stdlib = prefix / "lib" / version
    ldlib = sysconfig.get_config_var("INSTSONAME")
    libpython = prefix / "lib" / ldlib if ldlib and (prefix / "lib" / ldlib).exists() else None
    if not binary.is_file() or not (stdlib / "os.py").is_file():
        raise FailedPreconditionError(
            f"no interpreter at python_prefix {prefix}: expected {binary} and {stdlib}/os.py"
        )
    return binary, stdlib, libpython


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def build_mirror(prefix: Path, mirror_root: Path) -> Path:
    """Create (once) a world-readable hard-linked mirror of the interpreter at ``prefix``.

    Returns:
        The mirror dir, laid out like ``prefix`` (bin/, lib/libpython*, lib/python3.X/ minus
        site-packages and the test suite); it is bound read-only at ``prefix`` inside.

    Raises:
        FailedPreconditionError: no interpreter at ``prefix``.
    """
    binary, stdlib, libpython = interpreter_paths(prefix)
    digest = hashlib.sha256(f"{prefix.resolve()}|{sys.version}".encode()).hexdigest()[:12]
    tag = f"{binary.name}-{digest}"
    target = mirror_root / tag
    if (target / ".complete").exists():
        return target
    mirror_root.mkdir(mode=0o755, parents=True, exist_ok=True)
    os.chmod(mirror_root, 0o755)
    staging = Path(tempfile.mkdtemp(prefix=f".{tag}-", dir=mirror_root))
    (staging / "bin").mkdir()
    (staging / "lib").mkdir()
    _link_or_copy(str(binary.resolve()), str(staging / "bin" / binary.name))
    if libpython is not None:
        _link_or_copy(str(libpython.resolve()), str(staging / "lib" / libpython.name))
    shutil.copytree(
        stdlib,
        staging / "lib" / stdlib.name,
        symlinks=True,
        ignore=lambda d, names: [n for n in names if Path(d) == stdlib and n in _STDLIB_SKIP],
        copy_function=_link_or_copy,
    )
    for root, dirs, _files in os.walk(staging):
        for d in dirs:
            os.chmod(os.path.join(root, d), 0o755)
    os.chmod(staging, 0o755)
    (staging / ".complete").touch()
    try:
        os.rename(staging, target)
    except OSError:  # another process finished first
        shutil.rmtree(staging, ignore_errors=True)
    return target
