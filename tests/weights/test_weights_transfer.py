"""grpo.v1.Weights over real gRPC on loopback: manifests, chunked pulls verified by CRC-32 and
SHA-256, resumed streams, corrupted and pruned versions, and the background puller."""

from __future__ import annotations

import hashlib
import os
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from grpo.errors import ContractError, NotFoundError, UnavailableError
from grpo.services.runtime.server import ServerSettings, create_server
from grpo.services.runtime.weights.puller import (
    BackgroundPuller,
    WeightPuller,
    WeightTransferConfig,
)
from grpo.services.runtime.weights.servicer import weights_binding
from grpo.services.runtime.weights.store import Chunk, WeightStore
from grpo.v1 import weights_pb2, weights_pb2_grpc

CHUNK = 64 * 1024


def publish(run_dir: Path, version: int, size: int, seed: int = 0) -> dict[str, bytes]:
    """A version folder as the learner's publisher leaves it (renamed into place)."""
    files = {
        "model.safetensors": os.urandom(size) if seed == 0 else bytes([seed % 256]) * size,
        "config.json": b'{"model_type": "qwen2"}',
        "tokenizer.json": b"{}",
    }
    folder = run_dir / "weights" / f"v{version}"
    tmp = run_dir / "weights" / f".tmp-v{version}-1"
    tmp.mkdir(parents=True)
    for name, data in files.items():
        (tmp / name).write_bytes(data)
    tmp.rename(folder)
    return files


class FlakyStore(WeightStore):
    """Breaks the first ``breaks`` streams after ``after`` chunks; optionally corrupts data."""

    def __init__(self, run_dir: Path, *, breaks: int = 0, after: int = 2, mode: str = "") -> None:
        super().__init__(run_dir)
        self.breaks, self.after, self.mode = breaks, after, mode
        self.requests: list[tuple[str, int]] = []

    def read(self, version: int, name: str, offset_bytes: int = 0, chunk_bytes: int = 0):
        self.requests.append((name, offset_bytes))
        inner = super().read(version, name, offset_bytes, chunk_bytes)
        return self._wrap(inner, name)

    def _wrap(self, inner: Iterator[Chunk], name: str) -> Iterator[Chunk]:
        for i, chunk in enumerate(inner):
            if name == "model.safetensors" and self.breaks > 0 and i == self.after:
                self.breaks -= 1
                flipped = bytes([chunk.data[0] ^ 0xFF]) + chunk.data[1:]
                if self.mode == "crc":  # bytes damaged in flight: the CRC no longer matches
                    yield Chunk(chunk.offset_bytes, flipped, chunk.crc32)
                    return
                if self.mode == "consistent":  # damaged at the source: CRC fine, SHA wrong
                    yield Chunk(chunk.offset_bytes, flipped, zlib.crc32(flipped))
                    continue
                raise UnavailableError("stream cut")  # as when the server goes away
            yield chunk


@pytest.fixture
def serve(tmp_path: Path):
    servers = []

    def start(store: WeightStore) -> str:
        server = create_server([weights_binding(store)], ServerSettings(host="127.0.0.1", port=0))
        server.start()
        servers.append(server)
        return f"127.0.0.1:{server.port}"

    yield start
    for server in servers:
        server.stop(0)


def puller_for(address: str, cache: Path, **kw) -> WeightPuller:
    config = WeightTransferConfig(
        mode="grpc", address=address, cache_dir=cache, chunk_bytes=CHUNK, retry_backoff_s=0.01, **kw
    )
    return WeightPuller(config)


def test_pull_is_byte_identical_and_checksummed(tmp_path: Path, serve) -> None:
    run = tmp_path / "run"
    files = publish(run, 3, size=5 * CHUNK + 123)
    (run / "weights" / ".tmp-v4-9").mkdir()  # a publish in progress is not a version
    puller = puller_for(serve(WeightStore(run)), tmp_path / "cache")
    manifest = puller.manifest(-1)
    assert manifest.policy_version == 3
    assert {f.name: f.sha256 for f in manifest.files} == {
        n: hashlib.sha256(d).hexdigest() for n, d in files.items()
    }
    pulled = puller.pull(3)
    assert pulled.path == tmp_path / "cache" / "v3"
    assert pulled.bytes_received == sum(len(d) for d in files.values()) == manifest.total_bytes
    assert {p.name: p.read_bytes() for p in pulled.path.iterdir()} == files
    assert not list((tmp_path / "cache").glob(".partial-*"))
    assert puller.pull(3).bytes_received == 0  # a verified local copy is reused


def test_broken_streams_resume_from_the_bytes_already_written(tmp_path: Path, serve) -> None:
    run = tmp_path / "run"
    files = publish(run, 1, size=6 * CHUNK)
    store = FlakyStore(run, breaks=2, after=2)
    puller = puller_for(serve(store), tmp_path / "cache")
    pulled = puller.pull(1)
    assert (pulled.path / "model.safetensors").read_bytes() == files["model.safetensors"]
    offsets = [o for name, o in store.requests if name == "model.safetensors"]
    assert offsets == [0, 2 * CHUNK, 4 * CHUNK]  # each retry resumes, nothing is resent
    assert pulled.bytes_received == sum(len(d) for d in files.values())


def test_a_chunk_failing_its_crc_is_rejected_and_refetched(tmp_path: Path, serve) -> None:
    run = tmp_path / "run"
    files = publish(run, 1, size=4 * CHUNK)
    puller = puller_for(serve(FlakyStore(run, breaks=1, after=1, mode="crc")), tmp_path / "c")
    pulled = puller.pull(1)
    assert (pulled.path / "model.safetensors").read_bytes() == files["model.safetensors"]


def test_a_file_failing_its_sha256_is_never_loaded(tmp_path: Path, serve) -> None:
    run = tmp_path / "run"
    publish(run, 1, size=4 * CHUNK)
    store = FlakyStore(run, breaks=10, after=1, mode="consistent")
    puller = puller_for(serve(store), tmp_path / "cache", retries=2)
    with pytest.raises(ContractError, match="SHA-256"):
        puller.pull(1)
    assert not (tmp_path / "cache" / "v1").exists()  # no verified folder appears
    # Once the source is sound again, the pull succeeds (the bad file was discarded).
    store.breaks = 0
    assert puller.pull(1).path == tmp_path / "cache" / "v1"


def test_pruned_unknown_and_malformed_requests(tmp_path: Path, serve) -> None:
    run = tmp_path / "run"
    address = serve(WeightStore(run))
    puller = puller_for(address, tmp_path / "cache")
    with pytest.raises(NotFoundError, match="no policy version published"):
        puller.manifest(-1)
    publish(run, 2, size=10)
    with pytest.raises(NotFoundError, match="version 1 is not on the weight server"):
        puller.pull(1)
    stub = weights_pb2_grpc.WeightsStub(grpc.insecure_channel(address))
    for name, offset, chunk, needle in [
        ("../../etc/passwd", 0, 0, "plain name"),
        ("model.safetensors", 11, 0, "past the end"),
        ("model.safetensors", 0, 64 << 20, "chunk_bytes"),
        ("missing.bin", 0, 0, "no file"),
    ]:
        request = weights_pb2.ReadFileRequest(
            policy_version=2, name=name, offset_bytes=offset, chunk_bytes=chunk
        )
        with pytest.raises(grpc.RpcError) as excinfo:
            list(stub.ReadFile(request, timeout=5))
        assert needle in excinfo.value.details(), excinfo.value.details()


def test_unreachable_server_and_waiting_for_the_first_version(tmp_path: Path, serve) -> None:
    dead = puller_for("127.0.0.1:1", tmp_path / "cache", rpc_timeout_s=0.5)
    with pytest.raises(UnavailableError, match=r"127\.0\.0\.1:1"):
        dead.pull(-1)
    run = tmp_path / "run"
    puller = puller_for(serve(WeightStore(run)), tmp_path / "cache")
    timer = threading.Timer(0.3, publish, args=(run, 0, 100))
    timer.start()
    first = puller.pull_newest(wait_s=30)
    timer.join()
    assert first.policy_version == 0 and (first.path / "config.json").is_file()
    with pytest.raises(UnavailableError, match="within"):
        dead.pull_newest(wait_s=0.2)


def test_background_puller_returns_each_pull_once_and_prunes(tmp_path: Path, serve) -> None:
    run = tmp_path / "run"
    publish(run, 1, size=3 * CHUNK)
    bg = BackgroundPuller(puller_for(serve(WeightStore(run)), tmp_path / "cache"))
    assert bg.poll(1) is None  # starts the pull, returns at once
    assert bg.wait(30)
    ready = bg.poll(1)
    assert ready is not None and ready.policy_version == 1
    assert bg.poll(1) is None and not bg.in_flight  # delivered once, not pulled again
    publish(run, 2, size=3 * CHUNK, seed=7)
    assert bg.poll(2) is None and bg.wait(30)
    ready = bg.poll(2)
    assert ready is not None and ready.policy_version == 2
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["v2"]  # v1 pruned
    # A version pruned on the server fails once, then the next announced one is pulled.
    assert bg.poll(5) is None and bg.wait(30)
    assert isinstance(bg.last_error, NotFoundError) and bg.poll(5) is None
