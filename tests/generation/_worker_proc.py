"""A rollout worker process that SIGKILLs itself after writing k rollouts (fault injection).

Usage: python _worker_proc.py REDIS_URL NAMESPACE MODEL_DIR K [PROMPTS_PER_CALL]
"""

from __future__ import annotations

import os
import signal
import sys

import torch

from grpo.services.generation.backend import BackendConfig, SamplingConfig
from grpo.services.generation.transformers_backend import TransformersBackend
from grpo.services.generation.worker import RolloutWorker, RolloutWorkerConfig
from grpo.services.runtime.redis_server import connect


def main() -> None:
    url, namespace, model_dir, k = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    per_call = int(sys.argv[5]) if len(sys.argv) > 5 else 8
    torch.set_num_threads(1)
    written = 0

    def hook(_rollout: object) -> None:
        nonlocal written
        written += 1
        if written == k:
            os.kill(os.getpid(), signal.SIGKILL)

    config = RolloutWorkerConfig(
        namespace=namespace,
        consumer="doomed",
        sampling=SamplingConfig(max_new_tokens=8),
        prompts_per_call=per_call,
        fill_wait_ms=0,
    )
    worker = RolloutWorker(
        connect(url), TransformersBackend(BackendConfig(model_path=model_dir)), config,
        on_rollout_written=hook,
    )  # fmt: skip
    for _ in range(100):
        worker.run_once()
    sys.exit(3)  # never killed: the test fails on this exit code


if __name__ == "__main__":
    main()
