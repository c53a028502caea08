"""transformers generation backend: a manual, KV-cached sampling loop on CPU or CUDA.

One ``generate_many`` call samples every request's rows in one padded batch (at most
``max_batch_rows`` rows per batch; more rows run as consecutive batches, a request is never
split): the distinct prompts are left-padded and prefilled in one forward, each prompt's KV
cache is then copied to its request's ``n`` rows (``DynamicCache.batch_select_indices`` with
repeated indices), and all rows are sampled token by token together. The attention mask is
the prompt mask followed by ones for every generated token and the position ids are
``cumsum(mask) - 1``; a mask built as ``ids != pad_id`` would be wrong, since the policy can
sample the pad id. With this convention a teacher-forced forward of prompt + completion
reproduces the behavior log-probs to ~1e-6 whatever the padding (DESIGN.md, "Measured").

Each row is sampled under its own request's parameters: the tempered and truncated
distribution is computed once per set of rows sharing (temperature, top-k, top-p), and each
request draws its rows from its own ``torch.Generator`` (seeded by its ``sampling.seed``), so
a request's samples do not depend on its batch mates. Rows that finish (EOS or the chat
template's end-of-turn token, ``grpo.chat.end_of_turn_ids``; a stop string of their request; or
their request's ``max_new_tokens``) are dropped from the batch and its cache
(``batch_select_indices``); the padded batch is not refilled (no continuous batching). The
sampling distribution and what μ means under top-k/top-p and temperature 0 are defined in
``grpo.services.generation.backend``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, DynamicCache

from grpo.chat import end_of_turn_ids
from grpo.devices import resolve_device, resolve_dtype
from grpo.errors import ContractError, InvalidArgumentError, NotFoundError
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

__all__ = [
    "RequestRows",
    "TransformersBackend",
    "sample_next_tokens",
    "sample_rows",
    "sampling_logprobs",
]


def sampling_logprobs(logits: torch.Tensor, sampling: SamplingConfig) -> torch.Tensor:
    """Log-probs of the distribution ``sampling`` draws from, for every row and token.

    Distribution (applied in this order): logits / temperature; keep the top-k (ties at the
    k-th value kept); keep the smallest set of most likely tokens whose mass reaches top_p
    (nucleus, Holtzman et al., 2020: a token is dropped when the mass ranked before it is
    already >= top_p); renormalise. Temperature 0 (greedy) gives the untempered, untruncated
    log-softmax (what μ reports for a greedy token). ``grpo.learner.logprobs.token_logprobs``
    applies the same rule to the learner's logits.

    Args:
        logits: [B, V] float32 next-token logits.
        sampling: temperature, top_k, top_p.

    Returns:
        [B, V] float32 log-probs; dropped tokens are -inf.
    """
    if sampling.temperature == 0.0:
        return torch.log_softmax(logits, dim=-1)
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
    return torch.log_softmax(scaled, dim=-1)


def sample_next_tokens(
    logits: torch.Tensor, sampling: SamplingConfig, generator: torch.Generator | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pick one token per row and its behavior log-prob μ, all rows under one ``sampling``.

    The distribution is ``sampling_logprobs``; temperature 0 takes the argmax (μ = its
    untempered log-prob), otherwise one multinomial draw per row from ``generator``.

    Args:
        logits: [B, V] float32 next-token logits.
        sampling: temperature, top_k, top_p.
        generator: torch RNG on the logits' device (None = global RNG).

    Returns:
        (tokens [B] int64, logprobs [B] float32).
    """
    logp = sampling_logprobs(logits, sampling)
    if sampling.temperature == 0.0:
        tokens = logits.argmax(dim=-1)
    else:
        tokens = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(-1)
    return tokens, logp.gather(-1, tokens[:, None]).squeeze(-1)


@dataclass(frozen=True)
class RequestRows:
    """Consecutive batch slots ``[start, stop)`` holding the active rows of one request."""

    start: int
    stop: int
    sampling: SamplingConfig
    generator: torch.Generator | None


def sample_rows(
    logits: torch.Tensor, runs: Sequence[RequestRows]
) -> tuple[torch.Tensor, torch.Tensor]:
    """``sample_next_tokens`` for a batch whose rows belong to several requests.

    Rows of runs with the same (temperature, top_k, top_p) share one ``sampling_logprobs``
    computation; each run then draws its own rows from its own generator, so a request's
    draws depend on its own rows only.

    Args:
        logits: [B, V] float32 next-token logits.
        runs: slot ranges covering 0..B-1 in order, one per request with active rows.

    Returns:
        (tokens [B] int64, logprobs [B] float32).
    """
    tokens = torch.empty(logits.shape[0], dtype=torch.long, device=logits.device)
    logprobs = torch.empty(logits.shape[0], dtype=torch.float32, device=logits.device)
    by_params: dict[tuple[float, int, float], list[RequestRows]] = {}
    for run in runs:
        s = run.sampling
        by_params.setdefault((s.temperature, s.top_k, s.top_p), []).append(run)
    for group in by_params.values():
        index = torch.cat(
            [torch.arange(r.start, r.stop, device=logits.device) for r in group]
        )  # [b] slots of this parameter set
        sub = logits if len(group) == len(runs) else logits[index]
        logp = sampling_logprobs(sub, group[0].sampling)
        if group[0].sampling.temperature == 0.0:
            picked = sub.argmax(dim=-1)
        else:
            parts, at = [], 0
            for r in group:
                rows = logp[at : at + r.stop - r.start]
                parts.append(torch.multinomial(rows.exp(), 1, generator=r.generator))
                at += r.stop - r.start
            picked = torch.cat(parts).squeeze(-1)
        tokens[index] = picked
        logprobs[index] = logp.gather(-1, picked[:, None]).squeeze(-1)
    return tokens, logprobs


def _pack(counts: Sequence[int], max_rows: int) -> list[list[int]]:
    """Indices of ``counts`` in order, cut into batches of at most ``max_rows`` rows (a count
    above ``max_rows`` is a batch of its own)."""
    batches: list[list[int]] = []
    rows = 0
    for i, count in enumerate(counts):
        if not batches or rows + count > max_rows:
            batches.append([])
            rows = 0
        batches[-1].append(i)
        rows += count
    return batches


class _Row:
    """Book-keeping of one sequence being sampled."""

    __slots__ = ("finish", "logprobs", "prompt", "text", "tokens")

    def __init__(self, prompt: int) -> None:
        self.prompt = prompt  # index of the request in its batch
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
        self._eos = eos_ids | end_of_turn_ids(self._tok)  # a chat template's turn end stops too
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

    def prompt_lengths(self, prompts: Sequence[str]) -> list[int]:
        """Tokens of each prompt (:meth:`encode`)."""
        return [len(self.encode(p)) for p in prompts]

    def generate_many(
        self, requests: Sequence[SampleRequest], *, deadline: float | None = None
    ) -> list[PromptResult]:
        """Sample every request's rows in padded batches (``GenerationBackend.generate_many``)."""
        self.validate_requests(requests)
        encoded = [self.encode(r.prompt) for r in requests]
        for i, (ids, request) in enumerate(zip(encoded, requests, strict=True)):
            if not ids:
                raise InvalidArgumentError(f"prompts[{i}] encodes to no tokens")
            if len(ids) + request.sampling.max_new_tokens > self._max_ctx:
                raise InvalidArgumentError(
                    f"prompts[{i}] has {len(ids)} tokens; with max_new_tokens="
                    f"{request.sampling.max_new_tokens} it exceeds the model context of "
                    f"{self._max_ctx} tokens"
                )
        results = [PromptResult(prompt_token_ids=ids) for ids in encoded]
        with self._lock, torch.inference_mode():
            version = self._version
            for batch in _pack([r.n for r in requests], self._config.max_batch_rows):
                rows = self._sample_batch(
                    [encoded[i] for i in batch], [requests[i] for i in batch], deadline
                )
                for row in rows:
                    at = batch[row.prompt]
                    results[at].completions.append(
                        self._finish_row(row, version, requests[at].sampling)
                    )
        return results

    def _generator(self, sampling: SamplingConfig) -> torch.Generator | None:
        """A request's RNG: seeded by ``sampling.seed`` (fresh entropy when 0); None if greedy."""
        if sampling.temperature == 0:
            return None
        generator = torch.Generator(device=self._device)
        if sampling.seed:
            generator.manual_seed(sampling.seed)
        else:
            generator.seed()
        return generator

    def _sample_batch(
        self,
        prompt_ids: list[list[int]],
        requests: list[SampleRequest],
        deadline: float | None,
    ) -> list[_Row]:
        """Sample ``requests[i].n`` rows after each prompt in one padded batch.

        Returns:
            sum(n) rows in request-major order (``row.prompt`` = index into ``requests``).
        """
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
        counts = [r.n for r in requests]
        expand = torch.repeat_interleave(
            torch.arange(len(requests), device=self._device),
            torch.tensor(counts, device=self._device),
        )  # (B,) prompt of each row, B = sum(n)
        if any(c > 1 for c in counts):
            cache.batch_select_indices(expand)
        logits = out.logits[:, -1, :].float()[expand]  # (B, V)
        mask = mask[expand]
        next_pos = mask.sum(-1)  # (B,) position of the next token
        rows = [_Row(prompt=i) for i, c in enumerate(counts) for _ in range(c)]
        generators = [self._generator(r.sampling) for r in requests]
        active = list(range(len(rows)))  # batch slot -> row index
        decoder = self._tok.backend_tokenizer
        steps = max(r.sampling.max_new_tokens for r in requests)
        for step in range(steps):
            check_deadline(deadline)
            tokens, logprobs = sample_rows(logits, self._runs(active, rows, requests, generators))
            tok_list, lp_list = tokens.tolist(), logprobs.tolist()
            for slot, r in enumerate(active):
                rows[r].tokens.append(tok_list[slot])
                rows[r].logprobs.append(lp_list[slot])
            stopping = [r for r in active if requests[rows[r].prompt].sampling.stop]
            if stopping:
                texts = decoder.decode_batch([rows[r].tokens for r in stopping], True)
                for r, text in zip(stopping, texts, strict=True):
                    row, stop = rows[r], requests[rows[r].prompt].sampling.stop
                    tail = len(row.text) - max(len(s) for s in stop)
                    row.text = text
                    if any(s in row.text[max(0, tail) :] for s in stop):
                        row.finish = common_pb2.FINISH_REASON_STOP
            keep: list[int] = []
            for slot, r in enumerate(active):
                row = rows[r]
                if tok_list[slot] in self._eos:
                    row.finish = common_pb2.FINISH_REASON_STOP
                if row.finish == common_pb2.FINISH_REASON_UNSPECIFIED:
                    if step + 1 == requests[row.prompt].sampling.max_new_tokens:
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

    @staticmethod
    def _runs(
        active: list[int],
        rows: list[_Row],
        requests: list[SampleRequest],
        generators: list[torch.Generator | None],
    ) -> list[RequestRows]:
        """The slot ranges of each request among the active rows (rows stay request-major)."""
        runs: list[RequestRows] = []
        start = 0
        for slot in range(1, len(active) + 1):
            if slot == len(active) or rows[active[slot]].prompt != rows[active[start]].prompt:
                req = rows[active[start]].prompt
                runs.append(RequestRows(start, slot, requests[req].sampling, generators[req]))
                start = slot
        return runs

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
