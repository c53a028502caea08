"""The GPU fast path: the learner broadcasts each new policy over NCCL straight into the vLLM
workers of generation replicas, with no file and no copy through host memory.

Written against vLLM's documented weight-update pattern for RLHF (its
``examples/offline_inference/rlhf.py`` and ``rlhf_utils.py``, used by OpenRLHF and TRL's vLLM
client): a separate NCCL group built from ``vllm.distributed.utils.StatelessProcessGroup`` and
``vllm.distributed.device_communicators.pynccl.PyNcclCommunicator``, so it never touches the
engine's own tensor-parallel group. The learner is rank 0; the W vLLM workers of a replica take
ranks ``rank_offset .. rank_offset + W - 1`` (``VllmBackend.join_weight_group``). A broadcast
sends every parameter of ``named_parameters()`` in order; the receivers allocate each tensor
from ``weight_specs`` (same order) and hand it to the model's own ``load_weights``, which maps
Hugging Face names onto vLLM's fused layouts (QKV, gate-up).

Needs CUDA, NCCL and vllm; one GPU per rank (NCCL refuses two ranks of a group on one device),
so its test (``tests/generation/test_vllm_backend.py``, marked ``vllm``/``gpu``) needs two GPUs.
Not exercised on the CPU machines this project is developed on. The gRPC path
(``grpo.services.runtime.weights.puller``) stays the portable default.
"""

from __future__ import annotations

from typing import Any

__all__ = ["NcclWeightSender", "weight_specs"]


def weight_specs(model: Any) -> list[tuple[str, str, tuple[int, ...]]]:
    """(name, torch dtype name, shape) of every parameter, in broadcast order.

    Tied parameters appear once (``named_parameters`` deduplicates them); vLLM's
    ``load_weights`` ties them again on its side.
    """
    return [
        (name, str(p.dtype).removeprefix("torch."), tuple(p.shape))
        for name, p in model.named_parameters()
    ]


class NcclWeightSender:
    """Rank 0 of a weight-update group: hosts the rendezvous and broadcasts parameters.

    Args:
        master_address: address the receivers reach this process at (host or IP).
        master_port: free TCP port for the group's rendezvous store.
        world_size: 1 + the number of vLLM workers that join.
        device: this process' CUDA device, e.g. ``torch.device("cuda:0")``.

    Raises:
        ImportError: vllm is not installed.
        RuntimeError: NCCL could not form the group (a receiver did not join).
    """

    def __init__(self, master_address: str, master_port: int, world_size: int, device: Any) -> None:
        from vllm.distributed.device_communicators.pynccl import PyNcclCommunicator
        from vllm.distributed.utils import StatelessProcessGroup

        if world_size < 2:
            raise ValueError(f"world_size must be >= 2 (learner + workers), got {world_size}")
        group = StatelessProcessGroup.create(
            host=master_address, port=master_port, rank=0, world_size=world_size
        )
        self._comm = PyNcclCommunicator(group, device=device)

    def send(self, model: Any) -> int:
        """Broadcast every parameter of ``model`` (on CUDA) in ``weight_specs`` order.

        Returns:
            Bytes sent per receiver.
        """
        import torch

        sent = 0
        stream = torch.cuda.current_stream()
        with torch.no_grad():
            for _name, param in model.named_parameters():
                tensor = param.data.contiguous()
                self._comm.broadcast(tensor, src=0, stream=stream)
                sent += tensor.numel() * tensor.element_size()
        torch.cuda.synchronize()
        return sent
