"""The transformers backend: samples, behavior log-probs, finish reasons, offsets, weights."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from grpo.errors import ContractError, InvalidArgumentError, NotFoundError
from grpo.services.generation.backend import SamplingConfig, derived_seed
from grpo.services.generation.transformers_backend import TransformersBackend
from grpo.v1 import common_pb2

from .conftest import TUNED_COMPLETION, TUNED_PROMPT

PROMPTS = ["47+38=", "1+2=", "hello world\n"]


def teacher_forced_logprobs(
    backend: TransformersBackend,
    prompt_ids: list[int],
    token_ids: list[int],
    sampling: SamplingConfig,
) -> torch.Tensor:
    """log-probs [L] of ``token_ids`` after ``prompt_ids`` from one unpadded forward, under the
    tempered and top-k/top-p-truncated distribution."""
    ids = torch.tensor([prompt_ids + token_ids])
    with torch.no_grad():
        logits = backend.model(ids).logits[0].float() / sampling.temperature
    logits = logits[len(prompt_ids) - 1 : len(prompt_ids) - 1 + len(token_ids)]  # [L, V]
    if sampling.top_k:
        kth = torch.topk(logits, sampling.top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    logp = torch.log_softmax(logits, dim=-1)
    return logp.gather(-1, torch.tensor(token_ids)[:, None]).squeeze(-1)


@pytest.mark.parametrize(
    "sampling",
    [
        SamplingConfig(temperature=1.0, max_new_tokens=24, seed=3),
        SamplingConfig(temperature=0.7, max_new_tokens=24, seed=4),
        SamplingConfig(temperature=0.7, top_k=5, max_new_tokens=24, seed=5),
    ],
    ids=["T1.0", "T0.7", "T0.7-top5"],
)
def test_behavior_logprobs_match_teacher_forcing(
    backend: TransformersBackend, sampling: SamplingConfig
) -> None:
    results = backend.generate(PROMPTS, 4, sampling)
    assert len(results) == len(PROMPTS)
    for i, (prompt, res) in enumerate(zip(PROMPTS, results, strict=True)):
        assert res.prompt_token_ids == backend.encode(prompt)
        assert len(res.completions) == 4
        for c in res.completions:
            assert len(c.token_ids) == len(c.behavior_logprobs) == len(c.token_char_offsets)
            expected = teacher_forced_logprobs(backend, res.prompt_token_ids, c.token_ids, sampling)
            got = torch.tensor(c.behavior_logprobs)
            assert torch.allclose(got, expected, atol=1e-4, rtol=0), (got - expected).abs().max()
            # Prompt 0 keeps the seed; the others record the seed derived for them.
            assert c.sampling == (sampling if i == 0 else sampling.model_copy(update={
                "seed": derived_seed(sampling.seed, f"prompt-{i}")}))  # fmt: skip
            assert c.policy_version == 0
    # Different rows really are different samples (4 x 24 random chars cannot all coincide).
    assert len({tuple(c.token_ids) for c in results[0].completions}) > 1


def test_seed_reproduces_and_top_p_keeps_only_the_nucleus(backend: TransformersBackend) -> None:
    s = SamplingConfig(temperature=1.0, max_new_tokens=16, seed=11)
    a = backend.generate(PROMPTS[:1], 3, s)[0].completions
    b = backend.generate(PROMPTS[:1], 3, s)[0].completions
    assert [c.token_ids for c in a] == [c.token_ids for c in b]
    greedy = backend.generate(PROMPTS[:1], 2, SamplingConfig(temperature=0, max_new_tokens=16))
    tiny_p = backend.generate(PROMPTS[:1], 2, SamplingConfig(top_p=1e-6, max_new_tokens=16, seed=2))
    # A vanishing nucleus keeps only the most likely token: greedy, with μ = log 1 = 0.
    assert tiny_p[0].completions[0].token_ids == greedy[0].completions[0].token_ids
    assert all(
        lp == pytest.approx(0.0, abs=1e-6) for lp in tiny_p[0].completions[0].behavior_logprobs
    )


def test_offsets_rebuild_text_and_length_finish(backend: TransformersBackend) -> None:
    results = backend.generate(PROMPTS, 3, SamplingConfig(max_new_tokens=12, seed=1))
    tok = backend.tokenizer
    for res in results:
        for c in res.completions:
            ends = [*c.token_char_offsets[1:], len(c.text)]
            pieces = [c.text[s:e] for s, e in zip(c.token_char_offsets, ends, strict=True)]
            assert "".join(pieces) == c.text
            for tid, piece in zip(c.token_ids, pieces, strict=True):
                assert piece == tok.decode([tid], skip_special_tokens=True)
            if c.finish_reason == common_pb2.FINISH_REASON_LENGTH:
                assert len(c.token_ids) == 12


def test_stop_string_ends_generation_at_first_occurrence(backend: TransformersBackend) -> None:
    greedy = SamplingConfig(temperature=0, max_new_tokens=20)
    text = backend.generate(["47+38="], 1, greedy)[0].completions[0].text
    stop = text[2]
    c = backend.generate(["47+38="], 1, greedy.model_copy(update={"stop": (stop,)}))[0].completions[
        0
    ]
    assert c.finish_reason == common_pb2.FINISH_REASON_STOP
    assert c.text == text[: text.index(stop) + 1]


def test_eos_stop_and_load_weights_change_outputs_and_version(
    backend: TransformersBackend, tuned_model_dir: Path
) -> None:
    greedy = SamplingConfig(temperature=0, max_new_tokens=10)
    before = backend.generate([TUNED_PROMPT], 2, greedy)[0].completions
    assert before[0].policy_version == 0
    assert before[0].text != TUNED_COMPLETION
    load_s = backend.load_weights(1, str(tuned_model_dir))
    assert load_s >= 0 and backend.policy_version == 1
    after = backend.generate([TUNED_PROMPT], 2, greedy)[0].completions
    for c in after:
        assert c.text == TUNED_COMPLETION
        assert c.finish_reason == common_pb2.FINISH_REASON_STOP
        assert c.token_ids[-1] == backend.tokenizer.eos_token_id
        assert c.token_char_offsets[-1] == len(c.text)  # EOS is zero-width
        assert c.policy_version == 1
    with pytest.raises(InvalidArgumentError, match="older"):
        backend.load_weights(0, str(tuned_model_dir))


def test_load_weights_rejects_missing_and_mismatched(
    backend: TransformersBackend, tmp_path: Path
) -> None:
    from grpo.model import init_tiny_model

    with pytest.raises(NotFoundError):
        backend.load_weights(1, str(tmp_path))
    other = init_tiny_model(tmp_path / "wide", hidden=96, layers=2)
    with pytest.raises(ContractError, match="shape"):
        backend.load_weights(1, str(other))
    assert backend.policy_version == 0


def test_invalid_requests(backend: TransformersBackend) -> None:
    s = SamplingConfig(max_new_tokens=8)
    with pytest.raises(InvalidArgumentError, match="n must be"):
        backend.generate(["a"], 0, s)
    with pytest.raises(InvalidArgumentError, match=r"prompts\[1\] is empty"):
        backend.generate(["a", ""], 1, s)
    with pytest.raises(InvalidArgumentError, match="context"):
        backend.generate(["a"], 1, SamplingConfig(max_new_tokens=backend.max_context_tokens))


def test_prefix_offsets_with_partial_characters() -> None:
    from grpo.services.generation.backend import prefix_char_offsets

    # A byte-level tokenizer can decode a prefix ending inside a character as U+FFFD: that
    # token has emitted nothing yet, and offsets never move backwards.
    text = "aé!"
    assert prefix_char_offsets(["", "a", "a\ufffd", "aé"], text) == [0, 1, 1, 2]
    assert prefix_char_offsets(["", "ab"], "ab") == [0, 2]
