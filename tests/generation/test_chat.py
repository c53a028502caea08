"""The local chat model (``grpo model init --tokenizer bpe``) loads like a hub model, and
generation stops at its chat template's end-of-turn token, which is not its EOS."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from grpo.chat import (
    END_OF_TURN,
    assistant_turn_suffix,
    end_of_turn_ids,
    has_chat_template,
    render_prompt,
)
from grpo.errors import FailedPreconditionError
from grpo.learner.sft import _encode_examples, run_sft, turn_end_ids
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
    """Taught by SFT under the chat template to answer 'ok', the model's greedy completion stops at
    <|im_end|> (finish STOP, the token kept in token_ids, not in the text) instead of running
    on to its EOS or the length limit."""
    torch.set_num_threads(1)
    tok = load_tokenizer(bpe_chat_model)
    prompt = render_prompt(tok, "Say ok.")
    tuned = tmp_path / "tuned"
    # the plain completion: SFT ends it as the template ends an assistant turn
    run_sft(bpe_chat_model, [(prompt, "ok")] * 8, out_dir=tuned, steps=60,
            lr=1e-2, batch_size=8, warmup_steps=5, chat_template=True)  # fmt: skip
    backend = TransformersBackend(BackendConfig(model_path=str(tuned)))
    [result] = backend.generate([prompt], 1, SamplingConfig(temperature=0.0, max_new_tokens=12))
    [completion] = result.completions
    im_end = tok.convert_tokens_to_ids(END_OF_TURN)
    assert completion.token_ids[-1] == im_end and im_end != tok.eos_token_id
    assert completion.finish_reason == common_pb2.FINISH_REASON_STOP
    assert completion.text == "ok" and len(completion.token_ids) < 12


def test_sft_targets_end_as_the_chat_template_ends_an_assistant_turn(bpe_chat_model: Path) -> None:
    """Under a chat template an SFT target is the assistant turn as the template renders it
    (``<|im_end|>\\n`` here, read from a rendered conversation), not the completion + EOS."""
    tok = load_tokenizer(bpe_chat_model)
    assert assistant_turn_suffix(tok) == END_OF_TURN + "\n"
    end = turn_end_ids(tok, chat_template=True)
    assert end == tok(END_OF_TURN + "\n", add_special_tokens=False)["input_ids"]
    assert tok.eos_token_id not in end  # <|endoftext|> is never a turn's end
    assert turn_end_ids(tok, chat_template=False) == [tok.eos_token_id]
    prompt = render_prompt(tok, "What is 2+3?")
    [(ids, prompt_len)] = _encode_examples(tok, [(prompt, "2+3=5:5")], end)
    conversation = tok.apply_chat_template(
        [{"role": "user", "content": "What is 2+3?"}, {"role": "assistant", "content": "2+3=5:5"}],
        tokenize=False,
    )
    assert tok.decode(ids) == conversation  # prompt + target = the whole rendered conversation
    assert tok.decode(ids[prompt_len:]) == "2+3=5:5" + END_OF_TURN + "\n"
    with pytest.raises(FailedPreconditionError, match="no chat template"):
        turn_end_ids(build_char_tokenizer(), chat_template=True)


def test_the_warm_start_of_a_chat_run_ends_targets_with_the_turn(
    bpe_chat_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``grpo run``'s SFT (``warm_start``) tells ``run_sft`` when its prompts went through the
    chat template (arithmetic worked solutions on a chat model), and not for plain ones."""
    import grpo.learner.sft as sft_module
    from grpo.local.policy import warm_start
    from grpo.services.settings.run import RunConfig
    from grpo.services.tasks.run_tasks import load_run_tasks

    seen: list[dict] = []

    def fake_run_sft(model: Path, examples: list, **kw: object) -> sft_module.SftResult:
        seen.append({"examples": examples, **kw})
        return sft_module.SftResult(steps=1, epochs=0.1, final_loss=1.0, completion_tokens=1,
                                    wall_s=0.0, cpu_s=0.0)  # fmt: skip

    monkeypatch.setattr(sft_module, "run_sft", fake_run_sft)
    data = {"source": "arith", "train_size": 4, "heldout_size": 2}
    sft = {"enabled": True, "examples": 4, "steps": 1, "target_accuracy": 0.0}
    chat = RunConfig.model_validate(
        {"data": data, "model": {"path": str(bpe_chat_model), "sft": sft}}
    )
    tasks = load_run_tasks(chat)
    assert tasks.chat_template and tasks.sft[0][0].endswith("<|im_start|>assistant\n")
    warm_start(chat, bpe_chat_model, tasks, tmp_path / "chat", lambda _line: None)
    plain = RunConfig.model_validate(
        {"data": {**data, "chat": {"template": "none"}},
         "model": {"path": str(bpe_chat_model), "sft": sft}}
    )  # fmt: skip
    plain_tasks = load_run_tasks(plain)
    assert not plain_tasks.chat_template
    warm_start(plain, bpe_chat_model, plain_tasks, tmp_path / "plain", lambda _line: None)
    assert [call["chat_template"] for call in seen] == [True, False]
