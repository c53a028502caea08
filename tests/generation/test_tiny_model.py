"""The tiny model and its character tokenizer."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from grpo.errors import InvalidArgumentError, NotFoundError
from grpo.model import init_tiny_model, load_tokenizer


def test_tokenizer_round_trips_spaces_newlines_and_every_char(tiny_model_dir: Path) -> None:
    tok = load_tokenizer(tiny_model_dir)
    text = "a b\n\tc  47+38=7+8=15,4+3+1=8:85 ~!{}"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert len(ids) == len(text)  # one token per character
    assert tok.decode(ids) == text
    assert tok.convert_ids_to_tokens(tok(" \n", add_special_tokens=False)["input_ids"]) == [
        " ",
        "\n",
    ]
    assert tok.decode([*ids, tok.eos_token_id], skip_special_tokens=True) == text
    assert (tok.pad_token_id, tok.eos_token_id) == (0, 1)


def test_default_model_size_and_determinism(tmp_path: Path) -> None:
    a = AutoModelForCausalLM.from_pretrained(str(init_tiny_model(tmp_path / "a", seed=3)))
    b = AutoModelForCausalLM.from_pretrained(str(init_tiny_model(tmp_path / "b", seed=3)))
    params = sum(p.numel() for p in a.parameters())
    assert 0.9e6 < params < 4e6
    assert a.config.model_type == "qwen2"
    for (name, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters(), strict=True):
        assert torch.equal(pa, pb), name


def test_bad_sizes_and_missing_tokenizer(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="multiple of heads"):
        init_tiny_model(tmp_path / "x", hidden=100, heads=3)
    with pytest.raises(InvalidArgumentError, match="layers"):
        init_tiny_model(tmp_path / "x", layers=0)
    with pytest.raises(NotFoundError, match=r"tokenizer\.json"):
        load_tokenizer(tmp_path)


def test_a_padded_vocabulary_in_bf16(tmp_path: Path) -> None:
    """The GPU check's model: a vocabulary padded past the tokenizer's, saved in bf16; ids
    past the tokenizer decode to nothing (as a released checkpoint's padding rows do)."""
    folder = init_tiny_model(
        tmp_path / "m", hidden=32, layers=1, vocab_size=600, dtype=torch.bfloat16
    )
    model = AutoModelForCausalLM.from_pretrained(str(folder))
    assert model.config.vocab_size == 600 and model.lm_head.weight.shape[0] == 600
    assert model.dtype == torch.bfloat16
    tok = load_tokenizer(folder)
    assert len(tok) < 600 and tok.decode([40, 599, 41]) == tok.decode([40, 41])
    with pytest.raises(InvalidArgumentError, match="vocab_size"):
        init_tiny_model(tmp_path / "x", vocab_size=10)
