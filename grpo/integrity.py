"""Digests of the folders a run trusts later: learner checkpoints and published weights.

A folder is written with ``write_digests`` just before it is made durable (fsync, atomic
rename): ``DIGESTS.json`` lists every regular file under it (relative path, size in bytes,
SHA-256). ``check_digests`` recomputes them when the folder is about to be used, so a
checkpoint truncated by a full disk, or bytes altered at rest without changing the size, are
found before a model is loaded from them, instead of being trained on. A folder written
before digests existed has no ``DIGESTS.json``: ``NoDigestsError`` lets its reader decide
(the learner and the rollout workers accept it, as before).

Hashing runs at disk speed (~1 GB/s): a tiny model costs milliseconds, a 7B bf16 checkpoint
with its optimizer state tens of seconds per load; a load is rare (a start, a resume, a new
policy version) next to what a damaged load costs.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from grpo.errors import FailedPreconditionError

__all__ = [
    "DIGESTS_FILE",
    "DamagedError",
    "NoDigestsError",
    "check_digests",
    "file_sha256",
    "read_digests",
    "write_digests",
]

DIGESTS_FILE = "DIGESTS.json"
"""The manifest of a folder's files, written into the folder itself."""


class DamagedError(FailedPreconditionError):
    """A folder's files differ from the digests recorded when it was written."""


class NoDigestsError(DamagedError):
    """A folder has no ``DIGESTS.json`` (written before digests existed, or not by us)."""


def file_sha256(path: Path, block_bytes: int = 4 << 20) -> str:
    """Lowercase hex SHA-256 of a file, read in ``block_bytes`` blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(block_bytes):
            digest.update(block)
    return digest.hexdigest()


def _files(folder: Path) -> list[Path]:
    return sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and p.relative_to(folder).as_posix() != DIGESTS_FILE
    )


def write_digests(folder: Path) -> dict[str, dict[str, int | str]]:
    """Record the size and SHA-256 of every regular file under ``folder`` in
    ``folder/DIGESTS.json`` (fsynced); call it once the folder's files are final.

    Returns:
        Relative posix path -> ``{"bytes": size, "sha256": hex}``.
    """
    entries: dict[str, dict[str, int | str]] = {
        p.relative_to(folder).as_posix(): {"bytes": p.stat().st_size, "sha256": file_sha256(p)}
        for p in _files(folder)
    }
    path = folder / DIGESTS_FILE
    with path.open("w") as fh:
        json.dump({"algorithm": "sha256", "files": entries}, fh, indent=1, sort_keys=True)
        fh.flush()
        os.fsync(fh.fileno())
    return entries


def read_digests(folder: Path) -> dict[str, dict[str, int | str]]:
    """The recorded digests of ``folder`` (``write_digests``'s mapping).

    Raises:
        NoDigestsError: no ``DIGESTS.json``.
        DamagedError: ``DIGESTS.json`` is unreadable.
    """
    path = folder / DIGESTS_FILE
    if not path.is_file():
        raise NoDigestsError(f"{folder} has no {DIGESTS_FILE} (written before digests existed)")
    try:
        files = json.loads(path.read_text())["files"]
        return {str(k): {"bytes": int(v["bytes"]), "sha256": str(v["sha256"])}
                for k, v in files.items()}  # fmt: skip
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise DamagedError(f"{folder}/{DIGESTS_FILE} is unreadable: {exc!r}") from exc


def check_digests(folder: Path) -> None:
    """Check every file ``DIGESTS.json`` lists: present, of its size, of its SHA-256.

    Raises:
        NoDigestsError: the folder has no ``DIGESTS.json``.
        DamagedError: a file is missing, of another size (truncated) or another content
            (the message names the first such file and how it differs).
    """
    for name, want in read_digests(folder).items():
        path = folder / name
        if not path.is_file():
            raise DamagedError(f"{folder}: {name} is missing")
        size = path.stat().st_size
        if size != want["bytes"]:
            raise DamagedError(
                f"{folder}: {name} has {size} bytes, {want['bytes']} were written (truncated?)"
            )
        if file_sha256(path) != want["sha256"]:
            raise DamagedError(
                f"{folder}: {name} differs from the SHA-256 recorded when it was written "
                "(same size: altered at rest)"
            )
