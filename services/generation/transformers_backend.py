"""transformers generation backend: a manual, KV-cached sampling loop on CPU or CUDA.

Each call left-pads its prompts, runs one prefill forward per prompt (the KV cache is then
repeated ``n`` times with ``DynamicCache.batch_repeat_interleave``), and samples token by token.
The attention mask is the prompt mask followed by ones for every generated token and the
position ids are ``cumsum(mask) - 1``; a mask built as ``ids != pad_id`` would be wrong, since
the policy can sample the pad id. With this convention a teacher-forced forward of prompt +
completion reproduces the behavior log-probs to ~1e-6 (DESIGN.md, "Measured").

Rows that finish (EOS or a stop string) are dropped from the batch and its cache
(``batch_select_indices``). The sampling distribution and what μ means under top-k/top-p and
temperature 0 are defined in ``grpo.services.generation.backend``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, DynamicCache

from grpo.devices import resolve_device, resolve_dtype
from grpo.errors import ContractError, InvalidArgumentError, NotFoundError
from grpo.model import load_tokenizer
from grpo.services.generation.backend import (
    BackendConfig,
    CompletionResult,
    GenerationBackend,
    PromptResult,
    SamplingConfig,
    check_deadline,
    prefix_char_offsets,
)
from grpo.v1 import common_pb2

__all__ = ["TransformersBackend", "sample_next_tokens"]


def sample_next_tokens(
    logits: torch.Tensor, sampling: SamplingConfig, generator: torch.Generator | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pick one token per row and its behavior log-prob μ.

    Distribution (applied in this order): logits / temperature; keep the top-k; keep the
    smallest set of most likely tokens whose mass reaches top_p (nucleus, Holtzman et al.,
    2020); renormalise. Temperature 0 takes the argmax and reports its log-prob under the
    untempered softmax.

    Args:
        logits: [B, V] float32 next-token logits.
        sampling: temperature, top_k, top_p.
        generator: torch RNG on the logits' device (None = global RNG).

    Returns:
        (tokens [B] int64, logprobs [B] float32).
    """
    if sampling.temperature == 0.0:
        tokens = logits.argmax(dim=-1)
        logp = torch.log_softmax(logits, dim=-1)
        return tokens, logp.gather(-1, tokens[:, None]).squeeze(-1)
    scaled = logits / sampling.temperature
    if 0 < sampling.top_k < scaled.shape[-1]:
        kth = torch.topk(scaled, sampling.top_k, dim=-1).values[:, -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    if sampling.top_p < 1.0:
        sorted_logits, order = torch.sort(scaled, dim=-1, descending=True)
        probs = torch.softmax(sorted_logits, dim=-1)
        mass_before = torch.cumsum(probs, dim=-1) - probs  # [B, V] mass of better tokens
        drop_sorted = mass_before >= sampling.top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        scaled = scaled.masked_fill(drop, float("-inf"))
    logp = torch.log_softmax(scaled, dim=-1)
    tokens = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(-1)
    return tokens, logp.gather(-1, tokens[:, None]).squeeze(-1)


class _Row:
    """Book-keeping of one sequence being sampled."""

    __slots__ = ("finish", "logprobs", "prompt", "text", "tokens")

    def __init__(self, prompt: int) -> None:
        self.prompt = prompt
        self.tokens: list[int] = []
        self.logprobs: list[float] = []
        self.text = ""
        self.finish: common_pb2.FinishReason = common_pb2.FINISH_REASON_UNSPECIFIED


class TransformersBackend(GenerationBackend):
    """Sampling with a Hugging Face causal LM; see the module docstring for the method."""

    name = "transformers"

    def __init__(self, config: BackendConfig) -> None:
        """Load the model and tokenizer from ``config.model_path``.

        Raises:
            NotFoundError: the folder or its config/tokenizer is missing.
        """
        torch.set_num_threads(config.torch_threads)
        folder = Path(config.model_path)
        if not (folder / "config.json").is_file():
            raise NotFoundError(f"model folder {folder} has no config.json")
        self._config = config
        self._tok = load_tokenizer(folder)
        self._device = resolve_device(config.device)
        dtype = resolve_dtype(config.dtype, self._device)
        model: Any = AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype)
        self._model = model.to(self._device).eval()
        eos = self._model.config.eos_token_id
        eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        if self._tok.eos_token_id is not None:
            eos_ids.add(self._tok.eos_token_id)
        self._eos = eos_ids
        self._pad = self._tok.pad_token_id if self._tok.pad_token_id is not None else 0
        self._max_ctx = int(getattr(self._model.config, "max_position_embeddings", 2048))
        self._version = config.policy_version
        self._lock = threading.Lock()

    @property
    def policy_version(self) -> int:
        """Version of the weights in use."""
        return self._version

    @property
    def max_context_tokens(self) -> int:
        """The model config's ``max_position_embeddings``."""
        return self._max_ctx

    @property
    def device(self) -> str:
        """Device string, e.g. 'cpu'."""
        return str(self._device)

    @property
    def model(self) -> Any:
        """The underlying ``PreTrainedModel`` (read-only use: tests, teacher forcing)."""
        return self._model

    @property
    def tokenizer(self) -> Any:
        """The tokenizer (``PreTrainedTokenizerFast``)."""
        return self._tok

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` as the policy sees a prompt (no special tokens added)."""
        return list(self._tok(text, add_special_tokens=False)["input_ids"])

    def generate(
        self,
        prompts: Sequence[str],
        n: int,
        sampling: SamplingConfig,
        *,
        deadline: float | None = None,
    ) -> list[PromptResult]:
        """Sample ``n`` completions per prompt; see ``GenerationBackend.generate``."""
        self.validate_request(prompts, n)
        encoded = [self.encode(p) for p in prompts]
        for i, ids in enumerate(encoded):
            if not ids:
                raise InvalidArgumentError(f"prompts[{i}] encodes to no tokens")
            if len(ids) + sampling.max_new_tokens > self._max_ctx:
                raise InvalidArgumentError(
                    f"prompts[{i}] has {len(ids)} tokens; with max_new_tokens="
                    f"{sampling.max_new_tokens} it exceeds the model context of "
                    f"{self._max_ctx} tokens"
                )
        generator = None
        if sampling.temperature > 0:
            generator = torch.Generator(device=self._device)
            if sampling.seed:
                generator.manual_seed(sampling.seed)
            else:
                generator.seed()
        results = [PromptResult(prompt_token_ids=ids) for ids in encoded]
        per_chunk = max(1, self._config.max_batch_rows // n)
        with self._lock, torch.inference_mode():
            version = self._version
            for start in range(0, len(encoded), per_chunk):
                chunk = list(range(start, min(start + per_chunk, len(encoded))))
                rows = self._sample_chunk(
                    [encoded[i] for i in chunk], n, sampling, generator, deadline
                )
                for row in rows:
                    results[chunk[row.prompt]].completions.append(
                        self._finish_row(row, version, sampling)
                    )
        return results

    def _sample_chunk(
        self,
        prompt_ids: list[list[int]],
        n: int,
        sampling: SamplingConfig,
        generator: torch.Generator | None,
        deadline: float | None,
    ) -> list[_Row]:
        """Sample n rows per prompt of one chunk; returns P*n rows (prompt-major order)."""
        check_deadline(deadline)
        width = max(len(ids) for ids in prompt_ids)
        ids = torch.full((len(prompt_ids), width), self._pad, dtype=torch.long)
        mask = torch.zeros((len(prompt_ids), width), dtype=torch.long)
        for i, p in enumerate(prompt_ids):  # left padding
            ids[i, width - len(p) :] = torch.tensor(p)
            mask[i, width - len(p) :] = 1
        ids, mask = ids.to(self._device), mask.to(self._device)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)  # (P, width)
        cache = DynamicCache(config=self._model.config)
        out = self._model(
            input_ids=ids, attention_mask=mask, position_ids=pos, cache=cache, logits_to_keep=1
        )
        if n > 1:
            cache.batch_repeat_interleave(n)
        logits = out.logits[:, -1, :].float().repeat_interleave(n, dim=0)  # (B, V), B = P*n
        mask = mask.repeat_interleave(n, dim=0)
        next_pos = mask.sum(-1)  # (B,) position of the next token
        rows = [_Row(prompt=i // n) for i in range(len(prompt_ids) * n)]
        active = list(range(len(rows)))  # batch slot -> row index
        decoder = self._tok.backend_tokenizer
        for step in range(sampling.max_new_tokens):
            check_deadline(deadline)
            tokens, logprobs = sample_next_tokens(logits, sampling, generator)
            tok_list, lp_list = tokens.tolist(), logprobs.tolist()
            for slot, r in enumerate(active):
                rows[r].tokens.append(tok_list[slot])
                rows[r].logprobs.append(lp_list[slot])
            if sampling.stop:
                texts = decoder.decode_batch([rows[r].tokens for r in active], True)
            keep: list[int] = []
            for slot, r in enumerate(active):
                row = rows[r]
                if sampling.stop:
                    tail = len(row.text) - max(len(s) for s in sampling.stop)
                    row.text = texts[slot]
                    if any(s in row.text[max(0, tail) :] for s in sampling.stop):
                        row.finish = common_pb2.FINISH_REASON_STOP
                if tok_list[slot] in self._eos:
                    row.finish = common_pb2.FINISH_REASON_STOP
                if row.finish == common_pb2.FINISH_REASON_UNSPECIFIED:
                    if step + 1 == sampling.max_new_tokens:
                        row.finish = common_pb2.FINISH_REASON_LENGTH
                    else:
                        keep.append(slot)
            if not keep:
                break
            if len(keep) < len(active):
                index = torch.tensor(keep, device=self._device)
                cache.batch_select_indices(index)
                tokens, mask, next_pos = tokens[index], mask[index], next_pos[index]
                active = [active[s] for s in keep]
            mask = torch.cat([mask, mask.new_ones((len(active), 1))], dim=-1)
            out = self._model(
                input_ids=tokens[:, None],
                attention_mask=mask,
                position_ids=next_pos[:, None],
                cache=cache,
            )
            next_pos = next_pos + 1
            logits = out.logits[:, -1, :].float()
        return rows

    def _finish_row(self, row: _Row, version: int, sampling: SamplingConfig) -> CompletionResult:
        decoder = self._tok.backend_tokenizer
        prefixes = decoder.decode_batch([row.tokens[:i] for i in range(len(row.tokens))], True)
        text = decoder.decode(row.tokens, True)
        return CompletionResult(
            text=text,
            token_ids=row.tokens,
            behavior_logprobs=row.logprobs,
            token_char_offsets=prefix_char_offsets(prefixes, text),
            finish_reason=row.finish,
            policy_version=version,
            sampling=sampling,
        )

    def load_weights(self, version: int, path: str) -> float:
        """Copy the safetensors weights of ``path`` into the model in place.

        Tied output embeddings may be absent from the file. See
        ``GenerationBackend.load_weights`` for the errors raised.
        """
        start = time.perf_counter()
        if version < self._version:
            raise InvalidArgumentError(
                f"policy_version {version} is older than the loaded version {self._version}"
            )
        files = sorted(Path(path).glob("*.safetensors"))
        if not files:
            raise NotFoundError(f"no *.safetensors files in {path}")
        state: dict[str, torch.Tensor] = {}
        for f in files:
            state.update(load_file(str(f)))
        target = self._model.state_dict()
        unexpected = sorted(set(state) - set(target))
        missing = set(target) - set(state)
        if getattr(self._model.config, "tie_word_embeddings", False):
            missing.discard("lm_head.weight")
        if unexpected or missing:
            raise ContractError(
                f"weights in {path} do not match the model: missing {sorted(missing)[:5]}, "
                f"unexpected {unexpected[:5]}"
            )
        for key, value in state.items():
            if value.shape != target[key].shape:
                raise ContractError(
                    f"weight {key} has shape {tuple(value.shape)}, model expects "
                    f"{tuple(target[key].shape)}"
                )
        with self._lock, torch.no_grad():
            for key, value in state.items():
                target[key].copy_(value)
            self._version = version
        return time.perf_counter() - start
