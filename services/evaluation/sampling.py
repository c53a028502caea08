"""Where ``grpo eval`` gets its samples: a generation backend in this process, or a running
``grpo.v1.Generation`` service (``grpo serve generation``).

Both return, per prompt, the ``common_pb2.Completion`` messages the backend made (text, token
ids, behavior log-probs, finish reason, policy version, sampling parameters), so the eval loop
does not care which one it talks to. :meth:`Sampler.identity` says which policy samples, for
the run record (``provenance``): a hash of the model folder, or the generation service's
``Describe`` (model path, backend, policy version).
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any

from grpo.errors import DeadlineExceededError, InvalidArgumentError, UnavailableError
from grpo.v1 import common_pb2

__all__ = ["BackendSampler", "Sampler", "ServiceSampler", "describe_generation"]


class Sampler(abc.ABC):
    """Samples ``n`` completions per prompt.

    Attributes:
        where: what samples (for messages and the summary): the model path or the address.
    """

    where: str = ""

    @abc.abstractmethod
    def generate(
        self, prompts: Sequence[str], n: int, sampling: Any
    ) -> list[list[common_pb2.Completion]]:
        """``n`` completions of each prompt, in prompt order.

        Args:
            prompts: P non-empty prompt texts.
            n: completions per prompt (>= 1).
            sampling: a ``grpo.services.generation.backend.SamplingConfig``.

        Returns:
            P lists of n completions.

        Raises:
            InvalidArgumentError: a prompt the model cannot take (empty, too long).
            UnavailableError: the generation service cannot be reached.
        """

    @abc.abstractmethod
    def identity(self) -> dict[str, Any]:
        """Which policy samples, as JSON values compared by ``--resume``.

        Raises:
            OSError: a model file cannot be read. UnavailableError: the service is away.
        """

    def context_tokens(self) -> int | None:
        """Most prompt + generated tokens the policy takes; None when unknown."""
        return None

    def prompt_tokens(self, prompts: Sequence[str]) -> list[int] | None:
        """Tokens of each prompt as the policy reads it; None when this sampler cannot tell
        (a generation service: the tokenizer is on its side)."""
        return None

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the model or the channel."""

    def __enter__(self) -> Sampler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class BackendSampler(Sampler):
    """A ``GenerationBackend`` in this process (transformers on CPU/GPU, or vLLM).

    Args:
        backend: a backend, or a model folder to load with ``BackendConfig(model_path=...)``
            (one torch thread, device ``auto``).
    """

    def __init__(self, backend: Any) -> None:
        from grpo.services.generation.backend import (
            BackendConfig,
            GenerationBackend,
            create_backend,
        )

        if isinstance(backend, GenerationBackend):
            self._backend, self._own = backend, False
            self.where = "in-process backend"
            self._path: str | None = None
        else:
            self._backend = create_backend(BackendConfig(model_path=str(backend)))
            self._own = True
            self.where = self._path = str(backend)

    def identity(self) -> dict[str, Any]:
        """``model_sha256`` (``provenance.folder_sha256`` of a model folder), ``model`` (a
        hub id, not a folder), or a given backend's name and policy version."""
        from pathlib import Path

        from grpo.services.evaluation.provenance import folder_sha256

        if self._path is None:
            return {"backend": self._backend.name, "policy_version": self._backend.policy_version}
        if Path(self._path).is_dir():
            return {"model_sha256": folder_sha256(Path(self._path))}
        return {"model": self._path}

    def context_tokens(self) -> int | None:
        """The backend's ``max_context_tokens``."""
        return int(self._backend.max_context_tokens)

    def prompt_tokens(self, prompts: Sequence[str]) -> list[int] | None:
        """The backend's ``prompt_lengths``."""
        return list(self._backend.prompt_lengths(prompts))

    def generate(
        self, prompts: Sequence[str], n: int, sampling: Any
    ) -> list[list[common_pb2.Completion]]:
        """See :meth:`Sampler.generate` (``GenerationBackend.generate``)."""
        results = self._backend.generate(list(prompts), n, sampling)
        return [[c.to_proto() for c in r.completions] for r in results]

    def close(self) -> None:
        """Close the backend when this sampler loaded it."""
        if self._own:
            self._backend.close()


def describe_generation(address: str, *, timeout_s: float | None = None) -> Any:
    """The check of a ``grpo.v1.Generation`` address before any work: one ``Describe``,
    bounded (``grpo.services.runtime.channels.describe_endpoint``, the check of every address a
    command is given).

    Args:
        address: ``host:port`` of the service; timeout_s: the bound (None = the checks'
            ``CHECK_TIMEOUT_S``).

    Returns:
        Its ``GenerationDescribeResponse``.

    Raises:
        InvalidArgumentError: a malformed address.
        EndpointCheckError: no answer, or an error status; one line naming the address.
    """
    import grpc

    from grpo.services.runtime.channels import CHECK_TIMEOUT_S, describe_endpoint
    from grpo.services.runtime.routing import validate_address
    from grpo.v1 import generation_pb2, generation_pb2_grpc

    validate_address(address)
    channel = grpc.insecure_channel(address)
    try:
        stub = generation_pb2_grpc.GenerationStub(channel)
        return describe_endpoint(
            "generation service",
            address,
            lambda t: stub.Describe(generation_pb2.GenerationDescribeRequest(), timeout=t),
            timeout_s=CHECK_TIMEOUT_S if timeout_s is None else timeout_s,
            service="grpo.v1.Generation",
        )
    finally:
        channel.close()


class ServiceSampler(Sampler):
    """A ``grpo.v1.Generation`` service over gRPC (plaintext).

    Args:
        address: ``host:port`` of the service.
        timeout_s: deadline of one Generate call (seconds).
    """

    def __init__(self, address: str, *, timeout_s: float = 600.0) -> None:
        import grpc

        from grpo.services.runtime.routing import validate_address
        from grpo.v1 import generation_pb2_grpc

        self.where = validate_address(address)
        self._timeout_s = timeout_s
        self._channel = grpc.insecure_channel(address)
        self._stub = generation_pb2_grpc.GenerationStub(self._channel)

    def generate(
        self, prompts: Sequence[str], n: int, sampling: Any
    ) -> list[list[common_pb2.Completion]]:
        """See :meth:`Sampler.generate` (the ``Generate`` RPC)."""
        import grpc

        from grpo.v1 import generation_pb2

        request = generation_pb2.GenerateRequest(
            prompts=list(prompts), n=n, sampling=sampling.to_proto()
        )
        try:
            reply = self._stub.Generate(request, timeout=self._timeout_s)
        except grpc.RpcError as exc:
            code = exc.code() if isinstance(exc, grpc.Call) else grpc.StatusCode.UNKNOWN
            text = exc.details() if isinstance(exc, grpc.Call) else str(exc)
            if code == grpc.StatusCode.INVALID_ARGUMENT:
                raise InvalidArgumentError(text) from None
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise DeadlineExceededError(
                    f"generation at {self.where} took more than {self._timeout_s:g} s"
                ) from None
            raise UnavailableError(f"generation at {self.where}: {code.name}: {text}") from None
        return [list(r.completions) for r in reply.results]

    def identity(self) -> dict[str, Any]:
        """The service's ``Describe``: ``backend``, ``model_path``, ``policy_version``.

        Raises:
            UnavailableError: the service cannot be reached.
        """
        import grpc

        from grpo.v1 import generation_pb2

        try:
            info = self._stub.Describe(
                generation_pb2.GenerationDescribeRequest(), timeout=self._timeout_s
            )
        except grpc.RpcError as exc:
            text = exc.details() if isinstance(exc, grpc.Call) else str(exc)
            raise UnavailableError(f"generation at {self.where}: Describe failed: {text}") from None
        return {
            "backend": info.backend,
            "model_path": info.model_path,
            "policy_version": info.policy_version,
        }

    def close(self) -> None:
        """Close the channel."""
        self._channel.close()
