"""The Generation service over a real gRPC server on a loopback port."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import grpc
import pytest

from grpo.errors import DeadlineExceededError
from grpo.services.generation.backend import PromptResult, SamplingConfig
from grpo.services.generation.service import GenerationServicer
from grpo.services.generation.transformers_backend import TransformersBackend
from grpo.services.runtime.server import ServerSettings, ServiceBinding, create_server
from grpo.v1 import common_pb2, generation_pb2, generation_pb2_grpc

from .conftest import TUNED_COMPLETION, TUNED_PROMPT


class SpyBackend(TransformersBackend):
    """Records what ``generate`` raised, to see the server abort rather than the client."""

    raised: list[BaseException]

    def generate(
        self,
        prompts: Sequence[str],
        n: int,
        sampling: SamplingConfig,
        *,
        deadline: float | None = None,
    ) -> list[PromptResult]:
        try:
            return super().generate(prompts, n, sampling, deadline=deadline)
        except BaseException as exc:
            self.raised.append(exc)
            raise


@pytest.fixture
def stub_and_backend(
    tiny_model_dir: Path,
) -> Iterator[tuple[generation_pb2_grpc.GenerationStub, SpyBackend]]:
    from grpo.services.generation.backend import BackendConfig

    backend = SpyBackend(BackendConfig(model_path=str(tiny_model_dir)))
    backend.raised = []
    binding = ServiceBinding(
        "grpo.v1.Generation",
        generation_pb2_grpc.add_GenerationServicer_to_server,
        GenerationServicer(backend, str(tiny_model_dir)),
    )
    server = create_server([binding], ServerSettings(port=0, metrics_port=-1, grace_s=0))
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    yield generation_pb2_grpc.GenerationStub(channel), backend
    channel.close()
    server.stop(0)


def test_generate_describe_and_load_weights(stub_and_backend, tuned_model_dir: Path) -> None:
    stub, _ = stub_and_backend
    info = stub.Describe(generation_pb2.GenerationDescribeRequest(), timeout=10)
    assert (info.backend, info.policy_version, info.device) == ("transformers", 0, "cpu")
    assert info.max_context_tokens == 512
    greedy = common_pb2.SamplingParams(temperature=0, max_new_tokens=6)
    reply = stub.Generate(
        generation_pb2.GenerateRequest(prompts=[TUNED_PROMPT, "x"], n=3, sampling=greedy),
        timeout=30,
    )
    assert [len(r.completions) for r in reply.results] == [3, 3]
    c = reply.results[0].completions[0]
    assert len(c.token_ids) == len(c.behavior_logprobs) == len(c.token_char_offsets) == 6
    assert c.finish_reason == common_pb2.FINISH_REASON_LENGTH and c.sampling.max_new_tokens == 6
    loaded = stub.LoadWeights(
        generation_pb2.LoadWeightsRequest(policy_version=7, path=str(tuned_model_dir)), timeout=30
    )
    assert loaded.policy_version == 7
    reply = stub.Generate(
        generation_pb2.GenerateRequest(prompts=[TUNED_PROMPT], n=1, sampling=greedy), timeout=30
    )
    c = reply.results[0].completions[0]
    assert (c.text, c.policy_version, c.finish_reason) == (
        TUNED_COMPLETION,
        7,
        common_pb2.FINISH_REASON_STOP,
    )


@pytest.mark.parametrize(
    ("request_", "detail"),
    [
        (generation_pb2.GenerateRequest(prompts=["a"], n=0), "n must be"),
        (generation_pb2.GenerateRequest(prompts=[], n=1), "prompts must not be empty"),
        (generation_pb2.GenerateRequest(prompts=["a", ""], n=1), r"prompts\[1\] is empty"),
        (
            generation_pb2.GenerateRequest(
                prompts=["abc"], n=1, sampling=common_pb2.SamplingParams(max_new_tokens=510)
            ),
            "exceeds the model context of 512",
        ),
        (
            generation_pb2.GenerateRequest(
                prompts=["a"], n=1, sampling=common_pb2.SamplingParams(temperature=-1)
            ),
            "temperature",
        ),
    ],
)
def test_invalid_argument(stub_and_backend, request_, detail: str) -> None:
    stub, _ = stub_and_backend
    with pytest.raises(grpc.RpcError) as err:
        stub.Generate(request_, timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert re.search(detail, err.value.details())


def test_deadline_aborts_generation_on_the_server(stub_and_backend) -> None:
    stub, backend = stub_and_backend
    long = common_pb2.SamplingParams(temperature=1.0, max_new_tokens=500, seed=1)
    with pytest.raises(grpc.RpcError) as err:
        stub.Generate(
            generation_pb2.GenerateRequest(prompts=["a"] * 8, n=8, sampling=long), timeout=0.3
        )
    assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    # The handler stopped sampling (it raised) instead of running all 500 tokens to the end.
    # A second Generate waits for the backend lock, i.e. for the first handler to return.
    stub.Generate(generation_pb2.GenerateRequest(prompts=["a"], n=1), timeout=60)
    assert any(isinstance(e, DeadlineExceededError) for e in backend.raised)
    with pytest.raises(grpc.RpcError) as err:
        stub.LoadWeights(generation_pb2.LoadWeightsRequest(policy_version=1), timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_registry_builds_both_generation_services(tiny_model_dir: Path, redis_url: str) -> None:
    from grpo.services.generation.worker import RolloutWorker
    from grpo.services.runtime.config import load_settings
    from grpo.services.runtime.registry import load_spec

    model = {"backend.model_path": str(tiny_model_dir)}
    gen = load_spec("generation")
    parts = gen.build(load_settings(gen.settings_cls, None, model))
    assert [b.name for b in parts.bindings] == ["grpo.v1.Generation"] and not parts.workers
    worker = load_spec("rollout-worker")
    settings = load_settings(worker.settings_cls, None, {**model, "redis_url": redis_url})
    parts = worker.build(settings)
    assert [b.name for b in parts.bindings] == ["grpo.v1.Generation"]
    assert isinstance(parts.workers[0], RolloutWorker)
