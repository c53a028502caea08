"""vLLM generation backend (GPU only): an in-process ``vllm.LLM`` with per-token behavior log-probs.

Written against vLLM's offline API (V1 engine); every vLLM call here is checked against the
pinned release's signatures by ``make vllm-contract`` (scripts/vllm_contract.py: a new use of
vLLM must be added there). It cannot run on the CPU machines this project is developed on, so
only the tests marked ``vllm`` exercise it (they skip without vllm and a GPU). See
docs/generation.md for what was and was not verified.

- Sampling: ``generate_many`` submits every request in one ``LLM.generate`` call, each with its
  own ``SamplingParams(n=G, logprobs=0, seed=..., ...)`` (vLLM takes a list of parameters, one
  per prompt, and schedules all their sequences with continuous batching); ``logprobs=0``
  returns the log-prob of each sampled token only. The engine is built with
  ``logprobs_mode="processed_logprobs"`` so those log-probs are taken after temperature and
  top-k/top-p, i.e. under the distribution actually sampled from (vLLM's default,
  ``raw_logprobs``, reports the untempered model distribution instead).
- Prompts are tokenized here with the model folder's tokenizer and passed as token ids, so the
  prompt ids on rollouts are exactly what the engine saw.
- Weights: ``load_weights`` reads the published safetensors on each worker through
  ``LLM.collective_rpc("grpo_load_weights", ...)`` (a method of ``VllmWorkerExtension``, mixed
  into the workers with ``worker_extension_cls``; passing a callable instead would need
  ``VLLM_ALLOW_INSECURE_SERIALIZATION``) and calls the model's own ``load_weights`` (which
  handles fused QKV/gate-up layouts), then resets the prefix cache, whose KV entries belong to
  the old weights. No engine restart.
- NCCL broadcast (the GPU fast path, ``grpo.services.runtime.weights.nccl``): ``join_weight_group``
  makes every worker join the learner's weight-update group through ``collective_rpc``
  ("grpo_init_weight_group"), and ``receive_weights`` takes one broadcast of every parameter
  ("grpo_receive_weights", then a prefix-cache reset), following vLLM's documented RLHF
  weight-update example. Needs one GPU per rank; tested only where two GPUs exist.
- Deadlines: ``LLM.generate`` is blocking; the deadline is checked before the call and after
  it (an overrun raises DEADLINE_EXCEEDED but the GPU work is not cut short).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from grpo.chat import end_of_turn_ids
from grpo.errors import FailedPreconditionError, InvalidArgumentError, NotFoundError
from grpo.model import load_tokenizer
from grpo.services.generation.backend import (
    BackendConfig,
    CompletionResult,
    GenerationBackend,
    PromptResult,
    SampleRequest,
    SamplingConfig,
    check_deadline,
    prefix_char_offsets,
)
from grpo.v1 import common_pb2

__all__ = ["VllmBackend", "VllmWorkerExtension"]

_FINISH = {
    "stop": common_pb2.FINISH_REASON_STOP,
    "length": common_pb2.FINISH_REASON_LENGTH,
    "abort": common_pb2.FINISH_REASON_ABORT,
}


def _iter_safetensors(files: list[str]) -> Iterator[tuple[str, Any]]:
    from safetensors.torch import safe_open

    for name in files:
        with safe_open(name, framework="pt", device="cpu") as fh:
            for key in fh.keys():  # noqa: SIM118 - safe_open has no __iter__
                yield key, fh.get_tensor(key)


class VllmWorkerExtension:
    """Mixed into every vLLM worker (``LLM(worker_extension_cls=...)``); its methods are called
    by name through ``LLM.collective_rpc``."""

    model_runner: Any
    device: Any

    def grpo_load_weights(self, files: list[str]) -> int:
        """Load the safetensors ``files`` into this worker's model; returns tensors loaded."""
        loaded = self.model_runner.model.load_weights(weights=_iter_safetensors(files))
        return len(loaded) if loaded is not None else 0

    def grpo_init_weight_group(
        self, master_address: str, master_port: int, rank_offset: int, world_size: int
    ) -> int:
        """Join the learner's NCCL weight-update group (``grpo.services.runtime.weights.nccl``) as
        rank ``rank_offset`` + this worker's rank in the engine; returns that rank."""
        from vllm.distributed.device_communicators.pynccl import PyNcclCommunicator
        from vllm.distributed.parallel_state import get_world_group
        from vllm.distributed.utils import StatelessProcessGroup

        rank = get_world_group().rank + rank_offset
        group = StatelessProcessGroup.create(
            host=master_address, port=master_port, rank=rank, world_size=world_size
        )
        self._grpo_weight_group = PyNcclCommunicator(group, device=self.device)
        return rank

    def grpo_receive_weights(self, specs: list[tuple[str, str, tuple[int, ...]]]) -> int:
        """Receive each (name, dtype, shape) of ``specs`` from rank 0, in order, and load it
        with the model's own ``load_weights``; returns tensors loaded."""
        import torch

        group = getattr(self, "_grpo_weight_group", None)
        if group is None:
            raise RuntimeError("grpo_init_weight_group must run before grpo_receive_weights")
        stream = torch.cuda.current_stream()
        for name, dtype, shape in specs:
            buffer = torch.empty(shape, dtype=getattr(torch, dtype), device=self.device)
            group.broadcast(buffer, src=0, stream=stream)
            self.model_runner.model.load_weights(weights=[(name, buffer)])
            del buffer
        torch.cuda.synchronize()
        return len(specs)


class VllmBackend(GenerationBackend):
    """Sampling with an in-process ``vllm.LLM``; see the module docstring."""

    name = "vllm"

    def __init__(self, config: BackendConfig) -> None:
        """Start the engine on ``config.model_path``.

        Raises:
            FailedPreconditionError: vllm is not installed or no CUDA device is present.
            NotFoundError: the model folder is missing.
        """
        try:
            import torch
            import vllm
        except ImportError as exc:
            raise FailedPreconditionError(
                "the vllm backend needs the 'vllm' extra (pip install 'grpo-pipeline[vllm]')"
            ) from exc
        if not torch.cuda.is_available():
            raise FailedPreconditionError("the vllm backend needs a CUDA GPU; use 'transformers'")
        folder = Path(config.model_path)
        if not (folder / "config.json").is_file():
            raise NotFoundError(f"model folder {folder} has no config.json")
        self._vllm = vllm
        self._tok = load_tokenizer(folder)
        self._end_of_turn = sorted(end_of_turn_ids(self._tok))  # stops besides EOS
        kwargs: dict[str, Any] = {
            "model": str(folder),
            "tokenizer": str(folder),
            "dtype": "auto" if config.dtype == "auto" else config.dtype,
            "gpu_memory_utilization": config.gpu_memory_utilization,
            "logprobs_mode": "processed_logprobs",
            "worker_extension_cls": f"{__name__}.VllmWorkerExtension",
            "seed": 0,
        }
        if config.max_model_len:
            kwargs["max_model_len"] = config.max_model_len
        self._llm = vllm.LLM(**kwargs)
        self._max_ctx = int(self._llm.llm_engine.model_config.max_model_len)
        self._version = config.policy_version
        self._lock = threading.Lock()

    @property
    def policy_version(self) -> int:
        """Version of the weights in use."""
        return self._version

    @property
    def max_context_tokens(self) -> int:
        """The engine's ``max_model_len``."""
        return self._max_ctx

    @property
    def device(self) -> str:
        """Always 'cuda' (the engine places its workers)."""
        return "cuda"

    def _params(self, sampling: SamplingConfig, n: int) -> Any:
        """vLLM ``SamplingParams`` of one request (its seed: None when ``sampling.seed`` is 0)."""
        return self._vllm.SamplingParams(
            n=n,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            top_k=sampling.top_k,  # 0 = off (vLLM >= 0.10 accepts 0 and -1)
            max_tokens=sampling.max_new_tokens,
            stop=list(sampling.stop) or None,
            stop_token_ids=self._end_of_turn or None,
            include_stop_str_in_output=True,
            seed=sampling.seed or None,
            logprobs=0,
            skip_special_tokens=True,
        )

    def prompt_lengths(self, prompts: Sequence[str]) -> list[int]:
        """Tokens of each prompt as :meth:`generate_many` encodes it."""
        return [len(self._tok(p, add_special_tokens=False)["input_ids"]) for p in prompts]

    def generate_many(
        self, requests: Sequence[SampleRequest], *, deadline: float | None = None
    ) -> list[PromptResult]:
        """All requests in one continuously batched ``LLM.generate`` call, one
        ``SamplingParams`` each; see ``GenerationBackend.generate_many``."""
        self.validate_requests(requests)
        encoded = [
            list(self._tok(r.prompt, add_special_tokens=False)["input_ids"]) for r in requests
        ]
        for i, (ids, request) in enumerate(zip(encoded, requests, strict=True)):
            if len(ids) + request.sampling.max_new_tokens > self._max_ctx:
                raise InvalidArgumentError(
                    f"prompts[{i}] has {len(ids)} tokens; with max_new_tokens="
                    f"{request.sampling.max_new_tokens} it exceeds the model context of "
                    f"{self._max_ctx} tokens"
                )
        params = [self._params(r.sampling, r.n) for r in requests]
        check_deadline(deadline)
        with self._lock:
            version = self._version
            outputs = self._llm.generate(
                [{"prompt_token_ids": ids} for ids in encoded], params, use_tqdm=False
            )
        check_deadline(deadline)
        decoder = self._tok.backend_tokenizer
        results = []
        for ids, out, request in zip(encoded, outputs, requests, strict=True):
            completions = []
            for comp in out.outputs:
                tokens = list(comp.token_ids)
                logprobs = [
                    float(step[t].logprob) for t, step in zip(tokens, comp.logprobs, strict=True)
                ]
                text = decoder.decode(tokens, True)
                prefixes = decoder.decode_batch([tokens[:i] for i in range(len(tokens))], True)
                completions.append(
                    CompletionResult(
                        text=text,
                        token_ids=tokens,
                        behavior_logprobs=logprobs,
                        token_char_offsets=prefix_char_offsets(prefixes, text),
                        finish_reason=_FINISH.get(
                            comp.finish_reason or "", common_pb2.FINISH_REASON_UNSPECIFIED
                        ),
                        policy_version=version,
                        sampling=request.sampling,
                    )
                )
            results.append(PromptResult(prompt_token_ids=ids, completions=completions))
        return results

    def load_weights(self, version: int, path: str) -> float:
        """Load ``path``'s safetensors into every worker in place, then reset the prefix cache.

        See ``GenerationBackend.load_weights`` for the errors raised.
        """
        start = time.perf_counter()
        if version < self._version:
            raise InvalidArgumentError(
                f"policy_version {version} is older than the loaded version {self._version}"
            )
        files = sorted(str(f) for f in Path(path).glob("*.safetensors"))
        if not files:
            raise NotFoundError(f"no *.safetensors files in {path}")
        with self._lock:
            self._llm.collective_rpc("grpo_load_weights", args=(files,))
            self._llm.reset_prefix_cache()
            self._version = version
        return time.perf_counter() - start

    def join_weight_group(
        self, master_address: str, master_port: int, rank_offset: int, world_size: int
    ) -> list[int]:
        """Make every engine worker join the learner's NCCL weight-update group (the learner is
        rank 0, ``grpo.services.runtime.weights.nccl.NcclWeightSender``); blocks until the group
        forms.

        Returns:
            The group rank of each worker.
        """
        with self._lock:
            return list(
                self._llm.collective_rpc(
                    "grpo_init_weight_group",
                    args=(master_address, master_port, rank_offset, world_size),
                )
            )

    def receive_weights(self, version: int, specs: list[tuple[str, str, tuple[int, ...]]]) -> float:
        """Take policy ``version`` from the learner's broadcast (``NcclWeightSender.send`` with
        the same ``weight_specs``), then reset the prefix cache; generation waits meanwhile.

        Returns:
            Seconds the transfer took.

        Raises:
            InvalidArgumentError: ``version`` is below the loaded version.
        """
        start = time.perf_counter()
        if version < self._version:
            raise InvalidArgumentError(
                f"policy_version {version} is older than the loaded version {self._version}"
            )
        with self._lock:
            self._llm.collective_rpc("grpo_receive_weights", args=(list(specs),))
            self._llm.reset_prefix_cache()
            self._version = version
        return time.perf_counter() - start

    def close(self) -> None:
        """Drop the engine (frees GPU memory once collected)."""
        self._llm = None
