"""The vLLM backend (runs only where vllm and a CUDA GPU exist; skipped elsewhere)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from grpo.services.generation.backend import BackendConfig, SamplingConfig
from grpo.v1 import common_pb2

from .conftest import TUNED_COMPLETION, TUNED_PROMPT

pytestmark = [pytest.mark.vllm, pytest.mark.gpu]
vllm = pytest.importorskip("vllm")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)


@pytest.fixture(scope="module")
def vllm_backend(tiny_model_dir: Path):
    from grpo.services.generation.vllm_backend import VllmBackend

    return VllmBackend(
        BackendConfig(kind="vllm", model_path=str(tiny_model_dir), dtype="float32",
                      gpu_memory_utilization=0.2)
    )  # fmt: skip


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_vllm_logprobs_match_teacher_forcing(
    vllm_backend, tiny_model_dir: Path, temperature: float
) -> None:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir), dtype=torch.float32)
    sampling = SamplingConfig(temperature=temperature, max_new_tokens=16, seed=3)
    for res in vllm_backend.generate(["47+38=", "hello"], 4, sampling):
        assert len(res.completions) == 4
        for c in res.completions:
            ids = torch.tensor([res.prompt_token_ids + c.token_ids])
            with torch.no_grad():
                logits = model(ids).logits[0].float() / temperature
            p = len(res.prompt_token_ids)
            logp = torch.log_softmax(logits[p - 1 : p - 1 + len(c.token_ids)], dim=-1)
            expected = logp.gather(-1, torch.tensor(c.token_ids)[:, None]).squeeze(-1)
            assert torch.allclose(torch.tensor(c.behavior_logprobs), expected, atol=1e-3)


def test_vllm_load_weights_changes_outputs(vllm_backend, tuned_model_dir: Path) -> None:
    greedy = SamplingConfig(temperature=0, max_new_tokens=8)
    vllm_backend.load_weights(5, str(tuned_model_dir))
    c = vllm_backend.generate([TUNED_PROMPT], 1, greedy)[0].completions[0]
    assert (c.text, c.policy_version) == (TUNED_COMPLETION, 5)
    assert c.finish_reason == common_pb2.FINISH_REASON_STOP


def _send_weights(model_dir: str, port: int, ready) -> None:
    """The learner side of the NCCL path, in its own process on cuda:1."""
    from transformers import AutoModelForCausalLM

    from grpo.services.runtime.weights.nccl import NcclWeightSender

    torch.cuda.set_device(1)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).to("cuda:1")
    sender = NcclWeightSender("127.0.0.1", port, world_size=2, device=torch.device("cuda:1"))
    ready.wait(600)  # the receiver posted its receive call
    sender.send(model)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="NCCL needs one GPU per rank")
def test_vllm_receives_a_policy_over_nccl(vllm_backend, tuned_model_dir: Path) -> None:
    import multiprocessing as mp
    import socket
    import threading

    from transformers import AutoModelForCausalLM

    from grpo.services.runtime.weights.nccl import weight_specs

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    sender = ctx.Process(target=_send_weights, args=(str(tuned_model_dir), port, ready))
    sender.start()
    assert vllm_backend.join_weight_group("127.0.0.1", port, 1, 2) == [1]
    specs = weight_specs(AutoModelForCausalLM.from_pretrained(str(tuned_model_dir)))
    threading.Timer(1.0, ready.set).start()
    vllm_backend.receive_weights(7, specs)
    sender.join(120)
    assert sender.exitcode == 0
    greedy = SamplingConfig(temperature=0, max_new_tokens=8)
    c = vllm_backend.generate([TUNED_PROMPT], 1, greedy)[0].completions[0]
    assert (c.text, c.policy_version) == (TUNED_COMPLETION, 7)
