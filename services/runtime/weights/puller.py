"""The client side: pull a published policy version from a ``grpo.v1.Weights`` server into a
local folder, verify it, and hand the folder to the generation backend.

``WeightPuller.pull(version)``:

1. ``GetManifest(version)``: file names, sizes, SHA-256 digests.
2. Each file is streamed with ``ReadFile`` into ``<cache_dir>/.partial-v<N>/``; every chunk's
   offset must continue the file and its CRC-32 must match, else the chunk is rejected. A broken
   stream (UNAVAILABLE, DEADLINE_EXCEEDED, a bad chunk) resumes from the bytes already written,
   up to ``retries`` times with ``retry_backoff_s`` between tries.
3. Each finished file must have the manifest's size and SHA-256; a mismatch deletes the file and
   counts as a failed try (``ContractError`` once the tries are spent).
4. The folder is renamed to ``<cache_dir>/v<N>`` (atomic): a folder under that name is always
   complete and verified.

A version pruned on the server while being pulled answers NOT_FOUND (``NotFoundError``); the
caller moves on to the newest announced version. ``BackgroundPuller`` runs pulls in a daemon
thread so the rollout worker keeps generating with the old weights while a pull is in flight
(measured in ``python -m bench weights``).

Metrics: ``grpo_weights_pulled_bytes_total``, ``grpo_weights_pull_seconds``,
``grpo_weights_pull_failures_total``, ``grpo_weights_pull_in_flight``.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import grpc
from prometheus_client import Counter, Gauge, Histogram
from pydantic import BaseModel, ConfigDict, Field, model_validator

from grpo.errors import ContractError, GrpoError, NotFoundError, UnavailableError
from grpo.services.runtime.channels import client_channel
from grpo.services.runtime.weights.store import (
    DEFAULT_CHUNK_BYTES,
    MAX_CHUNK_BYTES,
    Manifest,
    ManifestFile,
    file_sha256,
)
from grpo.v1 import weights_pb2, weights_pb2_grpc

__all__ = ["BackgroundPuller", "PulledWeights", "WeightPuller", "WeightTransferConfig"]

log = logging.getLogger(__name__)

PULLED_BYTES = Counter("grpo_weights_pulled_bytes", "Weight file bytes received and verified.")
PULL_SECONDS = Histogram(
    "grpo_weights_pull_seconds",
    "Wall time of one verified pull of a policy version in seconds.",
    buckets=(0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0),
)
PULL_FAILURES = Counter("grpo_weights_pull_failures", "Pulls that failed (retried later).")
PULL_IN_FLIGHT = Gauge("grpo_weights_pull_in_flight", "1 while a background pull runs.")

_RETRYABLE = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNKNOWN}
)


class WeightTransferConfig(BaseModel):
    """How a generation process gets published weights."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: Literal["shared_volume", "grpc"] = Field(
        default="shared_volume",
        description="'shared_volume': load PolicyWeights.path from a volume the learner writes; "
        "'grpc': pull each version from the learner's grpo.v1.Weights server (no shared volume).",
    )
    address: str = Field(
        default="",
        description="grpc: gRPC target of the weight server (the learner, rank 0), e.g. "
        "'rl-grpo-pipeline-learner-0.rl-grpo-pipeline-learner.ml.svc:50051'.",
    )
    cache_dir: Path = Field(
        default=Path("/tmp/grpo-weights"),
        description="grpc: local folder for pulled versions (room for two copies of the model).",
    )
    chunk_bytes: int = Field(
        default=DEFAULT_CHUNK_BYTES,
        ge=4096,
        le=MAX_CHUNK_BYTES,
        description="grpc: bytes per streamed chunk.",
    )
    rpc_timeout_s: float = Field(
        default=30.0, gt=0, description="grpc: deadline of a GetManifest call (seconds)."
    )
    file_timeout_s: float = Field(
        default=3600.0,
        gt=0,
        description="grpc: deadline of one file's stream (seconds); a timed-out stream resumes.",
    )
    retries: int = Field(
        default=5, ge=0, description="grpc: retries of a broken stream or bad file per pull."
    )
    retry_backoff_s: float = Field(
        default=2.0, gt=0, description="grpc: pause between retries and after a failed pull (s)."
    )
    startup_wait_s: float = Field(
        default=1800.0,
        gt=0,
        description="grpc: how long a replica without a local model waits for the first "
        "published version at start (seconds).",
    )
    tls_ca_file: Path | None = Field(
        default=None, description="grpc: CA bundle to verify the server; None = plaintext."
    )
    tls_cert_file: Path | None = Field(
        default=None, description="grpc: client certificate for mutual TLS."
    )
    tls_key_file: Path | None = Field(default=None, description="grpc: key of tls_cert_file.")
    tls_server_name: str = Field(
        default="", description="grpc: TLS name to verify instead of the address' host."
    )

    @model_validator(mode="after")
    def _check(self) -> WeightTransferConfig:
        if self.mode == "grpc" and not self.address:
            raise ValueError("weights.mode 'grpc' needs weights.address (the weight server)")
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ValueError("weights.tls_cert_file and tls_key_file go together")
        return self


@dataclass(frozen=True)
class PulledWeights:
    """A verified local copy of one version: folder, bytes received, seconds taken."""

    policy_version: int
    path: Path
    bytes_received: int
    seconds: float


class _BadChunk(Exception):
    """A chunk whose offset or CRC-32 is wrong (retried from the bytes already written)."""


class WeightPuller:
    """Pulls versions from one weight server into ``config.cache_dir``; thread-safe per call.

    Raises (constructor):
        OSError: a TLS file cannot be read.
    """

    def __init__(self, config: WeightTransferConfig) -> None:
        if config.mode != "grpc":
            raise ValueError("WeightPuller needs weights.mode 'grpc'")
        self.config = config
        self.cache_dir = Path(config.cache_dir)
        limit = MAX_CHUNK_BYTES + (1 << 16)
        options: list[tuple[str, int | str]] = [("grpc.max_receive_message_length", limit)]
        if config.tls_server_name:
            options.append(("grpc.ssl_target_name_override", config.tls_server_name))
        self._channel = client_channel(
            config.address,
            ca_file=config.tls_ca_file,
            cert_file=config.tls_cert_file,
            key_file=config.tls_key_file,
            options=options,
        )
        self._stub = weights_pb2_grpc.WeightsStub(self._channel)
        self._sleep = time.sleep

    def close(self) -> None:
        """Close the channel."""
        self._channel.close()

    def manifest(self, version: int = -1) -> Manifest:
        """The server's manifest of ``version`` (-1 = its newest).

        Raises:
            NotFoundError: the server does not hold the version (or nothing yet).
            UnavailableError: the server cannot be reached within ``rpc_timeout_s``.
        """
        try:
            resp = self._stub.GetManifest(
                weights_pb2.GetManifestRequest(policy_version=version),
                timeout=self.config.rpc_timeout_s,
            )
        except grpc.RpcError as exc:
            raise _as_error(exc, f"GetManifest(v{version}) from {self.config.address}") from exc
        return Manifest(
            policy_version=int(resp.policy_version),
            files=tuple(ManifestFile(f.name, int(f.size_bytes), f.sha256) for f in resp.files),
        )

    def local_path(self, version: int) -> Path:
        """Where a verified copy of ``version`` lives: ``<cache_dir>/v<version>``."""
        return self.cache_dir / f"v{version}"

    def pull(self, version: int = -1) -> PulledWeights:
        """Fetch and verify ``version`` (-1 = the server's newest); see the module docstring.

        An already verified local copy is returned without a transfer.

        Raises:
            NotFoundError: the version is not (or no longer) on the server.
            UnavailableError: the server stayed unreachable through every retry.
            ContractError: a file kept failing its size or SHA-256 check.
        """
        start = time.perf_counter()
        manifest = self.manifest(version)
        version = manifest.policy_version
        final = self.local_path(version)
        if final.is_dir():
            return PulledWeights(version, final, 0, time.perf_counter() - start)
        partial = self.cache_dir / f".partial-v{version}"
        partial.mkdir(parents=True, exist_ok=True)
        received = 0
        for entry in manifest.files:
            received += self._pull_file(version, entry, partial / entry.name)
        if final.exists():  # another thread finished the same version first
            shutil.rmtree(partial, ignore_errors=True)
        else:
            partial.rename(final)
        seconds = time.perf_counter() - start
        PULL_SECONDS.observe(seconds)
        log.info(
            "policy weights pulled",
            extra={"policy_version": version, "bytes": received, "seconds": round(seconds, 3)},
        )
        return PulledWeights(version, final, received, seconds)

    def _pull_file(self, version: int, entry: ManifestFile, dest: Path) -> int:
        """Stream one file into ``dest`` (resuming), verify size and SHA-256; bytes received."""
        received = 0
        failures = 0
        while True:
            have = dest.stat().st_size if dest.exists() else 0
            if have > entry.size_bytes:
                dest.unlink()
                have = 0
            try:
                if have < entry.size_bytes or not dest.exists():
                    try:
                        self._stream(version, entry, dest, have)
                    finally:  # what reached the disk counts, even from a broken stream
                        received += (dest.stat().st_size if dest.exists() else 0) - have
                if dest.stat().st_size == entry.size_bytes and file_sha256(dest) == entry.sha256:
                    return received
                dest.unlink()  # complete but wrong: start the file over
                problem = f"{entry.name} of v{version} failed its SHA-256 check"
            except _BadChunk as exc:
                problem = str(exc)
            except grpc.RpcError as exc:
                if exc.code() not in _RETRYABLE:
                    raise _as_error(exc, f"ReadFile(v{version}, {entry.name})") from exc
                problem = f"stream of {entry.name} broke: {exc.code().name} {exc.details()}"
            failures += 1
            PULL_FAILURES.inc()
            if failures > self.config.retries:
                if "SHA-256" in problem:
                    raise ContractError(problem)
                raise UnavailableError(f"pulling v{version} from {self.config.address}: {problem}")
            log.warning("weights pull retry", extra={"problem": problem, "try": failures})
            self._sleep(self.config.retry_backoff_s)

    def _stream(self, version: int, entry: ManifestFile, dest: Path, offset: int) -> None:
        """Append ``entry``'s bytes from ``offset`` to ``dest``, checking each chunk's place
        and CRC-32 (``_BadChunk`` on a mismatch; the good prefix stays on disk)."""
        request = weights_pb2.ReadFileRequest(
            policy_version=version,
            name=entry.name,
            offset_bytes=offset,
            chunk_bytes=self.config.chunk_bytes,
        )
        with dest.open("ab") as fh:
            for chunk in self._stub.ReadFile(request, timeout=self.config.file_timeout_s):
                if chunk.offset_bytes != offset:
                    raise _BadChunk(
                        f"{entry.name}: chunk at offset {chunk.offset_bytes}, expected {offset}"
                    )
                if zlib.crc32(chunk.data) != chunk.crc32:
                    raise _BadChunk(f"{entry.name}: chunk at offset {offset} failed its CRC-32")
                fh.write(chunk.data)
                offset += len(chunk.data)
                PULLED_BYTES.inc(len(chunk.data))

    def pull_newest(self, wait_s: float, stop: threading.Event | None = None) -> PulledWeights:
        """Pull the server's newest version, waiting up to ``wait_s`` seconds for one to exist
        and for the server to answer (a starting learner publishes its initial policy first).

        Raises:
            UnavailableError: nothing could be pulled within ``wait_s`` (the last reason given).
        """
        deadline = time.monotonic() + wait_s
        while True:
            try:
                return self.pull(-1)
            except (NotFoundError, UnavailableError) as exc:
                if time.monotonic() >= deadline or (stop is not None and stop.is_set()):
                    raise UnavailableError(
                        f"no policy version could be pulled from {self.config.address} within "
                        f"{wait_s:.0f} s: {exc}"
                    ) from exc
                log.info("waiting for a published policy", extra={"reason": str(exc)})
                self._sleep(min(self.config.retry_backoff_s, max(deadline - time.monotonic(), 0)))

    def prune(self, keep_version: int) -> None:
        """Delete pulled version folders other than ``keep_version`` and partial pulls of older
        versions (a partial of a newer version may belong to a pull in flight)."""
        if not self.cache_dir.is_dir():
            return
        for p in self.cache_dir.iterdir():
            name = p.name.removeprefix(".partial-")
            if not p.is_dir() or not name.startswith("v") or not name[1:].isdigit():
                continue
            if int(name[1:]) < keep_version or (p.name == name and name != f"v{keep_version}"):
                shutil.rmtree(p, ignore_errors=True)


def _as_error(exc: grpc.RpcError, what: str) -> GrpoError:
    code = exc.code()
    if code == grpc.StatusCode.NOT_FOUND:
        return NotFoundError(f"{what}: {exc.details()}")
    if code in _RETRYABLE:
        return UnavailableError(f"{what}: {code.name} {exc.details()}")
    return GrpoError(f"{what}: {code.name} {exc.details()}")


class BackgroundPuller:
    """Runs ``WeightPuller.pull`` in a daemon thread so the caller never blocks on a transfer.

    ``poll(wanted)`` is called from the rollout worker's loop: it returns a finished pull
    (once, after deleting the older local copies), starts a pull of ``wanted`` when none is
    in flight and nothing as new was requested, and otherwise returns None at once. A failed
    pull is logged and retried on a later poll after ``retry_backoff_s``.
    """

    def __init__(self, puller: WeightPuller) -> None:
        self.puller = puller
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._ready: PulledWeights | None = None
        self._requested = -1
        self._retry_at = 0.0
        self.last_error: BaseException | None = None

    @property
    def in_flight(self) -> bool:
        """True while a pull runs."""
        with self._lock:
            return self._thread is not None and self._thread.is_alive()

    def poll(self, wanted: int) -> PulledWeights | None:
        """A finished, verified pull not yet returned, or None (starting a pull if needed).

        Args:
            wanted: the newest announced policy version.
        """
        with self._lock:
            if self._ready is not None:
                ready, self._ready = self._ready, None
                self.puller.prune(ready.policy_version)  # older copies are loaded or superseded
                return ready
            busy = self._thread is not None and self._thread.is_alive()
            if busy or wanted <= self._requested or time.monotonic() < self._retry_at:
                return None
            self._requested = wanted
            self._thread = threading.Thread(
                target=self._run, args=(wanted,), name=f"weights-pull-v{wanted}", daemon=True
            )
            self._thread.start()
            return None

    def _run(self, version: int) -> None:
        PULL_IN_FLIGHT.set(1)
        try:
            pulled = self.puller.pull(version)
        except Exception as exc:  # retried by a later poll; never kills generation
            log.warning("weights pull failed", extra={"policy_version": version, "error": str(exc)})
            with self._lock:
                self.last_error = exc
                self._requested = -1 if not isinstance(exc, NotFoundError) else version
                self._retry_at = time.monotonic() + self.puller.config.retry_backoff_s
            return
        finally:
            PULL_IN_FLIGHT.set(0)
        with self._lock:
            self._ready = pulled
            self.last_error = None

    def wait(self, timeout_s: float) -> bool:
        """Wait for the pull in flight (tests, shutdown); True if none is running afterwards."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout_s)
        return not self.in_flight
