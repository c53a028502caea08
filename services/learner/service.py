"""``grpo serve learner``: the Learner gRPC service around the training loop.

``build(settings)`` loads the policy (and the reference model when the KL weight β > 0),
restores the newest checkpoint, and returns the ``grpo.v1.Learner`` binding (GetStatus,
SaveCheckpoint, SetPaused), the ``grpo.v1.Weights`` binding that serves every published version
to generation replicas (``grpo.services.runtime.weights``), and the ``LearnerLoop`` worker
(``grpo.services.learner.loop`` documents the consume/checkpoint/acknowledge protocol). With
``world_size`` W > 1, ``build`` first spawns ranks 1..W-1 (torch.multiprocessing "spawn",
before gRPC starts) running ``follower_main``; rank 0 (this process) reads groups and hands
each batch to them (``grpo.learner.distributed``).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import grpc
import torch

from grpo.learner.checkpoint import intact_checkpoint, load_checkpoint
from grpo.services.learner.loop import LearnerLoop
from grpo.services.learner.settings import LearnerServiceSettings
from grpo.services.runtime.registry import ServiceParts, ServiceSpec
from grpo.services.runtime.server import ServiceBinding, remaining_s
from grpo.services.runtime.weights.servicer import weights_binding
from grpo.services.runtime.weights.store import WeightStore
from grpo.v1 import learner_pb2, learner_pb2_grpc

__all__ = ["SERVICE", "LearnerServicer", "build", "build_trainer", "follower_main"]

log = logging.getLogger(__name__)


class LearnerServicer(learner_pb2_grpc.LearnerServicer):
    """Thin adapter: ``grpo.v1.Learner`` RPCs -> ``LearnerLoop``."""

    def __init__(self, loop: LearnerLoop) -> None:
        self.loop = loop

    def GetStatus(
        self, request: learner_pb2.GetStatusRequest, context: grpc.ServicerContext
    ) -> learner_pb2.GetStatusResponse:
        st = self.loop.status()
        return learner_pb2.GetStatusResponse(
            step=st.step,
            policy_version=st.policy_version,
            consumed_groups=st.consumed_groups,
            last_metrics=st.last_metrics,
            last_checkpoint=st.last_checkpoint,
            paused=st.paused,
        )

    def SaveCheckpoint(
        self, request: learner_pb2.SaveCheckpointRequest, context: grpc.ServicerContext
    ) -> learner_pb2.SaveCheckpointResponse:
        path, step = self.loop.request_checkpoint(remaining_s(context))
        return learner_pb2.SaveCheckpointResponse(path=path, step=step)

    def SetPaused(
        self, request: learner_pb2.SetPausedRequest, context: grpc.ServicerContext
    ) -> learner_pb2.SetPausedResponse:
        step, version = self.loop.set_paused(request.paused, remaining_s(context))
        return learner_pb2.SetPausedResponse(step=step, policy_version=version)


def build_trainer(settings: LearnerServiceSettings, parallel: Any | None = None) -> tuple:
    """``grpo.learner.loading.build_trainer`` with this service's settings; returns
    ``(trainer, tokenizer)``.

    Raises:
        NotFoundError: a ``model_path`` folder without tokenizer.json.
        OSError: the model cannot be read.
    """
    from grpo.learner.loading import build_trainer as build

    return build(
        settings.model_path,
        settings.algo,
        settings.trainer,
        dtype=settings.dtype,
        torch_threads=settings.torch_threads,
        parallel=parallel,
        lora=settings.lora,
    )


def _dist_init(settings: LearnerServiceSettings) -> str:
    if settings.dist_init:
        return settings.dist_init
    path = Path(settings.run_dir).resolve() / f".dist-{os.getpid()}"
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.unlink()
    return f"file://{path}"


def follower_main(rank: int, world_size: int, settings_json: str, init_method: str) -> None:
    """Rank r > 0: join the world, restore rank 0's checkpoint, train each broadcast batch.

    Runs until rank 0 broadcasts the stop signal (``LearnerLoop`` does so when it stops).
    """
    from grpo.learner.distributed import init_data_parallel
    from grpo.services.learner.pod_ranks import follow

    settings = LearnerServiceSettings.model_validate_json(settings_json)
    parallel = init_data_parallel(
        rank, world_size, init_method, fsdp=settings.fsdp, timeout_s=settings.dist_timeout_s
    )
    trainer, _ = build_trainer(settings, parallel)
    payload: list[Any] = [None]
    torch.distributed.broadcast_object_list(payload, src=0)
    if payload[0]:
        state = load_checkpoint(
            payload[0],
            model=trainer.model,
            optimizer=trainer.optimizer,
            scheduler=trainer.scheduler,
            critic=trainer.critic,
        )
        trainer.step_count = state.step
    follow(parallel, trainer)
    torch.distributed.destroy_process_group()


def build(settings: LearnerServiceSettings) -> ServiceParts:
    """Load models, restore the checkpoint, spawn followers; return binding and worker.

    Raises:
        FailedPreconditionError: no Redis URL (settings.redis_url or $REDIS_URL).
    """
    from grpo.services.learner import pod_ranks
    from grpo.services.runtime.redis_server import connect, resolve_redis_url

    rank = pod_ranks.env_rank(settings)  # None = ranks 1..W-1 (if any) are spawned here
    if rank is not None and rank > 0:
        return pod_ranks.build_follower(settings, rank)
    url = str(resolve_redis_url(settings.redis_url, required_by="learner"))
    parallel = None
    procs = None
    if settings.world_size > 1:
        import torch.multiprocessing as mp

        from grpo.learner.distributed import init_data_parallel

        init = _dist_init(settings)
        os.environ.setdefault("OMP_NUM_THREADS", str(settings.torch_threads))
        if rank is None:
            procs = mp.start_processes(
                _follower_entry,
                args=(settings.world_size, settings.model_dump_json(), init),
                nprocs=settings.world_size - 1,
                join=False,
                start_method="spawn",
            )
        parallel = init_data_parallel(
            0, settings.world_size, init, fsdp=settings.fsdp, timeout_s=settings.dist_timeout_s
        )
        if rank is not None:  # ranks in other pods: they get the model folder from here
            pod_ranks.share_model(parallel, settings)
    trainer, tokenizer = build_trainer(settings, parallel)
    if parallel is not None and rank is not None:
        pod_ranks.share_checkpoint(parallel, settings)
    elif parallel is not None:
        ckpt, _ = intact_checkpoint(Path(settings.run_dir) / "checkpoints")  # damaged: aside
        torch.distributed.broadcast_object_list([str(ckpt) if ckpt else None], src=0)
    loop = LearnerLoop(
        settings,
        client=connect(url, read_timeout_s=settings.server.redis_reply_timeout_s),
        trainer=trainer,
        tokenizer=tokenizer,
        parallel=parallel,
    )
    binding = ServiceBinding(
        name="grpo.v1.Learner",
        add_to_server=learner_pb2_grpc.add_LearnerServicer_to_server,
        servicer=LearnerServicer(loop),
    )

    def close() -> None:
        # Leave the world first: ranks still waiting on a failed rank 0 then fail at once.
        if parallel is not None and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
        if procs is not None:
            procs.join(timeout=30)

    # Every published version, pulled by generation replicas without a shared volume.
    weights = weights_binding(WeightStore(Path(settings.run_dir)))
    return ServiceParts(bindings=[binding, weights], workers=[loop], close=close)


def _follower_entry(index: int, world_size: int, settings_json: str, init_method: str) -> None:
    follower_main(index + 1, world_size, settings_json, init_method)


SERVICE = ServiceSpec(name="learner", settings_cls=LearnerServiceSettings, build=build)
