"""Fixtures of the learner-service tests: the tiny model and synthetic groups scored by rule.

Groups are built the way the pipeline builds them: arithmetic prompts from the char-level
tokenizer, responses sampled from the tiny model at temperature 1 (so the behavior log-probs μ
are the real sampling log-probs), outcome reward 1 when the text after ':' is the right sum.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from grpo.v1 import common_pb2

torch.set_num_threads(1)

GroupFactory = Callable[..., list[common_pb2.Group]]


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A freshly initialised tiny Qwen2 checkpoint (seed 0) with its char tokenizer."""
    from grpo.model import init_tiny_model

    return init_tiny_model(
        tmp_path_factory.mktemp("tiny") / "model",
        seed=0,
        hidden=64,
        layers=2,
        heads=4,
        kv_heads=2,
        intermediate=128,
        max_positions=128,
    )


def _sample_groups(
    model_dir: Path,
    *,
    num_groups: int,
    group_size: int,
    seed: int,
    max_new_tokens: int,
    prefix: str,
) -> list[common_pb2.Group]:
    from transformers import AutoModelForCausalLM

    from grpo.model import load_tokenizer

    tok = load_tokenizer(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    rng = random.Random(seed)
    torch.manual_seed(seed)
    groups = []
    for p in range(num_groups):
        a, b = rng.randint(10, 99), rng.randint(10, 999)
        prompt = f"{a}+{b}="
        ids = tok(prompt)["input_ids"]
        # Sample the G members together with a KV cache (same prompt: no padding needed).
        seqs = [[] for _ in range(group_size)]
        mus: list[list[float]] = [[] for _ in range(group_size)]
        done = [False] * group_size
        with torch.no_grad():
            out = model(input_ids=torch.tensor([ids] * group_size), use_cache=True)
            for _ in range(max_new_tokens):
                logp = torch.log_softmax(out.logits[:, -1].float(), dim=-1)
                nxt = torch.multinomial(logp.exp(), 1)  # (G, 1)
                for i in range(group_size):
                    if not done[i]:
                        tok_i = int(nxt[i])
                        seqs[i].append(tok_i)
                        mus[i].append(float(logp[i, tok_i]))
                        done[i] = tok_i == tok.eos_token_id
                if all(done):
                    break
                out = model(input_ids=nxt, cache=out.past_key_values, use_cache=True)
        members = []
        for i in range(group_size):
            seq = list(ids) + seqs[i]
            mu = mus[i]
            finish = common_pb2.FINISH_REASON_STOP if done[i] else common_pb2.FINISH_REASON_LENGTH
            resp = seq[len(ids) :]
            text = "".join(
                tok.convert_ids_to_tokens(t) if t != tok.eos_token_id else "" for t in resp
            )
            offsets, pos = [], 0
            for t in resp:
                offsets.append(pos)
                pos += 0 if t == tok.eos_token_id else 1
            reward = 1.0 if text.split(":")[-1].strip() == str(a + b) else 0.0
            # Make the groups mixed so advantages are not all zero.
            if i == 0:
                reward = 1.0
            rollout = common_pb2.Rollout(
                group_id=f"{prefix}g{p}",
                index=i,
                group_size=group_size,
                prompt_id=f"{prefix}p{p}",
                task=common_pb2.Task(id=f"{prefix}p{p}", type="arith", prompt=prompt),
                prompt_token_ids=ids,
                completion=common_pb2.Completion(
                    text=text,
                    token_ids=resp,
                    behavior_logprobs=mu,
                    token_char_offsets=offsets,
                    finish_reason=finish,
                    policy_version=0,
                ),
            )
            outcome = common_pb2.Score(status=common_pb2.SCORE_STATUS_OK, reward=reward)
            steps = []
            if len(text) >= 4:
                steps = [
                    common_pb2.StepScore(
                        char_start=0, char_end=2, status=common_pb2.STEP_STATUS_VALID, reward=1.0
                    ),
                    common_pb2.StepScore(
                        char_start=2,
                        char_end=len(text),
                        status=common_pb2.STEP_STATUS_INVALID,
                        reward=-1.0,
                    ),
                ]
            process = common_pb2.Score(status=common_pb2.SCORE_STATUS_OK, steps=steps)
            members.append(
                common_pb2.ScoredRollout(rollout=rollout, outcome=outcome, process=process)
            )
        groups.append(
            common_pb2.Group(
                group_id=f"{prefix}g{p}",
                prompt_id=f"{prefix}p{p}",
                group_size=group_size,
                members=members,
                status=common_pb2.GROUP_STATUS_COMPLETE,
                straggler_wait_s=0.01 * p,
            )
        )
    return groups


@pytest.fixture(scope="session")
def make_groups(tiny_model_dir: Path) -> GroupFactory:
    """Factory ``make_groups(num_groups=4, group_size=4, seed=0, max_new_tokens=12, prefix="")``.

    Returns fresh protobuf copies each call (tests may mutate them); results are cached per
    argument tuple because sampling costs ~0.1 s per group.
    """
    cache: dict[tuple, list[bytes]] = {}

    def factory(
        num_groups: int = 4,
        group_size: int = 4,
        seed: int = 0,
        max_new_tokens: int = 12,
        prefix: str = "",
    ) -> list[common_pb2.Group]:
        key = (num_groups, group_size, seed, max_new_tokens, prefix)
        if key not in cache:
            groups = _sample_groups(
                tiny_model_dir,
                num_groups=num_groups,
                group_size=group_size,
                seed=seed,
                max_new_tokens=max_new_tokens,
                prefix=prefix,
            )
            cache[key] = [g.SerializeToString() for g in groups]
        return [common_pb2.Group.FromString(b) for b in cache[key]]

    return factory
