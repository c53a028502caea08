"""Digests of the folders a run trusts later: learner checkpoints and published weights.

A folder is written with ``write_digests`` just before it is made durable (fsync, atomic
rename): ``DIGESTS.json`` lists every regular file under it (relative path, size in bytes,
SHA-256). ``check_digests`` recomputes them when the folder is about to be used, so a
checkpoint truncated by a full disk, or bytes altered at rest without changing the size, are
found before a model is loaded from them, instead of being trained on. A folder written
before digests existed has no ``DIGESTS.json``: ``NoDigestsError`` lets its reader decide
(the learner and the rollout workers accept it, as before).

The manifest itself is vouched for by the folder's parent: once the folder has its final
name, ``record_digests`` adds the SHA-256 of its ``DIGESTS.json`` to
``<parent>/DIGESTS.index.json`` (folder name -> digest). A folder the index names must still
have that very manifest: a ``DIGESTS.json`` deleted (which would pass the folder off as one
from before digests, trusted unchecked) or edited (e.g. emptied) makes the folder damaged.
A folder the index does not name (written before the index existed, or by a writer killed
between its rename and the index) is checked against its own manifest as before.

The run vouches for both: a run started since digests exist records so in its own metadata
(``<run_dir>/run.json``, ``"writes_digests": true``, written by ``grpo run`` at start:
``RUN_RECORD_KEY``). In such a run every ``<run_dir>/checkpoints/step-*`` and
``<run_dir>/weights/v*`` folder was written with a manifest, so one without ``DIGESTS.json``
is damaged even when the index entry is gone too (``run_writes_digests``): deleting the
manifest and its index entry no longer passes a folder off as one from before digests.

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
    "INDEX_FILE",
    "RUN_RECORD_FILE",
    "RUN_RECORD_KEY",
    "DamagedError",
    "NoDigestsError",
    "check_digests",
    "file_sha256",
    "read_digests",
    "record_digests",
    "recorded_manifest",
    "run_writes_digests",
    "write_digests",
]

DIGESTS_FILE = "DIGESTS.json"
"""The manifest of a folder's files, written into the folder itself."""

INDEX_FILE = "DIGESTS.index.json"
"""In a parent folder (``checkpoints/``, ``weights/``): each child's name -> the SHA-256 of
its ``DIGESTS.json`` (``record_digests``)."""


RUN_RECORD_FILE = "run.json"
"""The run's own metadata in its run dir (``grpo.local.rundir.RunIdentity``)."""

RUN_RECORD_KEY = "writes_digests"
"""run.json's flag: every checkpoint and published weights folder of the run has a manifest."""


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


def _read_index(parent: Path) -> dict[str, str]:
    """``parent``'s index (name -> SHA-256 of that child's ``DIGESTS.json``); {} when it
    has none or it is unreadable (then every child is checked on its own manifest)."""
    try:
        raw = json.loads((parent / INDEX_FILE).read_text())
        return {str(k): str(v) for k, v in dict(raw["manifests"]).items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def run_writes_digests(folder: Path) -> bool:
    """Whether the run that owns ``folder`` (``<run_dir>/checkpoints/<name>`` or
    ``<run_dir>/weights/<name>``) records in its run.json that it writes digests (module
    docstring); False without a readable run.json there (a run from before the flag, a
    folder outside a run dir)."""
    try:
        raw = json.loads((folder.parent.parent / RUN_RECORD_FILE).read_text())
        return isinstance(raw, dict) and raw.get(RUN_RECORD_KEY) is True
    except (OSError, ValueError):
        return False


def recorded_manifest(folder: Path) -> str | None:
    """The SHA-256 of ``folder``'s ``DIGESTS.json`` as its parent's index recorded it (None
    when the index does not name it)."""
    return _read_index(folder.parent).get(folder.name)


def record_digests(folder: Path) -> None:
    """Vouch for ``folder``'s ``DIGESTS.json`` in its parent's index (module docstring);
    call it once the folder has its final name. Names whose folder is gone are dropped from
    the index. The index is replaced atomically (one writer per parent: the learner)."""
    parent = folder.parent
    index = {n: d for n, d in _read_index(parent).items() if (parent / n).is_dir()}
    index[folder.name] = file_sha256(folder / DIGESTS_FILE)
    tmp = parent / f".{INDEX_FILE}.{os.getpid()}.tmp"
    with tmp.open("w") as fh:
        json.dump({"algorithm": "sha256", "manifests": index}, fh, indent=1, sort_keys=True)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, parent / INDEX_FILE)


def read_digests(
    folder: Path, *, recorded_as: Path | None = None
) -> dict[str, dict[str, int | str]]:
    """The recorded digests of ``folder`` (``write_digests``'s mapping), its manifest checked
    against the parent's index when the index names it.

    Args:
        folder: the folder to read.
        recorded_as: the folder the index entry is for, when ``folder`` is a copy of it
            (a rollout worker's snapshot of a published version); default ``folder``.

    Raises:
        NoDigestsError: no ``DIGESTS.json``, the index does not name the folder and its run
            does not record that it writes digests (``run_writes_digests``).
        DamagedError: ``DIGESTS.json`` is unreadable, or gone or altered since the index
            recorded it, or gone in a run that writes digests.
    """
    path = folder / DIGESTS_FILE
    vouched = recorded_manifest(recorded_as or folder)
    if vouched is not None:
        if not path.is_file():
            raise DamagedError(
                f"{folder}: {DIGESTS_FILE} is missing, though {INDEX_FILE} records it was "
                "written (deleted since: the folder cannot be trusted)"
            )
        if file_sha256(path) != vouched:
            raise DamagedError(
                f"{folder}: {DIGESTS_FILE} differs from the manifest {INDEX_FILE} recorded "
                "when it was written (edited since)"
            )
    if not path.is_file():
        if run_writes_digests(recorded_as or folder):
            raise DamagedError(
                f"{folder}: {DIGESTS_FILE} is missing, though its run records in "
                f"{RUN_RECORD_FILE} that it writes one for every folder (deleted since: the "
                "folder cannot be trusted)"
            )
        raise NoDigestsError(f"{folder} has no {DIGESTS_FILE} (written before digests existed)")
    try:
        files = json.loads(path.read_text())["files"]
        return {str(k): {"bytes": int(v["bytes"]), "sha256": str(v["sha256"])}
                for k, v in files.items()}  # fmt: skip
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise DamagedError(f"{folder}/{DIGESTS_FILE} is unreadable: {exc!r}") from exc


def check_digests(folder: Path, *, recorded_as: Path | None = None) -> None:
    """Check every file ``DIGESTS.json`` lists: present, of its size, of its SHA-256 (the
    manifest itself against the parent's index first, ``read_digests``).

    Args:
        folder: the folder to check; recorded_as: see ``read_digests``.

    Raises:
        NoDigestsError: the folder has no ``DIGESTS.json``.
        DamagedError: the manifest is gone or edited (``read_digests``), or a file is
            missing, of another size (truncated) or another content (the message names the
            first such file and how it differs).
    """
    for name, want in read_digests(folder, recorded_as=recorded_as).items():
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
