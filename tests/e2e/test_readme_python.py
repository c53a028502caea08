"""The README's Python example, run exactly as written (extracted from README.md) as a script
with no ``__main__`` guard: ``score`` in three lines, then ``configs/gsm8k-chat.yaml`` run from
Python. That config trains the local chat model (a tiny Qwen2 with a byte-level BPE tokenizer
and a ChatML template, ``grpo model init --tokenizer bpe``) on GSM8K through its chat template
from a Parquet file; the held-out samples of the run record the rendered prompts, which carry
the template's markers.

The inputs are made as ``make gsm8k-chat-inputs`` makes them (a smaller model, the same
script); ``GRPO_RUN_*`` variables keep the run lean (the README's text is not changed)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LEAN = {
    "GRPO_RUN_DATA__TRAIN_SIZE": "64",
    "GRPO_RUN_DATA__HELDOUT_SIZE": "4",
    "GRPO_RUN_GENERATION__MAX_NEW_TOKENS": "12",
    "GRPO_RUN_EVAL__MAX_NEW_TOKENS": "12",
    "GRPO_RUN_LEARNER__BATCH_GROUPS": "2",
}
SYSTEM = 'Solve the problem step by step, then end with "The answer is N."'


def readme_python() -> str:
    """The one ```python block of README.md's "## Python" section."""
    section = (REPO / "README.md").read_text().split("\n## Python\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1, "README.md's Python section should hold one python block"
    return blocks[0]


def test_the_readme_python_example_trains_gsm8k_through_the_chat_template(
    tmp_path: Path, bpe_chat_model: Path
) -> None:
    (tmp_path / "configs").symlink_to(REPO / "configs")
    inputs = tmp_path / "runs" / "gsm8k-chat-inputs"
    shutil.copytree(bpe_chat_model, inputs / "model")
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"} | LEAN
    env["OMP_NUM_THREADS"] = "1"
    parquet = [sys.executable, str(REPO / "scripts" / "gsm8k_parquet.py")]
    subprocess.run(
        [*parquet, str(inputs / "gsm8k-train.parquet")],
        check=True, env=env, capture_output=True, timeout=120,
    )  # fmt: skip
    script = tmp_path / "readme_example.py"
    script.write_text(readme_python())
    out = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert out.stdout.splitlines()[0] == "ok 1.0", out.stdout

    run_dir = tmp_path / "runs" / "gsm8k-chat"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"] == "steps" and summary["steps"] == 2, summary
    for evaluation in ("sft", "final"):  # the initial policy is labelled "sft" (even without)
        rows = [json.loads(line) for line in (run_dir / "eval" / evaluation / "samples.jsonl")
                .read_text().splitlines()]  # fmt: skip
        assert len(rows) == 4 and all(r["status"] in ("ok", "no_answer") for r in rows), rows
        for row in rows:
            prompt = row["prompt"]
            assert prompt.startswith(f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n")
            assert prompt.endswith("<|im_end|>\n<|im_start|>assistant\n"), prompt
            assert "<|im_" not in row["response"]  # the turn marker ends it, not in the text
