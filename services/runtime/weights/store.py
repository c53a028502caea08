"""The server side's domain: published policy versions on the learner's disk as manifests and
chunks (no gRPC here; ``grpo.services.runtime.weights.servicer`` adapts it).

A version is the folder ``<run_dir>/weights/v<N>`` that ``grpo.services.learner.publish`` renames
into place once complete, so a folder that exists never changes. Its manifest lists every
regular file (weights, config, tokenizer) with its size and SHA-256; a manifest is computed once
per version and cached (hashing runs at disk speed, ~1 GB/s: a 7B bf16 model takes ~15 s on the
first request and nothing afterwards). Chunks carry a CRC-32 of their bytes; the whole-file
SHA-256 in the manifest is what a puller finally checks: the one ``DIGESTS.json`` recorded
when the version was published (``grpo.integrity``), so a file damaged at rest fails its pull
instead of being copied faithfully; a folder without one is hashed as it is. A version pruned
by the publisher (``keep_weights``) answers NOT_FOUND; pullers then move on to the newest
version.
"""

from __future__ import annotations

import re
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from grpo.errors import InvalidArgumentError, NotFoundError
from grpo.integrity import NoDigestsError, file_sha256, read_digests

__all__ = [
    "DEFAULT_CHUNK_BYTES",
    "MAX_CHUNK_BYTES",
    "Chunk",
    "Manifest",
    "ManifestFile",
    "WeightStore",
    "file_sha256",
]

DEFAULT_CHUNK_BYTES = 1 << 20
"""Chunk size when the caller asks for none (1 MiB)."""
MAX_CHUNK_BYTES = 8 << 20
"""Largest chunk served (8 MiB, below the default 16 MiB gRPC message limit)."""

_VERSION_DIR = re.compile(r"^v(\d+)$")


@dataclass(frozen=True)
class ManifestFile:
    """One file of a version: name (no directories), size in bytes, lowercase hex SHA-256."""

    name: str
    size_bytes: int
    sha256: str


@dataclass(frozen=True)
class Manifest:
    """Every file of one published policy version."""

    policy_version: int
    files: tuple[ManifestFile, ...]

    @property
    def total_bytes(self) -> int:
        """Sum of the files' sizes in bytes."""
        return sum(f.size_bytes for f in self.files)


@dataclass(frozen=True)
class Chunk:
    """``data`` of one file starting at byte ``offset_bytes``; ``crc32`` = zlib.crc32(data)."""

    offset_bytes: int
    data: bytes
    crc32: int


class WeightStore:
    """Published versions under ``<run_dir>/weights``: manifests (cached) and chunked reads.

    Thread-safe: manifests are computed under a per-store lock, once per version.
    """

    def __init__(self, run_dir: Path) -> None:
        self.root = Path(run_dir) / "weights"
        self._lock = threading.Lock()
        self._manifests: dict[int, Manifest] = {}

    def versions(self) -> list[int]:
        """Published versions present on disk, ascending (temporary folders excluded)."""
        if not self.root.is_dir():
            return []
        found = (_VERSION_DIR.match(p.name) for p in self.root.iterdir() if p.is_dir())
        return sorted(int(m.group(1)) for m in found if m)

    def _folder(self, version: int) -> Path:
        if version < 0:
            raise InvalidArgumentError(f"policy_version must be >= 0, got {version}")
        folder = self.root / f"v{version}"
        if not folder.is_dir():
            held = self.versions()
            raise NotFoundError(
                f"policy version {version} is not on the weight server "
                f"(held: {held[-5:] or 'none'}; older ones are pruned after keep_weights)"
            )
        return folder

    def manifest(self, version: int) -> Manifest:
        """The manifest of ``version``; -1 = the newest held.

        Raises:
            NotFoundError: nothing is published yet, or ``version`` is not (or no longer) held.
            InvalidArgumentError: ``version`` < -1.
        """
        if version == -1:
            held = self.versions()
            if not held:
                raise NotFoundError(f"no policy version published under {self.root} yet")
            version = held[-1]
        folder = self._folder(version)
        with self._lock:
            cached = self._manifests.get(version)
            if cached is not None:
                return cached
            try:  # the digests recorded at publication: damage at rest fails the pull
                recorded = read_digests(folder)
            except NoDigestsError:
                recorded = {}
            files = tuple(
                ManifestFile(
                    p.name, int(recorded[p.name]["bytes"]), str(recorded[p.name]["sha256"])
                )
                if p.name in recorded
                else ManifestFile(p.name, p.stat().st_size, file_sha256(p))
                for p in sorted(folder.iterdir())
                if p.is_file()
            )
            manifest = Manifest(policy_version=version, files=files)
            self._manifests[version] = manifest
            for old in [v for v in self._manifests if v not in set(self.versions())]:
                del self._manifests[old]  # pruned folders
            return manifest

    def read(
        self, version: int, name: str, offset_bytes: int = 0, chunk_bytes: int = 0
    ) -> Iterator[Chunk]:
        """Yield ``name`` of ``version`` from ``offset_bytes`` in chunks of ``chunk_bytes``.

        Args:
            chunk_bytes: 1..MAX_CHUNK_BYTES; 0 = DEFAULT_CHUNK_BYTES.

        Raises:
            NotFoundError: the version or the file does not exist.
            InvalidArgumentError: a name with a directory part, an offset past the end, or a
                chunk size out of range.
        """
        if not name or "/" in name or "\\" in name or name in (".", ".."):
            raise InvalidArgumentError(f"file name {name!r} must be a plain name from the manifest")
        size = chunk_bytes or DEFAULT_CHUNK_BYTES
        if not 1 <= size <= MAX_CHUNK_BYTES:
            raise InvalidArgumentError(f"chunk_bytes must be in 1..{MAX_CHUNK_BYTES}, got {size}")
        path = self._folder(version) / name
        if not path.is_file():
            raise NotFoundError(f"policy version {version} has no file {name!r}")
        total = path.stat().st_size
        if offset_bytes > total:
            raise InvalidArgumentError(
                f"offset_bytes {offset_bytes} is past the end of {name!r} ({total} bytes)"
            )
        with path.open("rb") as fh:
            fh.seek(offset_bytes)
            offset = offset_bytes
            while data := fh.read(size):
                yield Chunk(offset, data, zlib.crc32(data))
                offset += len(data)
