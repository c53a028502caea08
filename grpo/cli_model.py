"""``grpo model ...``: make the tiny local model, write arithmetic SFT data, warm-start by SFT.

- ``grpo model init OUT_DIR``: a random tiny Qwen2 + character tokenizer
  (``grpo.model.init_tiny_model``); ``--tokenizer bpe``: a byte-level BPE tokenizer trained on
  GSM8K's training text from the data folder, with Qwen's special tokens and a ChatML chat
  template in ``tokenizer_config.json`` (``grpo.model.build_bpe_tokenizer``).
- ``grpo model arith-data OUT.jsonl --n 20000``: worked-solution pairs for addition
  (``grpo.services.tasks.datasets.arith_tasks``), one ``{"prompt", "completion"}`` object per line.
- ``grpo model sft OUT_DIR --data FILE.jsonl``: SFT in place (``grpo.learner.sft.run_sft``);
  ``--eval-arith N`` then prints greedy accuracy on N held-out arithmetic tasks.
- ``grpo model fetch --from SOURCE --dest DIR``: put an initial policy in place from a folder,
  a hub repository or object storage (``grpo.services.runtime.model_source``; the Helm chart's
  learner init container).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

__all__ = ["app"]

app = typer.Typer(
    name="model",
    help="Tiny local model: init, SFT data, SFT; fetch an initial policy.",
    no_args_is_help=True,
)
_console = Console(soft_wrap=True)


def _quiet_torch() -> None:
    """One torch thread (DESIGN.md) and no Hugging Face progress bars in CLI output."""
    import torch
    from transformers.utils import logging as hf_logging

    torch.set_num_threads(1)
    hf_logging.disable_progress_bar()


@app.command("init")
def init(
    out_dir: Annotated[Path, typer.Argument(help="Folder to write the checkpoint to.")],
    seed: Annotated[int, typer.Option(help="Weight initialisation seed.")] = 0,
    hidden: Annotated[int, typer.Option(help="Hidden size.")] = 128,
    layers: Annotated[int, typer.Option(help="Decoder layers.")] = 4,
    heads: Annotated[int, typer.Option(help="Attention heads.")] = 4,
    kv_heads: Annotated[int, typer.Option(help="Key/value heads.")] = 2,
    intermediate: Annotated[int, typer.Option(help="MLP inner size.")] = 512,
    max_positions: Annotated[int, typer.Option(help="Context length (tokens).")] = 512,
    tokenizer: Annotated[
        str,
        typer.Option(
            help="char: one token per character; bpe: byte-level BPE trained on GSM8K's "
            "training text, with a ChatML chat template (a small Qwen-like chat model)."
        ),
    ] = "char",
    vocab_size: Annotated[
        int, typer.Option(min=512, help="bpe: tokens in all (bytes, merges and specials).")
    ] = 1024,
) -> None:
    """Write a random tiny Qwen2 model with a character-level or a byte-level BPE tokenizer."""
    from transformers import AutoModelForCausalLM

    from grpo.model import build_bpe_tokenizer, init_tiny_model

    if tokenizer not in ("char", "bpe"):
        raise typer.BadParameter(f"{tokenizer!r}: choose char or bpe", param_hint="'--tokenizer'")
    _quiet_torch()
    tok = None
    if tokenizer == "bpe":
        from grpo.services.tasks.datasets import load_gsm8k

        rows = load_gsm8k("train", prompt_template="{question}")
        texts = [text for t in rows for text in (t.prompt, t.metadata["solution"])]
        tok = build_bpe_tokenizer(texts, vocab_size=vocab_size, max_length=max_positions)
    path = init_tiny_model(
        out_dir, seed=seed, hidden=hidden, layers=layers, heads=heads, kv_heads=kv_heads,
        intermediate=intermediate, max_positions=max_positions, tokenizer=tok,
    )  # fmt: skip
    params = sum(p.numel() for p in AutoModelForCausalLM.from_pretrained(str(path)).parameters())
    what = "character" if tok is None else f"byte-level BPE ({len(tok)} tokens, chat template)"
    _console.print(f"wrote {path} ({params / 1e6:.2f} M parameters, {what} tokenizer)")


@app.command("arith-data")
def arith_data(
    out_file: Annotated[Path, typer.Argument(help="JSONL file to write.")],
    n: Annotated[int, typer.Option(help="Number of distinct problems.")] = 20000,
    seed: Annotated[int, typer.Option(help="Generator seed.")] = 1,
    min_digits: Annotated[int, typer.Option(help="Fewest digits per operand.")] = 2,
    max_digits: Annotated[int, typer.Option(help="Most digits per operand.")] = 3,
    ops: Annotated[str, typer.Option(help="Operations to draw from, e.g. '+-'.")] = "+",
) -> None:
    """Write worked-solution SFT pairs for arithmetic."""
    from grpo.services.tasks.datasets import arith_tasks, worked_examples

    tasks = arith_tasks(n, seed=seed, min_digits=min_digits, max_digits=max_digits, ops=list(ops))
    out_file.parent.mkdir(parents=True, exist_ok=True)
    with out_file.open("w", encoding="utf-8") as fh:
        for prompt, completion in worked_examples(tasks):
            fh.write(json.dumps({"prompt": prompt, "completion": completion}) + "\n")
    _console.print(f"wrote {len(tasks)} examples to {out_file}")


def _read_pairs(path: Path) -> list[tuple[str, str]]:
    pairs = []
    with path.open(encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            if "prompt" not in row or "completion" not in row:
                raise typer.BadParameter(f"{path}:{line_no} needs 'prompt' and 'completion'")
            pairs.append((row["prompt"], row["completion"]))
    return pairs


@app.command("sft")
def sft(
    model_dir: Annotated[Path, typer.Argument(help="Model folder; tuned weights are saved here.")],
    data: Annotated[Path, typer.Option(help="JSONL with 'prompt' and 'completion' per line.")],
    steps: Annotated[int | None, typer.Option(help="Optimizer steps.")] = None,
    epochs: Annotated[float | None, typer.Option(help="Passes over the data.")] = None,
    time_budget_s: Annotated[
        float | None, typer.Option(help="Wall-clock budget (seconds).")
    ] = None,
    lr: Annotated[float, typer.Option(help="Peak learning rate.")] = 3e-3,
    batch_size: Annotated[int, typer.Option(help="Examples per step.")] = 32,
    seed: Annotated[int, typer.Option(help="Shuffle seed.")] = 0,
    eval_arith: Annotated[
        int, typer.Option(help="Then report greedy accuracy on N held-out sums.")
    ] = 0,
) -> None:
    """Supervised warm start (loss on completion tokens only)."""
    from grpo.learner.sft import run_sft

    _quiet_torch()
    if steps is None and epochs is None and time_budget_s is None:
        epochs = 1.0
    pairs = _read_pairs(data)
    result = run_sft(
        model_dir, pairs, steps=steps, epochs=epochs, time_budget_s=time_budget_s, lr=lr,
        batch_size=batch_size, seed=seed,
        on_log=lambda step, loss: _console.print(f"step {step:5d}  loss {loss:.4f}"),
    )  # fmt: skip
    _console.print(
        f"SFT: {result.steps} steps, {result.epochs:.2f} epochs, loss {result.final_loss:.4f}, "
        f"{result.wall_s:.1f} s"
    )
    if eval_arith:
        from grpo.services.evaluation.evaluate import EvalSettings, evaluate_model
        from grpo.services.evaluation.scorers import LocalScorer
        from grpo.services.generation.backend import SamplingConfig
        from grpo.services.tasks.datasets import arith_tasks

        seen = {"arith/" + prompt.removesuffix("=") for prompt, _ in pairs}
        held = arith_tasks(eval_arith, seed=10_007, exclude_ids=seen)
        greedy = EvalSettings(sampling=SamplingConfig(temperature=0.0, max_new_tokens=64))
        math = LocalScorer.from_service("verifier-math", {"verifier": {"pool": {"workers": 1}}})
        with math:
            acc = evaluate_model(model_dir, held, math, greedy)
        _console.print(
            f"greedy accuracy on {acc.total} held-out tasks (math verifier): {acc.accuracy:.3f}"
        )


@app.command("fetch")
def fetch(
    source: Annotated[
        str,
        typer.Option(
            "--from",
            help="A folder (/...), hf://<org>/<name>[@revision] ($HF_TOKEN, $HF_ENDPOINT) or "
            "s3://<bucket>/<prefix> (boto3: the environment's credentials, $AWS_ENDPOINT_URL).",
        ),
    ],
    dest: Annotated[Path, typer.Option("--dest", help="Folder to put the model in.")],
    only_rank0: Annotated[
        bool,
        typer.Option(
            "--only-rank0",
            help="Do nothing when $RANK is set and not 0 (data-parallel learner ranks > 0 get "
            "the model from rank 0).",
        ),
    ] = False,
) -> None:
    """Put a save_pretrained folder at DEST (copied into a sibling folder, renamed into place
    once complete, DIGESTS.json written); an intact DEST is kept as it is."""
    import logging
    import os

    from grpo.services.runtime.logging import configure_logging
    from grpo.services.runtime.model_source import fetch_model

    configure_logging("INFO", json=True)
    rank = os.environ.get("RANK", "")
    if only_rank0 and rank not in ("", "0"):
        logging.getLogger(__name__).info("rank %s: the model comes from rank 0; nothing fetched",
                                         rank)  # fmt: skip
        return
    result = fetch_model(source, dest)
    verb = "fetched" if result.fetched else "already in place"
    _console.print(f"{result.dest}: {verb} ({result.files} files, {result.bytes} bytes)")
