"""Several prompts' groups in one ``generate_many`` call (transformers backend, tiny model):
exact behavior log-probs per row under left padding, each request's own sampling parameters
and seed, per-row finish reasons and policy versions."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import torch
from helpers import wait_until

from grpo.errors import InvalidArgumentError
from grpo.learner.logprobs import token_logprobs
from grpo.services.generation.backend import BackendConfig, SampleRequest, SamplingConfig
from grpo.services.generation.transformers_backend import TransformersBackend
from grpo.v1 import common_pb2

from .conftest import TUNED_COMPLETION, TUNED_PROMPT

# Prompt lengths 1, 6 and 29 characters (= tokens of the char tokenizer): heavy left padding.
SHORT, MID, LONG = "7", "47+38=", "Add the numbers: 123 + 456 = "


def padded_teacher_forcing(
    backend: TransformersBackend, rows: list[tuple[list[int], list[int]]], temperature: float
) -> list[torch.Tensor]:
    """Log-probs [L_i] of each (prompt ids, completion ids) row from ONE forward over all rows,
    left-padded to a common prompt width and right-padded after the completions, with the
    attention mask = prompt mask + ones for generated tokens and position ids cumsum(mask) - 1
    (the convention DESIGN.md says reproduces μ)."""
    width = max(len(p) for p, _ in rows)
    total = width + max(len(c) for _, c in rows)
    ids = torch.zeros((len(rows), total), dtype=torch.long)
    mask = torch.zeros((len(rows), total), dtype=torch.long)
    for i, (p, c) in enumerate(rows):
        ids[i, width - len(p) : width + len(c)] = torch.tensor(p + c)
        mask[i, width - len(p) : width + len(c)] = 1
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        logits = backend.model(input_ids=ids, attention_mask=mask, position_ids=pos).logits
    out = []
    for i, (_p, c) in enumerate(rows):
        predicting = logits[i, width - 1 : width - 1 + len(c)].float()[None]  # [1, L, V]
        out.append(token_logprobs(predicting, torch.tensor([c]), temperature)[0])
    return out


def unpadded_teacher_forcing(
    backend: TransformersBackend, prompt: list[int], completion: list[int], s: SamplingConfig
) -> torch.Tensor:
    """Log-probs [L] of ``completion`` after ``prompt`` (one unpadded row) under ``s``'s
    temperature and top-k/top-p truncation (the learner's rule)."""
    with torch.no_grad():
        logits = backend.model(torch.tensor([prompt + completion])).logits[0].float()
    predicting = logits[len(prompt) - 1 : len(prompt) - 1 + len(completion)][None]
    return token_logprobs(
        predicting, torch.tensor([completion]), s.temperature, top_k=s.top_k, top_p=s.top_p
    )[0]


def test_left_padded_rows_of_different_prompts_reproduce_mu_exactly(
    backend: TransformersBackend,
) -> None:
    requests = [
        SampleRequest(prompt, 3, SamplingConfig(temperature=1.0, max_new_tokens=20, seed=i + 1))
        for i, prompt in enumerate([LONG, SHORT, MID])
    ]
    results = backend.generate_many(requests)
    rows = [(r.prompt_token_ids, c.token_ids) for r in results for c in r.completions]
    mus = [torch.tensor(c.behavior_logprobs) for r in results for c in r.completions]
    assert [len(r.prompt_token_ids) for r in results] == [29, 1, 6]
    worst_padded = worst_single = 0.0
    for (prompt, completion), mu, padded in zip(
        rows, mus, padded_teacher_forcing(backend, rows, 1.0), strict=True
    ):
        single = unpadded_teacher_forcing(backend, prompt, completion, requests[0].sampling)
        worst_padded = max(worst_padded, float((padded - mu).abs().max()))
        worst_single = max(worst_single, float((single - mu).abs().max()))
    # float32 on CPU: agreement at the 1e-6 level (observed 4.8e-7), whatever the padding.
    assert worst_padded < 5e-6 and worst_single < 5e-6, (worst_padded, worst_single)
    # A mask that ignores the prompt padding convention would not agree: attend to the pads.
    width = 29
    ids = torch.zeros((1, width + len(rows[3][1])), dtype=torch.long)
    ids[0, width - 1 :] = torch.tensor(rows[3][0] + rows[3][1])  # SHORT's first row, pads kept
    with torch.no_grad():
        logits = backend.model(input_ids=ids).logits[0, width - 1 : -1].float()[None]
    wrong = token_logprobs(logits, torch.tensor([rows[3][1]]), 1.0)[0]
    assert float((wrong - mus[3]).abs().max()) > 1e-3


def test_each_request_keeps_its_own_parameters(backend: TransformersBackend) -> None:
    stops = tuple("aeiou0123456789")
    requests = [
        SampleRequest(MID, 2, SamplingConfig(temperature=0.0, max_new_tokens=10)),
        SampleRequest(LONG, 3, SamplingConfig(temperature=0.7, top_k=5, max_new_tokens=6, seed=3)),
        SampleRequest(SHORT, 3, SamplingConfig(top_p=0.8, max_new_tokens=12, seed=4, stop=stops)),
        SampleRequest(MID, 4, SamplingConfig(temperature=1.3, max_new_tokens=8, seed=5)),
    ]
    results = backend.generate_many(requests)
    assert [len(r.completions) for r in results] == [2, 3, 3, 4]
    stopped_by_string = 0
    for request, result in zip(requests, results, strict=True):
        s = request.sampling
        for c in result.completions:
            assert c.sampling == s and c.policy_version == 0
            assert 1 <= len(c.token_ids) <= s.max_new_tokens
            if c.finish_reason == common_pb2.FINISH_REASON_LENGTH:
                assert len(c.token_ids) == s.max_new_tokens
            if s.temperature > 0:  # μ under this row's own temperature and truncation
                want = unpadded_teacher_forcing(backend, result.prompt_token_ids, c.token_ids, s)
                got = torch.tensor(c.behavior_logprobs)
                assert float((want - got).abs().max()) < 1e-5
            if s.stop and c.finish_reason == common_pb2.FINISH_REASON_STOP:
                assert any(c.text.endswith(x) for x in s.stop)
                assert not any(x in c.text[:-1] for x in s.stop)  # stopped at the first one
                stopped_by_string += 1
            elif s.stop:
                assert not any(x in c.text for x in s.stop)
    assert stopped_by_string >= 1
    # Greedy rows equal a greedy call of that prompt alone; the top-5 rows' μ are truncated
    # (≥ the full-softmax log-prob), the T = 1.3 rows are not.
    alone = backend.generate([MID], 1, requests[0].sampling)[0].completions[0]
    assert all(c.token_ids == alone.token_ids for c in results[0].completions)
    top5 = results[1].completions[0]
    full = unpadded_teacher_forcing(
        backend, results[1].prompt_token_ids, top5.token_ids, SamplingConfig(temperature=0.7)
    )
    assert bool((torch.tensor(top5.behavior_logprobs) >= full - 1e-6).all())


def test_a_requests_samples_do_not_depend_on_its_batch_mates(
    tiny_model_dir: Path, backend: TransformersBackend
) -> None:
    target = SampleRequest(MID, 4, SamplingConfig(temperature=1.0, max_new_tokens=16, seed=9))
    alone = backend.generate_many([target])[0]
    mates = [
        SampleRequest(LONG, 5, SamplingConfig(temperature=0.5, max_new_tokens=30, seed=1)),
        target,
        SampleRequest(SHORT, 2, SamplingConfig(temperature=0.0, max_new_tokens=3)),
    ]
    together = backend.generate_many(mates)[1]
    # Also when the backend cuts the call into padded batches of at most 6 rows.
    small = TransformersBackend(BackendConfig(model_path=str(tiny_model_dir), max_batch_rows=6))
    chunked = small.generate_many([mates[0], mates[2], target])[2]
    for other in (together, chunked):
        assert [c.token_ids for c in other.completions] == [c.token_ids for c in alone.completions]
        for a, b in zip(alone.completions, other.completions, strict=True):
            diff = (torch.tensor(a.behavior_logprobs) - torch.tensor(b.behavior_logprobs)).abs()
            assert float(diff.max()) < 1e-5
    # Different seeds in one call draw different samples.
    twin = SampleRequest(MID, 4, target.sampling.model_copy(update={"seed": 10}))
    pair = backend.generate_many([target, twin])
    assert [c.token_ids for c in pair[0].completions] != [c.token_ids for c in pair[1].completions]


def test_finish_reasons_are_per_row(tuned_model_dir: Path) -> None:
    backend = TransformersBackend(BackendConfig(model_path=str(tuned_model_dir)))
    greedy = SamplingConfig(temperature=0.0, max_new_tokens=8)
    results = backend.generate_many(
        [
            SampleRequest(TUNED_PROMPT, 2, greedy),  # "ok" + EOS
            SampleRequest(TUNED_PROMPT, 2, greedy.model_copy(update={"max_new_tokens": 1})),
            SampleRequest(TUNED_PROMPT, 1, greedy.model_copy(update={"stop": ("o",)})),
        ]
    )
    eos = backend.tokenizer.eos_token_id
    for c in results[0].completions:
        assert c.text == TUNED_COMPLETION and c.token_ids[-1] == eos
        assert c.finish_reason == common_pb2.FINISH_REASON_STOP
    for c in results[1].completions:
        assert c.text == TUNED_COMPLETION[0] and len(c.token_ids) == 1
        assert c.finish_reason == common_pb2.FINISH_REASON_LENGTH
    (stopped,) = results[2].completions
    assert stopped.text == "o" and stopped.finish_reason == common_pb2.FINISH_REASON_STOP


def test_a_call_never_mixes_policy_versions(
    backend: TransformersBackend, tuned_model_dir: Path
) -> None:
    greedy = SamplingConfig(temperature=0.0, max_new_tokens=120)
    requests = [SampleRequest(p, 4, greedy) for p in (TUNED_PROMPT, MID, LONG)]
    before = backend.generate_many(requests)
    out: list = []
    call = threading.Thread(target=lambda: out.append(backend.generate_many(requests)))
    call.start()
    wait_until(lambda: backend._lock.locked() or not call.is_alive(), timeout_s=30,
               interval_s=0.001, what="the call to take the backend")  # fmt: skip
    backend.load_weights(4, str(tuned_model_dir))  # waits for the call in flight
    call.join()
    assert backend.policy_version == 4
    (during,) = out
    for old, mid in zip(before, during, strict=True):  # every row: the old weights, version 0
        assert [c.token_ids for c in mid.completions] == [c.token_ids for c in old.completions]
        assert {c.policy_version for c in mid.completions} == {0}
    after = backend.generate_many(requests)
    assert {c.policy_version for r in after for c in r.completions} == {4}
    assert after[0].completions[0].text == TUNED_COMPLETION


def test_invalid_requests_name_their_index(backend: TransformersBackend) -> None:
    s = SamplingConfig(max_new_tokens=4)
    with pytest.raises(InvalidArgumentError, match="requests must not be empty"):
        backend.generate_many([])
    with pytest.raises(InvalidArgumentError, match=r"requests\[1\].n must be >= 1"):
        backend.generate_many([SampleRequest("a", 1, s), SampleRequest("b", 0, s)])
    with pytest.raises(InvalidArgumentError, match=r"requests\[0\] has an empty prompt"):
        backend.generate_many([SampleRequest("", 1, s)])
    too_long = SamplingConfig(max_new_tokens=backend.max_context_tokens)
    with pytest.raises(InvalidArgumentError, match=r"prompts\[1\] has 1 tokens.*context"):
        backend.generate_many([SampleRequest("a", 1, s), SampleRequest("b", 1, too_long)])
