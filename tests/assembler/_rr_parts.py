"""Processes of the round-robin test: a verifier bound to one loopback address, and a client.

``python _rr_parts.py server HOST PORT NAME``: a ``grpo.v1.Verifier`` (reward 1, verifier =
NAME) on HOST:PORT with health SERVING; runs until killed.
``python _rr_parts.py client TARGET N``: scores N single-item batches through
``VerifierClient`` with the route ``TARGET``, prints the JSON tally of answering verifiers,
waits for a line on stdin, scores N more and prints the second tally (failures counted as
``"failed"``).
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from collections import Counter
from typing import Any


def _server(host: str, port: int, name: str) -> None:
    from grpo.services.runtime.server import ServerSettings, ServiceBinding, create_server
    from grpo.v1 import common_pb2, verifier_pb2, verifier_pb2_grpc

    class Named(verifier_pb2_grpc.VerifierServicer):
        def ScoreBatch(self, request: Any, context: Any) -> verifier_pb2.ScoreBatchResponse:
            scores = [
                common_pb2.Score(status=common_pb2.SCORE_STATUS_OK, reward=1.0, verifier=name)
                for _ in request.items
            ]
            return verifier_pb2.ScoreBatchResponse(scores=scores)

    binding = ServiceBinding("grpo.v1.Verifier", verifier_pb2_grpc.add_VerifierServicer_to_server,
                             Named())  # fmt: skip
    server = create_server([binding], ServerSettings(host=host, port=port, metrics_port=-1))
    server.start()
    print("serving", flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    done.wait()
    server.stop(0.0)


def _client(target: str, n: int) -> None:
    from grpo.services.runtime.routing import RoutingTable
    from grpo.services.runtime.verifier_client import VerifierClient, VerifierClientConfig
    from grpo.v1 import common_pb2

    table = RoutingTable.from_config({"arith": [target]})
    cfg = VerifierClientConfig(timeout_s=5.0, max_attempts=4, backoff_initial_s=0.05,
                               backoff_max_s=0.2)  # fmt: skip
    client = VerifierClient(table, cfg)
    task = common_pb2.Task(id="p", type="arith", prompt="1+1=", gold_answer="2")
    rollout = common_pb2.Rollout(group_id="g", index=0, group_size=2, task=task)
    rollout.completion.text = "2"
    for phase in range(2):
        tally: Counter[str] = Counter()
        for _ in range(n):
            (result,) = client.score([rollout])
            tally[result.outcome.verifier if result.outcome is not None else "failed"] += 1
        print(json.dumps(dict(tally)), flush=True)
        if phase == 0:
            sys.stdin.readline()
    client.close()


if __name__ == "__main__":
    if sys.argv[1] == "server":
        _server(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        _client(sys.argv[2], int(sys.argv[3]))
