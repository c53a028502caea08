"""Weight transfer benchmark: pulls over gRPC on loopback, and generation during a pull.

Measured side by side in this run:

- **pull time per MB**: ``WeightPuller.pull`` of a published version (one ``model.safetensors``
  of random bytes plus config/tokenizer files) from a ``grpo.v1.Weights`` server running in a
  separate process, for two sizes and three chunk sizes; a pull includes the CRC-32 of every
  chunk and the SHA-256 of every file. A plain local file copy of the same bytes is the
  baseline (the ratio pull / copy is the price of the transfer and its checks);
- **generation keeps serving while a pull is in flight**: tokens/s of the transformers backend
  on the tiny model with no pull, then while a ``BackgroundPuller`` pulls a large version in
  its thread; the number of generate calls finished during the pull and the ratio of the two
  rates are printed. Rates use wall time (the pull runs in another thread of this process and
  a server process), so on a shared machine they are noisy; the ratio is what to read.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

__all__ = ["main"]

MB = 1 << 20
SIZES_MB = (32, 128)
CHUNKS = (256 * 1024, 1 * MB, 4 * MB)
BACKGROUND_MB = 256


def _publish(run_dir: Path, version: int, size_mb: int) -> None:
    folder = run_dir / "weights" / f"v{version}"
    folder.mkdir(parents=True)
    with (folder / "model.safetensors").open("wb") as fh:
        for _ in range(size_mb):
            fh.write(os.urandom(MB))
    (folder / "config.json").write_text('{"model_type": "qwen2"}')
    (folder / "tokenizer.json").write_text("{}")


def _serve(run_dir: str, ports: mp.Queue, stop: mp.Event) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from grpo.services.runtime.server import ServerSettings, create_server
    from grpo.services.runtime.weights.servicer import weights_binding
    from grpo.services.runtime.weights.store import WeightStore

    server = create_server(
        [weights_binding(WeightStore(Path(run_dir)))],
        ServerSettings(host="127.0.0.1", port=0, metrics_port=0),
    )
    server.start()
    ports.put(server.port)
    stop.wait()
    server.stop(0)


def _puller(address: str, cache: Path, chunk: int):
    from grpo.services.runtime.weights.puller import WeightPuller, WeightTransferConfig

    return WeightPuller(
        WeightTransferConfig(mode="grpc", address=address, cache_dir=cache, chunk_bytes=chunk)
    )


def _pull_rates(address: str, run_dir: Path, tmp: Path) -> None:
    print("pull over loopback (server in its own process; CRC-32 per chunk, SHA-256 per file)")
    print(
        f"{'size MB':>8} {'chunk KiB':>10} {'s/MB':>9} {'MB/s':>8} "
        f"{'copy MB/s':>10} {'pull/copy':>10}"
    )
    for version, size in enumerate(SIZES_MB, start=1):
        src = run_dir / "weights" / f"v{version}" / "model.safetensors"
        t0 = time.perf_counter()
        shutil.copyfile(src, tmp / "copy.bin")
        copy_s = time.perf_counter() - t0
        (tmp / "copy.bin").unlink()
        for chunk in CHUNKS:
            cache = tmp / f"cache-{version}-{chunk}"
            puller = _puller(address, cache, chunk)
            puller.manifest(version)  # the server hashes a version once; not part of a pull
            t0 = time.perf_counter()
            pulled = puller.pull(version)
            pull_s = time.perf_counter() - t0
            puller.close()
            total_mb = pulled.bytes_received / MB
            print(
                f"{size:>8} {chunk // 1024:>10} {pull_s / total_mb:>9.4f} {total_mb / pull_s:>8.1f}"
                f" {size / copy_s:>10.1f} {pull_s / copy_s * size / total_mb:>10.2f}"
            )
            shutil.rmtree(cache)


def _generation_during_pull(address: str, tmp: Path) -> None:
    from transformers.utils import logging as hf_logging

    from grpo.model import init_tiny_model
    from grpo.services.generation.backend import BackendConfig, SamplingConfig
    from grpo.services.generation.transformers_backend import TransformersBackend
    from grpo.services.runtime.weights.puller import BackgroundPuller

    hf_logging.disable_progress_bar()
    model = init_tiny_model(tmp / "tiny", seed=0, hidden=64, layers=2)
    backend = TransformersBackend(BackendConfig(model_path=str(model), device="cpu"))
    sampling = SamplingConfig(max_new_tokens=32, seed=1)

    def rate(window_s: float, until: threading.Event | None = None) -> tuple[float, int]:
        tokens, calls, t0 = 0, 0, time.perf_counter()
        while time.perf_counter() - t0 < window_s and not (until is not None and until.is_set()):
            out = backend.generate(["12+34="], 8, sampling)
            tokens += sum(len(c.token_ids) for r in out for c in r.completions)
            calls += 1
        return tokens / (time.perf_counter() - t0), calls

    rate(1.0)  # warm-up
    idle, _ = rate(5.0)
    background = BackgroundPuller(_puller(address, tmp / "cache-bg", 1 * MB))
    done = threading.Event()
    t0 = time.perf_counter()
    assert background.poll(99) is None  # starts the pull of the 256 MB version
    watcher = threading.Thread(target=lambda: (background.wait(600), done.set()), daemon=True)
    watcher.start()
    during, calls = rate(600.0, until=done)
    pull_s = time.perf_counter() - t0
    pulled = background.poll(99)
    assert pulled is not None, background.last_error
    print(
        f"\ngeneration while a {BACKGROUND_MB} MB pull is in flight ({pull_s:.1f} s): "
        f"{calls} generate calls finished during the pull"
    )
    print(f"tokens/s idle {idle:.0f}, during the pull {during:.0f}, ratio {during / idle:.2f}")
    t0 = time.perf_counter()
    backend.load_weights(1, str(model))
    print(
        f"(a load of the tiny model's folder after a pull takes {time.perf_counter() - t0:.3f} s)"
    )


def main() -> None:
    """Run both measurements and print them."""
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        run_dir = tmp / "run"
        for version, size in enumerate(SIZES_MB, start=1):
            _publish(run_dir, version, size)
        _publish(run_dir, 99, BACKGROUND_MB)
        ports: mp.Queue = ctx.Queue()
        stop = ctx.Event()
        server = ctx.Process(target=_serve, args=(str(run_dir), ports, stop), daemon=True)
        server.start()
        try:
            address = f"127.0.0.1:{ports.get(timeout=120)}"
            _pull_rates(address, run_dir, tmp)
            _generation_during_pull(address, tmp)
        finally:
            stop.set()
            server.join(30)


if __name__ == "__main__":
    main()
