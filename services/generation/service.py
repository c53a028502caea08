"""The ``grpo.v1.Generation`` servicer and ``SERVICE`` for ``grpo serve generation``.

A thin adapter: proto -> ``SamplingConfig`` / plain arguments -> ``GenerationBackend`` -> proto.
Validation (n >= 1, non-empty prompts, prompt + max_new_tokens within the model context) is
done by the backend and raised as ``InvalidArgumentError`` (INVALID_ARGUMENT at the server
edge). The caller's deadline becomes the backend's abort deadline: generation stops between
tokens once it passes and the RPC ends with DEADLINE_EXCEEDED.
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from grpo.services.generation.backend import (
    BackendConfig,
    GenerationBackend,
    SamplingConfig,
    create_backend,
)
from grpo.services.runtime.registry import ServiceParts, ServiceSpec
from grpo.services.runtime.server import ServerSettings, ServiceBinding, remaining_s, require
from grpo.v1 import generation_pb2, generation_pb2_grpc

__all__ = ["SERVICE", "GenerationServicer", "GenerationSettings"]


class GenerationSettings(BaseModel):
    """Settings of ``grpo serve generation``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    server: ServerSettings = Field(
        default_factory=ServerSettings, description="gRPC server settings."
    )
    backend: BackendConfig = Field(..., description="Sampling engine and model to serve.")


class GenerationServicer(generation_pb2_grpc.GenerationServicer):
    """Serves one ``GenerationBackend`` (thread-safe; calls are serialised by the backend)."""

    def __init__(self, backend: GenerationBackend, model_path: str) -> None:
        self._backend = backend
        self._model_path = model_path

    def Describe(
        self, request: generation_pb2.GenerationDescribeRequest, context: Any
    ) -> generation_pb2.GenerationDescribeResponse:
        """Backend name, model path, policy version, context length and device."""
        return generation_pb2.GenerationDescribeResponse(
            backend=self._backend.name,
            model_path=self._model_path,
            policy_version=self._backend.policy_version,
            max_context_tokens=self._backend.max_context_tokens,
            device=self._backend.device,
        )

    def Generate(
        self, request: generation_pb2.GenerateRequest, context: Any
    ) -> generation_pb2.GenerateResponse:
        """Sample ``n`` completions per prompt; an unset ``sampling`` uses the defaults.

        Raises:
            InvalidArgumentError: bad n, prompts, sampling values or lengths.
            DeadlineExceededError: the caller's deadline passed during generation.
        """
        if request.HasField("sampling"):
            sampling = SamplingConfig.from_proto(request.sampling)
        else:
            sampling = SamplingConfig()
        left = remaining_s(context)
        deadline = None if left is None else time.monotonic() + left
        results = self._backend.generate(
            list(request.prompts), request.n, sampling, deadline=deadline
        )
        return generation_pb2.GenerateResponse(
            results=[
                generation_pb2.PromptCompletions(
                    prompt_token_ids=r.prompt_token_ids,
                    completions=[c.to_proto() for c in r.completions],
                )
                for r in results
            ]
        )

    def LoadWeights(
        self, request: generation_pb2.LoadWeightsRequest, context: Any
    ) -> generation_pb2.LoadWeightsResponse:
        """Swap in the weights of ``request.path`` as ``request.policy_version``.

        Raises:
            ContractError: ``path`` is empty. See ``GenerationBackend.load_weights``.
        """
        require(request, "path")
        load_s = self._backend.load_weights(request.policy_version, request.path)
        return generation_pb2.LoadWeightsResponse(
            policy_version=self._backend.policy_version, load_s=load_s
        )


def _build(settings: GenerationSettings) -> ServiceParts:
    backend = create_backend(settings.backend)
    servicer = GenerationServicer(backend, settings.backend.model_path)
    binding = ServiceBinding(
        name="grpo.v1.Generation",
        add_to_server=generation_pb2_grpc.add_GenerationServicer_to_server,
        servicer=servicer,
    )
    return ServiceParts(bindings=[binding], close=backend.close)


SERVICE = ServiceSpec(name="generation", settings_cls=GenerationSettings, build=_build)
