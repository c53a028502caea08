"""The run record: what a results file was made from, so that ``--resume`` never mixes runs.

``grpo score`` and ``grpo eval`` write, beside their results, a small JSON file (``OUT.jsonl``
gets ``OUT.jsonl.run.json``; an eval folder gets ``run.json``) before the first row. It holds:

- ``format``: :data:`RECORD_FORMAT`;
- ``command``: ``score`` or ``eval``;
- ``identity``: everything that decides what a row holds. ``--resume`` compares it, field by
  field, with the identity of the new run and refuses any difference, naming the field:
  - ``grpo score``: the input's SHA-256, the kind, the task type, the field map and the
    verifier;
  - ``grpo eval``: the problems (the dataset and its SHA-256 when it is a file, limit,
    task type, field map, and the SHA-256 of the tasks themselves), the policy (a hash of the
    model folder's files, or what a generation service reports), the sampling settings
    (samples per problem, temperature, top-p, max new tokens, seed), the correct threshold and
    the verifier;
  - the verifier is its ``Describe`` answer: name, version, kind, task types and its resolved
    config, less the keys in :data:`SIZING_CONFIG_KEYS` (worker counts, which change speed,
    not verdicts);
- ``about``: facts that are shown, never compared (the input path, where the verifier ran,
  the grpo version), so a moved input file with the same content still resumes.

A results file with rows but no record was written before records existed: ``--resume``
refuses it (it cannot be checked), and ``--overwrite`` or a new output starts over.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo.errors import InvalidArgumentError
from grpo.v1 import common_pb2, verifier_pb2

__all__ = [
    "RECORD_FORMAT",
    "SIZING_CONFIG_KEYS",
    "RunRecord",
    "bytes_sha256",
    "differences",
    "file_sha256",
    "folder_sha256",
    "tasks_sha256",
    "verifier_identity",
]

RECORD_FORMAT = 1
"""Version of the run record's layout (a record of another format is refused on resume)."""

SIZING_CONFIG_KEYS = frozenset({"pool.workers", "sandbox.slots"})
"""Verifier config keys (dotted) that size the verifier, not its verdicts: left out of the
identity, so ``--workers`` may differ between a run and its resume."""


def bytes_sha256(data: bytes) -> str:
    """Hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: Path) -> str:
    """Hex SHA-256 of the file's bytes.

    Raises:
        OSError: the file cannot be read.
    """
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def folder_sha256(path: Path) -> str:
    """Hex SHA-256 over every regular file under ``path``: each file's relative POSIX path and
    content hash, in sorted order (a model folder's weights, config and tokenizer). Reads every
    byte once (about 1 s per GB).

    Raises:
        OSError: a file cannot be read.
    """
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(file.relative_to(path).as_posix().encode("utf-8") + b"\0")
        digest.update(file_sha256(file).encode("ascii") + b"\n")
    return digest.hexdigest()


def tasks_sha256(tasks: Iterable[common_pb2.Task]) -> str:
    """Hex SHA-256 of the tasks' deterministic protobuf serialization, in order."""
    digest = hashlib.sha256()
    for task in tasks:
        data = task.SerializeToString(deterministic=True)
        digest.update(len(data).to_bytes(8, "little") + data)
    return digest.hexdigest()


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping):
        for key in sorted(value):
            _flatten(f"{prefix}.{key}", value[key], out)
    else:
        out[prefix] = value


def verifier_identity(info: verifier_pb2.VerifierDescribeResponse) -> dict[str, Any]:
    """The identity of a verifier from its ``Describe`` answer (see the module docstring).

    Config values that are dicts written as text (``"{'workers': 2, ...}"``, as the SDK's
    ``config_items`` gives nested settings) are read back and flattened to dotted keys, so one
    nested key can be left out (:data:`SIZING_CONFIG_KEYS`).
    """
    config: dict[str, Any] = {}
    for key in sorted(info.config):
        text = info.config[key]
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            value = text
        _flatten(key, value if isinstance(value, dict) else text, config)
    kind = str(verifier_pb2.VerifierKind.Name(info.kind)).removeprefix("VERIFIER_KIND_").lower()
    return {
        "name": info.name,
        "version": info.version,
        "kind": kind,
        "task_types": sorted(info.task_types),
        "config": {
            k: v if isinstance(v, str | int | float | bool) or v is None else repr(v)
            for k, v in config.items()
            if k not in SIZING_CONFIG_KEYS
        },
    }


def differences(recorded: Any, current: Any, prefix: str = "") -> list[tuple[str, Any, Any]]:
    """The leaves that differ between two JSON values: ``(dotted path, recorded, current)``,
    in sorted key order (a key present on one side only differs with ``None`` on the other)."""
    if isinstance(recorded, dict) and isinstance(current, dict):
        out: list[tuple[str, Any, Any]] = []
        for key in sorted(set(recorded) | set(current)):
            path = f"{prefix}.{key}" if prefix else str(key)
            out.extend(differences(recorded.get(key), current.get(key), path))
        return out
    return [] if recorded == current else [(prefix, recorded, current)]


MAX_LISTED = 5
"""Differing fields named in a refusal (the rest are counted)."""


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


@dataclass(frozen=True)
class RunRecord:
    """What a results file was made from (module docstring).

    Attributes:
        command: ``score`` or ``eval``.
        identity: JSON values compared on resume.
        about: JSON values shown in messages, not compared.
    """

    command: str
    identity: dict[str, Any]
    about: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The record file's content."""
        return {
            "format": RECORD_FORMAT,
            "command": self.command,
            "identity": self.identity,
            "about": self.about,
        }

    def write(self, path: Path) -> None:
        """Write the record to ``path`` atomically (a temporary file renamed over it).

        Raises:
            OSError: the write failed.
        """
        data = json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n"
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def check_resume(self, path: Path, results: Path) -> None:
        """Refuse to resume ``results`` unless the record at ``path`` has this identity.

        Args:
            path: the record file written beside ``results`` by the earlier run.
            results: the results file (for the messages).

        Raises:
            InvalidArgumentError: no record (an older grpo wrote ``results``), a record that
                cannot be read, of another format or command, or an identity that differs;
                the message names each differing field with both values and says how to
                proceed (a new output, or ``--overwrite`` without ``--resume``).
        """
        proceed = (
            f"write to a new output, or drop --resume and pass --overwrite to replace {results}"
        )
        if not path.is_file():
            raise InvalidArgumentError(
                f"--resume refused: {results} holds results but no run record ({path.name}); "
                "it was written by an older grpo, so it cannot be checked against this input, "
                f"model and verifier: {proceed}"
            )
        try:
            stored = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(stored, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as exc:
            raise InvalidArgumentError(
                f"--resume refused: the run record {path} cannot be read ({exc}): {proceed}"
            ) from None
        if stored.get("format") != RECORD_FORMAT or stored.get("command") != self.command:
            raise InvalidArgumentError(
                f"--resume refused: {path} is a run record of format {stored.get('format')!r} "
                f"for command {stored.get('command')!r}, not format {RECORD_FORMAT} for "
                f"grpo {self.command}: {proceed}"
            )
        diffs = differences(stored.get("identity"), self.identity)
        diffs.sort(key=lambda d: (d[0].count("."), d[0]))  # kind, name... before config keys
        if diffs:
            listed = "; ".join(
                f"{p}: recorded {_short(a)}, now {_short(b)}" for p, a, b in diffs[:MAX_LISTED]
            )
            if len(diffs) > MAX_LISTED:
                listed += f"; and {len(diffs) - MAX_LISTED} more"
            about = stored.get("about")
            made = ""
            if isinstance(about, dict) and about:
                made = " (recorded run: " + ", ".join(f"{k} {v}" for k, v in about.items()) + ")"
            raise InvalidArgumentError(
                f"--resume refused: {results} was made by another run; {len(diffs)} field(s) "
                f"differ: {listed}{made}. Resuming would mix rows of two runs: {proceed}"
            )
