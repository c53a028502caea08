"""``scripts/gpu-check.sh --dry-run``: the GPU check's every case on the CPU with tiny shapes,
as the script runs it (so the GPU version cannot rot between lent machines), and its FLOP
count."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from bench.gpu_check import DRY, FULL, LORA_TARGETS, train_flops

REPO = Path(__file__).resolve().parents[2]


def test_dry_run_runs_every_case_through_the_script(tmp_path: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GPU_CHECK_TIMEOUT_S": "240"}
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "gpu-check.sh"), "--dry-run", "--out", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads((tmp_path / "gpu-check.json").read_text())
    cases = result["cases"]
    assert list(cases) == ["learner", "learner_mixed", "fsdp", "lora", "generation"]
    assert not [name for name, r in cases.items() if "error" in r]
    rows = DRY.prompts * DRY.group
    for name in ("learner", "learner_mixed", "fsdp", "lora"):
        r = cases[name]
        assert r["rows"] == rows and r["loss_finite"] and r["trained_rows_skipped"] == 0
        assert r["tokens_per_s"] > 0 and r["step_s_range"][0] <= r["step_s"]
        assert rows * DRY.prompt_len < r["tokens_per_step"] <= rows * (DRY.prompt_len + 16)
    assert cases["fsdp"]["sharded"] is True
    assert cases["learner_mixed"]["precision"] == {
        "params": "float32",
        "autocast": "bfloat16",
        "lora": "off",
    }
    assert cases["learner"]["achieved_tflops"] > 0 and cases["learner"]["mfu"] is None  # CPU
    # LoRA trains r·(in + out) per adapted projection and layer, nothing else.
    h, kv = DRY.hidden, DRY.kv_heads * DRY.hidden // DRY.heads
    shapes = {"q_proj": (h, h), "k_proj": (h, kv), "v_proj": (h, kv), "o_proj": (h, h),
              "gate_proj": (h, DRY.intermediate), "up_proj": (h, DRY.intermediate),
              "down_proj": (DRY.intermediate, h)}  # fmt: skip
    assert set(shapes) == set(LORA_TARGETS)
    per_layer = sum(DRY.lora_r * (i + o) for i, o in shapes.values())
    assert cases["lora"]["trained_parameters"] == DRY.layers * per_layer
    gen = cases["generation"]
    assert gen["batch_rows"] == DRY.gen_prompts * DRY.gen_group
    assert 0 < gen["generated_tokens"] <= gen["batch_rows"] * DRY.gen_new_tokens
    assert proc.stdout.splitlines()[-8].startswith("| case |")  # the table comes last


def test_train_flops_counts_matmuls_and_causal_attention() -> None:
    # one row of 10 tokens, 100 matmul weights, 2 layers of attention width 8
    assert train_flops(100, 2, 8, [10]) == 6 * 100 * 10 + 6 * 2 * 8 * 100
    assert train_flops(100, 2, 8, [10, 10]) == 2 * train_flops(100, 2, 8, [10])


def test_the_full_shape_is_qwen2_5_0_5b() -> None:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=FULL.vocab, hidden_size=FULL.hidden, intermediate_size=FULL.intermediate,
        num_hidden_layers=FULL.layers, num_attention_heads=FULL.heads,
        num_key_value_heads=FULL.kv_heads, tie_word_embeddings=True,
    )  # fmt: skip
    with pytest.MonkeyPatch.context() as mp:
        import torch

        mp.setattr(torch.nn.Linear, "reset_parameters", lambda self: None)
        mp.setattr(torch.nn.Embedding, "reset_parameters", lambda self: None)
        with torch.device("meta"):
            model = Qwen2ForCausalLM(config)
    params = sum(p.numel() for p in model.parameters())
    assert 490e6 < params < 500e6  # Qwen2.5-0.5B: 494 M
