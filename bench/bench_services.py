"""Runtime benchmarks: stream produce modes and the cost of the server interceptor.

Prints, measured side by side in one run:
- stream produce throughput (Rollout of ~1 KB): plain XADD, idempotent produce (Lua dedup
  script), pipelined produce_many with dedup keys (batch 64), and consume+ack; ratios to plain.
- gRPC unary round trip on loopback through ``create_server`` (error/metrics/drain
  interceptor) versus a bare ``grpc.server`` with the same servicer; ratio.
"""

from __future__ import annotations

import importlib.util
import sys
import time
import uuid
from collections.abc import Callable
from concurrent import futures
from pathlib import Path

import grpc

from grpo.services.runtime.redis_server import EmbeddedRedis, connect, redis_url_from_env
from grpo.services.runtime.server import ServerSettings, create_server
from grpo.services.runtime.streams import Streams
from grpo.v1 import common_pb2, verifier_pb2, verifier_pb2_grpc


def _rate(n: int, fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return n / (time.perf_counter() - start)


def _bench_streams(url: str, n: int = 3000) -> None:
    s = Streams(connect(url))
    ns = f"bench:{uuid.uuid4().hex[:8]}"
    msg = common_pb2.Rollout(group_id="g" * 16, index=1, group_size=8)
    msg.completion.text = "x" * 900
    msg.completion.token_ids.extend(range(40))
    plain = _rate(n, lambda: [s.produce(f"{ns}:a", msg) for _ in range(n)])
    dedup = _rate(n, lambda: [s.produce(f"{ns}:b", msg, dedup_key=str(i)) for i in range(n)])

    def many() -> None:
        for start in range(0, n, 64):
            keys = [str(i) for i in range(start, min(n, start + 64))]
            s.produce_many(f"{ns}:c", [msg] * len(keys), dedup_keys=keys)

    batched = _rate(n, many)

    def drain() -> None:
        while entries := s.consume(f"{ns}:a", "g", "c", common_pb2.Rollout, 64, None):
            s.ack(f"{ns}:a", "g", [e.id for e in entries])

    consumed = _rate(n, drain)
    print(f"stream produce, {msg.ByteSize()} B Rollout, {n} msgs (msgs/s; ratio to plain XADD):")
    print(f"  plain XADD            {plain:9.0f}  1.00")
    print(f"  dedup (Lua)           {dedup:9.0f}  {dedup / plain:.2f}")
    print(f"  produce_many x64 dedup{batched:9.0f}  {batched / plain:.2f}")
    print(f"  consume+ack x64       {consumed:9.0f}  {consumed / plain:.2f}")
    keys = list(s.client.scan_iter(match=f"{ns}:*", count=1000))
    for i in range(0, len(keys), 1000):
        s.client.delete(*keys[i : i + 1000])


def _bench_grpc(n: int = 1500) -> None:
    spec = importlib.util.spec_from_file_location(
        "echo_service", Path(__file__).resolve().parents[1] / "tests/runtime/echo_service.py"
    )
    assert spec is not None and spec.loader is not None
    echo = importlib.util.module_from_spec(spec)
    sys.modules["echo_service"] = echo  # pydantic resolves the settings' annotations here
    spec.loader.exec_module(echo)
    request = verifier_pb2.ScoreRequest(task=common_pb2.Task(prompt="p"), response="42")

    def round_trips(address: str) -> float:
        with grpc.insecure_channel(address) as ch:
            stub = verifier_pb2_grpc.VerifierStub(ch)
            for _ in range(50):
                stub.Score(request)
            return _rate(n, lambda: [stub.Score(request) for _ in range(n)])

    bare = grpc.server(futures.ThreadPoolExecutor(8))
    verifier_pb2_grpc.add_VerifierServicer_to_server(echo.EchoServicer(), bare)
    bare_port = bare.add_insecure_port("127.0.0.1:0")
    bare.start()
    with create_server([echo.binding()], ServerSettings(port=0, metrics_port=-1)) as ours:
        ours_rate = round_trips(ours.address)
        bare_rate = round_trips(f"127.0.0.1:{bare_port}")
    bare.stop(0)
    print(f"gRPC unary Score round trip on loopback, {n} calls (calls/s):")
    print(f"  bare grpc.server      {bare_rate:9.0f}  1.00")
    print(f"  create_server         {ours_rate:9.0f}  {ours_rate / bare_rate:.2f}")


def main() -> None:
    url = redis_url_from_env()
    if url:
        _bench_streams(url)
    else:
        with EmbeddedRedis() as server:
            _bench_streams(server.url)
    _bench_grpc()


if __name__ == "__main__":
    main()
