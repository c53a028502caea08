"""The local chat model (``grpo model init --tokenizer bpe``) loads like a hub model, and
generation stops at its chat template's end-of-turn token, which is not its EOS."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from grpo.chat import END_OF_TURN, end_of_turn_ids, has_chat_template, render_prompt
from grpo.learner.sft import run_sft
from grpo.model import build_char_tokenizer, load_tokenizer
from grpo.services.generation.backend import BackendConfig, SamplingConfig
from grpo.services.generation.transformers_backend import TransformersBackend
from grpo.v1 import common_pb2


def test_the_bpe_chat_model_loads_through_from_pretrained_like_a_hub_model(
    bpe_chat_model: Path, data_dir: Path
) -> None:
    config = json.loads((bpe_chat_model / "tokenizer_config.json").read_text())
    assert "<|im_start|>" in config["chat_template"]  # in tokenizer_config.json itself
    ours, auto = load_tokenizer(bpe_chat_model), AutoTokenizer.from_pretrained(bpe_chat_model)
    model = AutoModelForCausalLM.from_pretrained(bpe_chat_model)
    assert model.config.model_type == "qwen2" and model.config.vocab_size == len(ours) == 512
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]
    text = render_prompt(ours, "2+2?", system="Be brief.")
    assert text == auto.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    ids = ours(text, add_special_tokens=False)["input_ids"]
    assert ids[0] == ours.convert_tokens_to_ids("<|im_start|>") and ours.decode(ids) == text
    # byte-level BPE: any text round-trips, merges learned from GSM8K shorten it
    row = json.loads((data_dir / "gsm8k" / "test.jsonl").read_text().splitlines()[0])
    sample = row["question"] + "\n" + row["answer"] + " ½ — café"
    encoded = ours(sample, add_special_tokens=False)["input_ids"]
    assert ours.decode(encoded) == sample and len(encoded) < 0.6 * len(sample.encode())
    assert ours.eos_token == "<|endoftext|>"
    assert end_of_turn_ids(ours) == {ours.convert_tokens_to_ids(END_OF_TURN)} != {ours.eos_token_id}
    assert (
        not has_chat_template(build_char_tokenizer())
        and end_of_turn_ids(build_char_tokenizer()) == set()
    )


def test_generation_stops_at_the_end_of_turn_token(bpe_chat_model: Path, tmp_path: Path) -> None:
    """Taught to answer 'ok' and end its turn, the model's greedy completion stops at
    <|im_end|> (finish STOP, the token kept in token_ids, not in the text) instead of running
    on to its EOS or the length limit."""
    torch.set_num_threads(1)
    tok = load_tokenizer(bpe_chat_model)
    prompt = render_prompt(tok, "Say ok.")
    tuned = tmp_path / "tuned"
    run_sft(bpe_chat_model, [(prompt, "ok" + END_OF_TURN)] * 8, out_dir=tuned, steps=60,
            lr=1e-2, batch_size=8, warmup_steps=5)  # fmt: skip
    backend = TransformersBackend(BackendConfig(model_path=str(tuned)))
    [result] = backend.generate([prompt], 1, SamplingConfig(temperature=0.0, max_new_tokens=12))
    [completion] = result.completions
    im_end = tok.convert_tokens_to_ids(END_OF_TURN)
    assert completion.token_ids[-1] == im_end and im_end != tok.eos_token_id
    assert completion.finish_reason == common_pb2.FINISH_REASON_STOP
    assert completion.text == "ok" and len(completion.token_ids) < 12
