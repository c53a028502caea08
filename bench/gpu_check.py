"""The GPU check (issue 31, item 5): the learner and generation on a CUDA device, in one run.

``scripts/gpu-check.sh`` runs it (on a lent GPU machine: Python 3.12 and the image's torch,
transformers and peft; the project and pydantic travel as wheels, see the script). Cases,
each on a Qwen2.5-0.5B-shaped model (hidden 896, 24 layers, 14 heads, 2 KV heads, MLP 4864,
vocabulary 151,936, tied embeddings: 494 M parameters) with random weights in bf16, written
once with ``grpo.model.init_tiny_model`` and loaded the way the services load it:

- ``learner``: ``Trainer.step`` (``grpo.learner.loading.build_trainer``, dtype bfloat16) on
  P × G synthetic rollouts (random prompts and responses, rewards alternating so every row
  has an advantage and is trained); tokens/s, MFU, peak memory;
- ``learner_mixed``: the same step in mixed precision (float32 master weights and AdamW
  state, ``trainer.autocast: bfloat16``);
- ``fsdp``: the same step with the model sharded by FSDP2 (``shard_model``: ``fully_shard``
  per decoder layer) in a one-rank NCCL world;
- ``lora``: the same step with LoRA adapters (``build_trainer(lora=...)``, peft) on every
  attention and MLP projection, only the adapters trained;
- ``generation``: the transformers generation backend (``TransformersBackend``) sampling a
  batch of 64 rows (8 prompts × 8 rollouts) at temperature 1; generated tokens/s.

Figures: step time is the median of ``steps`` timed steps after ``warmup`` (CUDA synchronised
around each); tokens/s counts every real (non-pad) token of the step's rows, prompt and
response; peak memory is ``torch.cuda.max_memory_allocated`` over the case. Model FLOPs of a
step = Σ over rows of 6·N·L + 6·n_layers·d_attn·L² (forward and backward: 2N and 4N per token
for the matmul weights N — every 2-D parameter once, the tied embedding as the output
projection — and causal attention's QKᵀ and AV, half of the 12·n_layers·d_attn·L² that PaLM,
Chowdhery et al. 2022, appendix B, counts for full attention); a row of L tokens. MFU = model
FLOPs / step time / the device's dense bf16 peak (datasheet: H100/H200 SXM 989 TFLOP/s), and
``of_measured`` the same against a bf16 8192³ matmul measured at the start (the ceiling the
device really gives). The LoRA step reports no MFU (its backward skips the frozen weights'
gradients).

``--dry-run`` runs every case on the CPU with tiny shapes (gloo for the FSDP world): what the
tests run, so the script cannot rot. A failing case is recorded with its error and the others
still run; the exit status is 1 when any failed. Results: ``gpu-check.json`` in ``--out``, and
a table printed last.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

__all__ = ["DRY", "FULL", "Shapes", "main", "train_flops"]


@dataclass(frozen=True)
class Shapes:
    """Model and batch shapes of one check (``FULL`` on a GPU, ``DRY`` on the CPU)."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    max_positions: int
    prompts: int  # P groups per learner step
    group: int  # G rollouts per group
    prompt_len: int  # tokens
    response_len: int  # longest response (tokens); lengths drawn in [half, full]
    micro_batch: int  # rows per micro-batch
    gen_prompts: int  # generation: prompts per call ...
    gen_group: int  # ... times rows per prompt = the batch
    gen_new_tokens: int
    lora_r: int
    warmup: int  # untimed steps
    steps: int  # timed steps


FULL = Shapes(
    hidden=896, layers=24, heads=14, kv_heads=2, intermediate=4864, vocab=151_936,
    max_positions=4096, prompts=8, group=8, prompt_len=128, response_len=512, micro_batch=16,
    gen_prompts=8, gen_group=8, gen_new_tokens=256, lora_r=16, warmup=1, steps=3,
)  # fmt: skip
"""Qwen2.5-0.5B's shape; a 64-row batch of ~450 tokens a row."""

DRY = Shapes(
    hidden=64, layers=2, heads=4, kv_heads=2, intermediate=128, vocab=512,
    max_positions=256, prompts=2, group=4, prompt_len=8, response_len=16, micro_batch=4,
    gen_prompts=2, gen_group=2, gen_new_tokens=8, lora_r=4, warmup=1, steps=2,
)  # fmt: skip
"""Tiny shapes for the CPU dry run (tests)."""

PEAK_BF16_TFLOPS = {"H100": 989.4, "H200": 989.4, "A100": 312.0}
"""Dense bf16 datasheet peaks by device-name substring (SXM parts)."""

LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
"""Every attention and MLP projection (``grpo.learner.config.LORA_TARGETS``)."""


def train_flops(n_matmul: int, layers: int, d_attn: int, lengths: list[int]) -> float:
    """Model FLOPs of one forward and backward over rows of ``lengths`` tokens.

    Args:
        n_matmul: parameters used in matmuls (every 2-D weight once).
        layers: decoder layers; d_attn: heads × head dim (the query width).
        lengths: real tokens of each row.

    Returns:
        Σ_rows 6·N·L + 6·layers·d_attn·L² (causal attention; the module docstring).
    """
    return float(sum(6 * n_matmul * n + 6 * layers * d_attn * n * n for n in lengths))


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(fn: Callable[[], Any], device: torch.device, warmup: int, steps: int) -> list[float]:
    """Seconds of ``steps`` calls of ``fn`` after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(steps):
        _sync(device)
        start = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - start)
    return times


def _reset_memory(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def _peak_gib(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    return torch.cuda.max_memory_allocated(device) / 2**30


def _peak_tflops(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((v for k, v in PEAK_BF16_TFLOPS.items() if k in name), None)


def measured_matmul_tflops(device: torch.device, n: int = 8192) -> float | None:
    """bf16 n³ matmul rate on ``device`` (median of 10 after 3 warm-ups), TFLOP/s; None on
    the CPU."""
    if device.type != "cuda":
        return None
    g = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16, generator=g)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16, generator=g)
    times = _timed(lambda: a @ b, device, warmup=3, steps=10)
    return 2 * n**3 / statistics.median(times) / 1e12


def write_model(shapes: Shapes, folder: Path) -> Path:
    """The random-weight Qwen2 model of ``shapes`` and its char tokenizer, saved in bf16 (the
    model's vocabulary padded past the tokenizer's, as released checkpoints pad theirs)."""
    from grpo.model import init_tiny_model

    return init_tiny_model(
        folder, seed=0, hidden=shapes.hidden, layers=shapes.layers, heads=shapes.heads,
        kv_heads=shapes.kv_heads, intermediate=shapes.intermediate,
        max_positions=shapes.max_positions, vocab_size=shapes.vocab, dtype=torch.bfloat16,
    )  # fmt: skip


def synthetic_groups(shapes: Shapes, eos: int, seed: int = 0) -> list[Any]:
    """P groups of G rollouts with random prompt/response ids (3 .. vocab-1), the response
    ending in EOS, random behavior log-probs and rewards alternating 0/1 within a group."""
    from grpo.learner.batch import GroupRows, RolloutRow

    g = torch.Generator().manual_seed(seed)
    groups = []
    for p in range(shapes.prompts):
        prompt = torch.randint(3, shapes.vocab, (shapes.prompt_len,), generator=g).tolist()
        rows = []
        for i in range(shapes.group):
            low = max(shapes.response_len // 2, 1)
            length = int(torch.randint(low, shapes.response_len + 1, (1,), generator=g))
            response = torch.randint(3, shapes.vocab, (length,), generator=g).tolist()
            response[-1] = eos
            mu = (-torch.rand(length, generator=g) * 3 - 9).tolist()  # a random model's μ
            rows.append(RolloutRow(i, prompt, response, mu, True, 0, float(i % 2)))
        groups.append(GroupRows(f"g{p}", f"p{p}", "arith", shapes.group, rows))
    return groups


def _configs(shapes: Shapes, device: torch.device) -> tuple[Any, Any]:
    from grpo.learner.config import LearnerAlgoConfig, TrainerConfig

    algo = LearnerAlgoConfig()  # grpo, clip-higher, token_mean, no reference (β = 0)
    config = TrainerConfig(
        lr=1e-6,
        warmup_steps=0,
        micro_batch_size=shapes.micro_batch,
        max_response_length=shapes.response_len,
        temperature=1.0,
        device=str(device),
    )
    return algo, config


def _model_sizes(model: torch.nn.Module) -> tuple[int, int]:
    """(all parameters, matmul parameters: every 2-D weight once)."""
    seen: dict[int, torch.nn.Parameter] = {}
    for prm in model.parameters():
        seen.setdefault(id(prm), prm)
    total = sum(p.numel() for p in seen.values())
    return total, sum(p.numel() for p in seen.values() if p.dim() == 2)


def _step_figures(
    trainer: Any, groups: list[Any], shapes: Shapes, device: torch.device, full_flops: bool
) -> dict[str, Any]:
    """Time ``trainer.step(groups)``; tokens/s, step time, MFU (``full_flops``), memory."""
    cfg = trainer.model.config
    lengths = [len(r.prompt_ids) + len(r.response_ids) for g in groups for r in g.rows]
    response_tokens = sum(len(r.response_ids) for g in groups for r in g.rows)
    metrics: dict[str, float] = {}

    def step() -> None:
        metrics.update(trainer.step(groups))

    times = _timed(step, device, shapes.warmup, shapes.steps)
    median = statistics.median(times)
    out: dict[str, Any] = {
        "step_s": median,
        "step_s_range": [min(times), max(times)],
        "rows": len(lengths),
        "tokens_per_step": sum(lengths),
        "tokens_per_s": sum(lengths) / median,
        "response_tokens_per_s": response_tokens / median,
        "peak_memory_gib": _peak_gib(device),
        "loss_finite": all(
            v == v for k, v in metrics.items() if k.startswith(("loss/", "optim/grad_norm"))
        ),
        "trained_rows_skipped": metrics.get("optim/zero_advantage_rows_skipped"),
    }
    if full_flops:
        _, n_matmul = _model_sizes(trainer.model)
        d_attn = cfg.num_attention_heads * (cfg.hidden_size // cfg.num_attention_heads)
        flops = train_flops(n_matmul, cfg.num_hidden_layers, d_attn, lengths)
        out["model_tflops_per_step"] = flops / 1e12
        out["achieved_tflops"] = flops / median / 1e12
    return out


def case_learner(model_dir: Path, shapes: Shapes, device: torch.device) -> dict[str, Any]:
    """One process, no sharding: ``build_trainer`` in bfloat16 and ``Trainer.step``."""
    from grpo.learner.loading import build_trainer

    algo, config = _configs(shapes, device)
    _reset_memory(device)
    trainer, tok = build_trainer(model_dir, algo, config, dtype="bfloat16")
    groups = synthetic_groups(shapes, int(tok.eos_token_id))
    total, _ = _model_sizes(trainer.model)
    return {"parameters": total, **_step_figures(trainer, groups, shapes, device, True)}


def case_fsdp(model_dir: Path, shapes: Shapes, device: torch.device) -> dict[str, Any]:
    """The learner step with FSDP2 in a one-rank world (NCCL on CUDA, gloo on the CPU)."""
    import torch.distributed as dist

    from grpo.learner.distributed import init_data_parallel, is_sharded
    from grpo.learner.loading import build_trainer

    algo, config = _configs(shapes, device)
    _reset_memory(device)
    with tempfile.TemporaryDirectory() as tmp:
        backend = "nccl" if device.type == "cuda" else "gloo"
        parallel = init_data_parallel(
            0, 1, f"file://{tmp}/rendezvous", backend=backend, fsdp=True, timeout_s=300
        )
        try:
            trainer, tok = build_trainer(
                model_dir, algo, config, dtype="bfloat16", parallel=parallel
            )
            if not is_sharded(trainer.model):
                raise RuntimeError("build_trainer did not shard the model")
            groups = synthetic_groups(shapes, int(tok.eos_token_id))
            return {"sharded": True, **_step_figures(trainer, groups, shapes, device, True)}
        finally:
            dist.destroy_process_group()


def case_learner_mixed(model_dir: Path, shapes: Shapes, device: torch.device) -> dict[str, Any]:
    """Mixed precision: float32 master weights and AdamW state, bf16 autocast forwards."""
    from grpo.learner.loading import build_trainer

    algo, config = _configs(shapes, device)
    config = config.model_copy(update={"autocast": "bfloat16"})
    _reset_memory(device)
    trainer, tok = build_trainer(model_dir, algo, config, dtype="float32")
    groups = synthetic_groups(shapes, int(tok.eos_token_id))
    figures = _step_figures(trainer, groups, shapes, device, True)
    return {"precision": trainer.precision, **figures}


def case_lora(model_dir: Path, shapes: Shapes, device: torch.device) -> dict[str, Any]:
    """The learner step with LoRA adapters (r, alpha 2r) on every projection, through
    ``build_trainer(lora=...)`` (peft; only the adapters train)."""
    from grpo.learner.config import LoraConfig
    from grpo.learner.loading import build_trainer

    algo, config = _configs(shapes, device)
    _reset_memory(device)
    lora = LoraConfig(r=shapes.lora_r, alpha=2 * shapes.lora_r, target_modules=LORA_TARGETS)
    trainer, tok = build_trainer(model_dir, algo, config, dtype="bfloat16", lora=lora)
    model = trainer.model
    trained = sum(p.numel() for p in model.parameters() if p.requires_grad)
    groups = synthetic_groups(shapes, int(tok.eos_token_id))
    figures = _step_figures(trainer, groups, shapes, device, False)
    return {"trained_parameters": trained, **figures}


def case_generation(model_dir: Path, shapes: Shapes, device: torch.device) -> dict[str, Any]:
    """``TransformersBackend.generate_many``: gen_prompts × gen_group rows in one batch."""
    from grpo.services.generation.backend import BackendConfig, SampleRequest, SamplingConfig
    from grpo.services.generation.transformers_backend import TransformersBackend

    _reset_memory(device)
    rows = shapes.gen_prompts * shapes.gen_group
    backend = TransformersBackend(
        BackendConfig(
            model_path=str(model_dir), device=str(device), dtype="bfloat16", max_batch_rows=rows
        )
    )
    g = torch.Generator().manual_seed(1)
    letters = "abcdefghijklmnopqrstuvwxyz0123456789+-*="
    prompts = [
        "".join(
            letters[i] for i in torch.randint(0, len(letters), (shapes.prompt_len,), generator=g)
        )
        for _ in range(shapes.gen_prompts)
    ]
    sampling = SamplingConfig(temperature=1.0, max_new_tokens=shapes.gen_new_tokens, seed=7)
    requests = [SampleRequest(p, shapes.gen_group, sampling) for p in prompts]
    generated: list[int] = []

    def call() -> None:
        results = backend.generate_many(requests)
        generated.append(sum(len(c.token_ids) for r in results for c in r.completions))

    times = _timed(call, device, shapes.warmup, shapes.steps)
    median = statistics.median(times)
    tokens = statistics.median(generated[shapes.warmup :])
    return {
        "batch_rows": rows,
        "max_new_tokens": shapes.gen_new_tokens,
        "call_s": median,
        "call_s_range": [min(times), max(times)],
        "generated_tokens": tokens,
        "generated_tokens_per_s": tokens / median,
        "peak_memory_gib": _peak_gib(device),
    }


CASES: dict[str, Callable[[Path, Shapes, torch.device], dict[str, Any]]] = {
    "learner": case_learner,
    "learner_mixed": case_learner_mixed,
    "fsdp": case_fsdp,
    "lora": case_lora,
    "generation": case_generation,
}


def _environment(device: torch.device) -> dict[str, Any]:
    import transformers

    env: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": str(device),
        "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
    }
    try:
        import peft

        env["peft"] = peft.__version__
    except ImportError:
        env["peft"] = None
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env |= {
            "gpu": props.name,
            "gpu_memory_gib": props.total_memory / 2**30,
            "capability": f"{props.major}.{props.minor}",
            "cuda": torch.version.cuda,
        }
    return env


def _mfu(result: dict[str, Any], peak: float | None, measured: float | None) -> None:
    achieved = result.get("achieved_tflops")
    if achieved is None:
        return
    result["mfu"] = achieved / peak if peak else None
    result["mfu_of_measured"] = achieved / measured if measured else None


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _table(results: dict[str, Any]) -> str:
    lines = [
        "| case | step or call s | tokens/s | MFU (of measured) | peak GiB | note |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, r in results["cases"].items():
        if "error" in r:
            lines.append(f"| {name} | - | - | - | - | FAILED: {r['error'].splitlines()[-1]} |")
            continue
        seconds = r.get("step_s", r.get("call_s"))
        rate = r.get("tokens_per_s", r.get("generated_tokens_per_s"))
        mfu = f"{_fmt(r.get('mfu'), '.1%')} ({_fmt(r.get('mfu_of_measured'), '.1%')})"
        note = (
            f"{r['trained_parameters']:,} trained"
            if "trained_parameters" in r
            else f"{r['batch_rows']} rows"
            if "batch_rows" in r
            else f"{r['rows']} rows"
        )
        row = [name, _fmt(seconds, ".3f"), _fmt(rate, ",.0f"), mfu,
               _fmt(r.get("peak_memory_gib"), ".1f"), note]  # fmt: skip
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the cases; write ``gpu-check.json`` under ``--out``; print the table last.

    Returns:
        0 when every case ran, 1 when any failed, 2 without CUDA outside ``--dry-run``.
    """
    parser = argparse.ArgumentParser(prog="gpu-check", description=__doc__.split("\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="tiny shapes on the CPU")
    parser.add_argument("--out", type=Path, default=Path("gpu-check-out"), help="result folder")
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated case names")
    args = parser.parse_args(argv)
    names = [n for n in args.cases.split(",") if n]
    unknown = sorted(set(names) - set(CASES))
    if unknown:
        parser.error(f"unknown cases {unknown}; valid: {', '.join(CASES)}")
    if args.dry_run:
        shapes, device = DRY, torch.device("cpu")
    elif torch.cuda.is_available():
        shapes, device = FULL, torch.device("cuda", 0)
        torch.cuda.set_device(device)
    else:
        print("gpu-check: no CUDA device; --dry-run runs the tiny CPU version", file=sys.stderr)
        return 2
    started = time.perf_counter()
    results: dict[str, Any] = {"environment": _environment(device), "shapes": asdict(shapes)}
    peak = _peak_tflops(device)
    measured = measured_matmul_tflops(device)
    results["peak_bf16_tflops"] = {"datasheet": peak, "measured_matmul": measured}
    results["cases"] = {}
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = write_model(shapes, Path(tmp) / "model")
        for name in names:
            print(f"gpu-check: {name} ...", flush=True)
            try:
                result = CASES[name](model_dir, shapes, device)
                _mfu(result, peak, measured)
            except Exception:
                result = {"error": traceback.format_exc(limit=8)}
                print(result["error"], file=sys.stderr, flush=True)
            results["cases"][name] = result
    results["wall_s"] = time.perf_counter() - started
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu-check.json").write_text(json.dumps(results, indent=1) + "\n")
    print(json.dumps(results["environment"]), json.dumps(results["peak_bf16_tflops"]))
    print(_table(results))
    print(f"wall {results['wall_s']:.0f} s; {args.out / 'gpu-check.json'}")
    return 1 if any("error" in r for r in results["cases"].values()) else 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    raise SystemExit(main())
