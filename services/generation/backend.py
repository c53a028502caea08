"""The generation backend interface: what every sampling engine returns, and its configuration.

A backend samples completions for a batch of requests (``SampleRequest``: one prompt, its ``n``
and its own ``SamplingConfig``, so several prompts' groups share one engine call,
``generate_many``) and returns, per completion (DESIGN.md, "The four policies"):

- ``token_ids`` and the decoded ``text`` (special tokens such as EOS are kept in ``token_ids``
  but not in ``text``);
- ``behavior_logprobs`` μ: the natural log-probability of each sampled token under the
  distribution it was *actually* drawn from: the model's logits divided by the temperature,
  restricted by top-k and then top-p and renormalised over the kept tokens. With top-k/top-p
  active μ is therefore the log-prob of the truncated distribution (>= the tempered full-softmax
  log-prob), which is the right behavior density for importance weights; it is not
  π_old at temperature 1. At temperature 0 (greedy) the sampling distribution is a point mass;
  μ then records the log-prob of the chosen token under the untempered softmax (temperature 1),
  which is the useful number for diagnostics. The sampling parameters are recorded on every
  completion (``sampling``) so the learner can tell these cases apart;
- ``token_char_offsets``: start offset (code points) of each token in ``text``; special tokens
  are zero-width; ``text[off[i]:off[i+1]]`` is token i's text;
- ``finish_reason``: ``FINISH_REASON_STOP`` (EOS or a stop string), ``FINISH_REASON_LENGTH``
  (max_new_tokens or the model's context was reached);
- ``policy_version``: the version of the weights that sampled it (see ``load_weights``; a call
  never mixes versions).

Every request is sampled under its own parameters and its own random stream (seeded by its
``sampling.seed``), so a request's completions do not depend on which other requests share
the call (up to floating-point rounding of the batched forward).
"""

from __future__ import annotations

import abc
import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from grpo.errors import DeadlineExceededError, InvalidArgumentError
from grpo.v1 import common_pb2

__all__ = [
    "BackendConfig",
    "CompletionResult",
    "GenerationBackend",
    "PromptResult",
    "SampleRequest",
    "SamplingConfig",
    "check_deadline",
    "create_backend",
    "derived_seed",
    "prefix_char_offsets",
]


class SamplingConfig(BaseModel):
    """Sampling parameters of one generate call (mirrors ``common_pb2.SamplingParams``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    temperature: float = Field(default=1.0, ge=0.0, description="Softmax temperature; 0 = greedy.")
    top_p: float = Field(
        default=1.0, gt=0.0, le=1.0, description="Nucleus mass in (0, 1]; 1 = off."
    )
    top_k: int = Field(default=0, ge=0, description="Keep the k most likely tokens; 0 = off.")
    max_new_tokens: int = Field(
        default=64, ge=1, description="Maximum generated tokens per completion."
    )
    stop: tuple[str, ...] = Field(default=(), description="Stop after any of these strings (kept).")
    seed: int = Field(default=0, ge=0, description="Random seed; 0 = unseeded (nondeterministic).")

    @model_validator(mode="after")
    def _check_stop(self) -> SamplingConfig:
        if any(s == "" for s in self.stop):
            raise ValueError("stop strings must be non-empty; drop the empty entry")
        return self

    @classmethod
    def from_proto(cls, msg: common_pb2.SamplingParams) -> SamplingConfig:
        """Build from the proto; an all-default proto (max_new_tokens 0) keeps the defaults.

        Proto3 cannot tell an unset ``top_p`` from 0, so ``top_p`` 0 means 1 (off).

        Raises:
            InvalidArgumentError: a value is out of range (names the field).
        """
        try:
            return cls(
                temperature=msg.temperature,
                top_p=msg.top_p if msg.top_p > 0 else 1.0,
                top_k=msg.top_k,
                max_new_tokens=msg.max_new_tokens or cls.model_fields["max_new_tokens"].default,
                stop=tuple(msg.stop),
                seed=msg.seed,
            )
        except ValueError as exc:
            raise InvalidArgumentError(f"invalid sampling params: {exc}") from exc

    def to_proto(self) -> common_pb2.SamplingParams:
        """The proto recorded on every completion."""
        return common_pb2.SamplingParams(
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            max_new_tokens=self.max_new_tokens,
            stop=list(self.stop),
            seed=self.seed,
        )


def derived_seed(seed: int, key: str) -> int:
    """A seed for one request derived from a base ``seed`` and a ``key`` naming the request.

    Args:
        seed: base seed, >= 1 (0 means unseeded and is returned unchanged).
        key: what tells this request apart (e.g. a group id and which rollouts it samples).

    Returns:
        0 when ``seed`` is 0; else the first 7 bytes of sha256(``"<seed>:<key>"``) as an
        integer (>= 1), so different keys draw independent streams.
    """
    if not seed:
        return 0
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:7], "big") or 1


@dataclass(frozen=True)
class SampleRequest:
    """One prompt of a batched call: ``n`` completions under ``sampling`` (its own seed)."""

    prompt: str
    n: int
    sampling: SamplingConfig


@dataclass
class CompletionResult:
    """One sampled completion; lists have one entry per generated token (length L)."""

    text: str
    token_ids: list[int]
    behavior_logprobs: list[float]
    token_char_offsets: list[int]
    finish_reason: common_pb2.FinishReason
    policy_version: int
    sampling: SamplingConfig

    def to_proto(self) -> common_pb2.Completion:
        """The ``common_pb2.Completion`` message."""
        return common_pb2.Completion(
            text=self.text,
            token_ids=self.token_ids,
            behavior_logprobs=self.behavior_logprobs,
            token_char_offsets=self.token_char_offsets,
            finish_reason=self.finish_reason,
            policy_version=self.policy_version,
            sampling=self.sampling.to_proto(),
        )


@dataclass
class PromptResult:
    """The ``n`` completions of one prompt and the prompt's token ids."""

    prompt_token_ids: list[int]
    completions: list[CompletionResult] = field(default_factory=list)


class BackendConfig(BaseModel):
    """Configuration of a generation backend (both kinds; vLLM-only fields say so)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["transformers", "vllm"] = Field(
        default="transformers",
        description="Engine: 'transformers' (CPU/CUDA) or 'vllm' (GPU only).",
    )
    model_path: str = Field(..., description="save_pretrained folder of the policy and tokenizer.")
    device: str = Field(
        default="auto", description="'auto' (cuda if present, else cpu), 'cpu', 'cuda:0'."
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        default="auto", description="Weights dtype; 'auto' = float32 on CPU, bfloat16 on CUDA."
    )
    torch_threads: int = Field(
        default=1,
        ge=1,
        description="torch intra-op threads of this process (1: two processes with 2 threads "
        "each on 2 cores run 4-8x slower).",
    )
    max_batch_rows: int = Field(
        default=64,
        ge=1,
        description="transformers: most sequences (sum of n over the prompts) in one padded "
        "batch; a call with more rows runs in several batches (a prompt is never split).",
    )
    policy_version: int = Field(
        default=0, ge=0, description="Version reported for the initial weights."
    )
    gpu_memory_utilization: float = Field(
        default=0.5, gt=0.0, le=1.0, description="vllm: share of GPU memory the engine may take."
    )
    max_model_len: int = Field(
        default=0, ge=0, description="vllm: context length override; 0 = the model config's."
    )


def check_deadline(deadline: float | None) -> None:
    """Raise if the ``time.monotonic()`` deadline (seconds) has passed.

    Raises:
        DeadlineExceededError: ``deadline`` is set and in the past.
    """
    if deadline is not None and time.monotonic() >= deadline:
        raise DeadlineExceededError("generation aborted: the request deadline passed")


def prefix_char_offsets(prefix_texts: Sequence[str], text: str) -> list[int]:
    """Token start offsets from the decoded texts of each token prefix.

    Args:
        prefix_texts: ``prefix_texts[i]`` = decode(token_ids[:i]) for i in 0..L-1 (length L).
        text: decode(token_ids) (the full completion text).

    Returns:
        L offsets, non-decreasing, each <= len(text): the length of the common prefix of
        ``prefix_texts[i]`` and ``text`` (exact for tokenizers whose prefixes decode to text
        prefixes; a partial multi-byte character counts as not yet emitted).
    """
    offsets, last = [], 0
    for prefix in prefix_texts:
        n = min(len(prefix), len(text))
        while n > last and prefix[:n] != text[:n]:
            n -= 1
        last = max(last, n)
        offsets.append(last)
    return offsets


class GenerationBackend(abc.ABC):
    """A sampling engine holding one policy's weights. Implementations are thread-safe."""

    name: str

    @property
    @abc.abstractmethod
    def policy_version(self) -> int:
        """Version of the weights in use."""

    @property
    @abc.abstractmethod
    def max_context_tokens(self) -> int:
        """Most prompt + generated tokens the model accepts."""

    @property
    @abc.abstractmethod
    def device(self) -> str:
        """Device string, e.g. 'cpu', 'cuda:0'."""

    @abc.abstractmethod
    def prompt_lengths(self, prompts: Sequence[str]) -> list[int]:
        """Tokens of each prompt as :meth:`generate_many` encodes it (no special tokens added).

        Args:
            prompts: P prompt texts.

        Returns:
            P token counts.
        """

    @abc.abstractmethod
    def generate_many(
        self, requests: Sequence[SampleRequest], *, deadline: float | None = None
    ) -> list[PromptResult]:
        """Sample every request's ``n`` completions in one batched engine call.

        The rows of all requests (sum of ``n``) are sampled together; each row uses its
        request's sampling parameters (temperature, top-k/top-p, max_new_tokens, stop) and its
        request's random stream (``sampling.seed``; 0 = unseeded), and has its own finish
        reason. All rows report the same ``policy_version``.

        Args:
            requests: R >= 1 requests (prompt text used as given, n >= 1).
            deadline: ``time.monotonic()`` time after which generation is aborted.

        Returns:
            R results in request order; result i has ``requests[i].n`` completions, each
            recording ``requests[i].sampling``.

        Raises:
            InvalidArgumentError: no requests, n < 1, an empty prompt, or prompt tokens +
                max_new_tokens beyond ``max_context_tokens`` (names the request index).
            DeadlineExceededError: the deadline passed before generation finished.
        """

    def generate(
        self,
        prompts: Sequence[str],
        n: int,
        sampling: SamplingConfig,
        *,
        deadline: float | None = None,
    ) -> list[PromptResult]:
        """Sample ``n`` completions for each prompt under one ``sampling`` (``generate_many``).

        Prompt 0 is sampled with ``sampling.seed`` itself, prompt i > 0 with
        ``derived_seed(seed, "prompt-<i>")`` (recorded on its completions), so prompts never
        share a random stream and a one-prompt call reproduces with the same seed.

        Args:
            prompts: P non-empty prompt texts, used as given (a chat template is applied when
                the tasks are built, never here).
            n: Completions per prompt (G), >= 1.
            sampling: Sampling parameters.
            deadline: ``time.monotonic()`` time after which generation is aborted.

        Returns:
            P results in prompt order, each with ``n`` completions.

        Raises:
            InvalidArgumentError: n < 1, no prompts, an empty prompt, or prompt tokens +
                max_new_tokens beyond ``max_context_tokens`` (names the prompt index).
            DeadlineExceededError: the deadline passed before generation finished.
        """
        self.validate_request(prompts, n)
        requests = [SampleRequest(prompts[0], n, sampling)]
        for i, prompt in enumerate(prompts[1:], start=1):
            seed = derived_seed(sampling.seed, f"prompt-{i}")
            requests.append(SampleRequest(prompt, n, sampling.model_copy(update={"seed": seed})))
        return self.generate_many(requests, deadline=deadline)

    @abc.abstractmethod
    def load_weights(self, version: int, path: str) -> float:
        """Swap in the weights of ``path`` (a save_pretrained folder) in place, as ``version``.

        Returns:
            Seconds the swap took.

        Raises:
            InvalidArgumentError: ``version`` is below the current version.
            NotFoundError: ``path`` holds no safetensors weights.
            ContractError: the weights do not match the model's parameters.
        """

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the engine's resources."""

    def validate_request(self, prompts: Sequence[str], n: int) -> None:
        """Shared checks of ``generate``'s arguments that need no tokenizer.

        Raises:
            InvalidArgumentError: n < 1, no prompts, or an empty prompt (names its index).
        """
        if n < 1:
            raise InvalidArgumentError(f"n must be >= 1, got {n}")
        if not prompts:
            raise InvalidArgumentError("prompts must not be empty")
        for i, prompt in enumerate(prompts):
            if not prompt:
                raise InvalidArgumentError(f"prompts[{i}] is empty")

    def validate_requests(self, requests: Sequence[SampleRequest]) -> None:
        """Shared checks of ``generate_many``'s requests that need no tokenizer.

        Raises:
            InvalidArgumentError: no requests, or a request with n < 1 or an empty prompt
                (names its index).
        """
        if not requests:
            raise InvalidArgumentError("requests must not be empty")
        for i, request in enumerate(requests):
            if request.n < 1:
                raise InvalidArgumentError(f"requests[{i}].n must be >= 1, got {request.n}")
            if not request.prompt:
                raise InvalidArgumentError(f"requests[{i}] has an empty prompt")


def create_backend(config: BackendConfig) -> GenerationBackend:
    """Build the backend named by ``config.kind`` (imports its engine lazily).

    Raises:
        FailedPreconditionError: vllm requested but not importable / no GPU (from the backend).
        NotFoundError: the model folder is missing.
    """
    if config.kind == "vllm":
        from grpo.services.generation.vllm_backend import VllmBackend

        return VllmBackend(config)
    from grpo.services.generation.transformers_backend import TransformersBackend

    return TransformersBackend(config)
