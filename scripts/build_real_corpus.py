"""Rebuild the real-output math corpus (issue 27) from snapshots of public repositories.

Every row is a (response, gold) pair a real model produced on a math problem: evaluation
dumps and GRPO rollout logs published on GitHub. Nothing here is generated or edited: the
response is the model's text as its repository stores it, the gold is the dataset's final
answer. The sources, with repository, commit, path, licence, model and dataset, are the
``SOURCES`` table below and ``tests/verifiers/data/real/PROVENANCE.md``.

The snapshots are fetched by hand (this repository never downloads anything): each source's
repository as a bare git directory under ``--mirrors`` (default ``/work/.mirror``, laid out
``OWNER+NAME/repo`` as the workplace's fetch tool leaves them), read with ``git show
COMMIT:PATH``. A source whose snapshot is missing is reported and skipped (``--strict``
makes it an error).

Output: one ``SOURCE.jsonl.gz`` per source under ``--out`` (default: ``build/real_corpus``
in this checkout, which git ignores), each line ``{"id", "source", "model", "dataset",
"problem", "response", "gold"}``, plus ``MANIFEST.json`` (rows and sha256 per file). Rows are
a seeded sample of each source (``cap``), so the same snapshots give byte-identical files.

Golds: GSM8K rows take the ``####`` answer of the reference solution (or the dump's own
answer field); MATH rows take MATH-500's ``answer`` when the problem is one of MATH-500's
(matched on the whitespace-normalised problem text, ``$GRPO_DATA_DIR/math500``), else the
last ``\\boxed{}`` of the reference solution (how MATH defines its answers).

Usage::

    python scripts/build_real_corpus.py [--mirrors DIR] [--out DIR] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import random
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SEED = 27  # issue 27

Row = dict[str, str]


@dataclass(frozen=True)
class Source:
    """One published file (or set of files) of model outputs.

    ``reader`` turns the file's text into (problem, response, gold) triples in file order;
    ``cap`` rows are then drawn with a seeded RNG (all of them when the file has fewer).
    """

    name: str
    repo: str
    commit: str
    paths: tuple[str, ...]
    licence: str
    model: str
    dataset: str
    reader: str
    cap: int
    note: str = ""
    options: dict[str, Any] = field(default_factory=dict)


# ---- gold helpers ----------------------------------------------------------------------


def last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` / ``\\fbox{...}`` of ``text`` (braces
    matched), or None when there is none or it is unclosed."""
    starts = [m.end() for m in re.finditer(r"\\(?:boxed|fbox)\s*\{", text)]
    if not starts:
        return None
    start = starts[-1]
    depth = 1
    for i in range(start, len(text)):
        ch = text[i]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[start:i].strip()
    return None


def gsm8k_final(solution: str) -> str | None:
    """The answer after the last ``####`` of a GSM8K reference solution."""
    m = re.findall(r"####\s*(.+)", solution)
    return m[-1].strip() if m else None


def _norm_problem(text: str) -> str:
    return " ".join(text.split())


_MATH500: dict[str, str] | None = None


def math500_answers() -> dict[str, str]:
    """MATH-500 answers keyed by whitespace-normalised problem text."""
    global _MATH500
    if _MATH500 is None:
        root = Path(os.environ.get("GRPO_DATA_DIR", REPO.parent / "shared" / "data"))
        path = root / "math500" / "test.jsonl"
        if not path.is_file():
            raise SystemExit(f"{path} is missing: set GRPO_DATA_DIR to the datasets folder")
        _MATH500 = {}
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                d = json.loads(line)
                _MATH500[_norm_problem(d["problem"])] = d["answer"]
    return _MATH500


def math_gold(problem: str, solution: str) -> str | None:
    """MATH-500's answer for a MATH-500 problem, else the solution's last box."""
    answer = math500_answers().get(_norm_problem(problem))
    return answer if answer is not None else last_boxed(solution)


def _r1_problem(prompt: str) -> str:
    """The question inside the r1_zero prompt ("User: ... \\nAssistant: <think>")."""
    m = re.search(r"\nUser:\s*(.*)\nAssistant:", prompt, re.DOTALL)
    return m.group(1).strip() if m else prompt


# ---- readers: text of one file -> (problem, response, gold) ------------------------------


def read_cs336_results(text: str, source: Source) -> Iterator[tuple[str, str, str | None]]:
    """cs336 assignment 5 evaluation dumps: {"prompt", "ground_truth" (reference solution),
    "response"}; the prompt is r1_zero (the response starts inside ``<think>``)."""
    for line in text.splitlines():
        if not line.strip():
            continue
        d = json.loads(line)
        problem = _r1_problem(d["prompt"])
        if source.dataset == "gsm8k":
            gold = gsm8k_final(d["ground_truth"])
        else:
            gold = math_gold(problem, d["ground_truth"])
        yield problem, d["response"], gold


def read_rollouts(text: str, source: Source) -> Iterator[tuple[str, str, str | None]]:
    """GRPO ``sample_rollouts.jsonl`` of one step: {"question", "response", "ground_truth"}."""
    for line in text.splitlines():
        if line.strip():
            d = json.loads(line)
            yield d["question"], d["response"], str(d["ground_truth"])


def read_openai_gsm8k(text: str, source: Source) -> Iterator[tuple[str, str, str | None]]:
    """openai/grade-school-math ``example_model_solutions.jsonl``: one row per problem with
    the solution of each model under its key (``options["key"]``); the reference solution
    ends ``A: n`` there (GSM8K's ``#### n`` rewritten), which is the gold."""
    key = source.options["key"]
    for line in text.splitlines():
        if not line.strip():
            continue
        d = json.loads(line)
        ref = d["ground_truth"]
        m = re.findall(r"A:\s*(.+)", ref)
        gold = m[-1].strip() if m else None
        yield d["question"], d[key]["solution"], gold


def read_predictions(text: str, source: Source) -> Iterator[tuple[str, str, str | None]]:
    """A dump with {"question", "model_response", "ground_truth_answer"}."""
    for line in text.splitlines():
        if line.strip():
            d = json.loads(line)
            yield d["question"], d["model_response"], str(d["ground_truth_answer"])


def read_tora(text: str, source: Source) -> Iterator[tuple[str, str, str | None]]:
    """ToRA ``test_tora_*.jsonl``: {"question", "code": [the whole tool-integrated
    response], "gt"}; the first sample is the response."""
    for line in text.splitlines():
        if line.strip():
            d = json.loads(line)
            yield d["question"], d["code"][0], str(d["gt"])


def read_abel(text: str, source: Source) -> Iterator[tuple[str, str, str | None]]:
    """GAIR-NLP/abel ``outputs/*/*.jsonl``: {"prompt" ("Question:\\n...\\nAnswer:..."),
    "response", "gold"}."""
    for line in text.splitlines():
        if line.strip():
            d = json.loads(line)
            m = re.search(r"Question:\s*(.*?)\nAnswer:", d["prompt"], re.DOTALL)
            yield (m.group(1).strip() if m else d["prompt"]), d["response"], str(d["gold"])


READERS: dict[str, Callable[[str, Source], Iterator[tuple[str, str, str | None]]]] = {
    "cs336_results": read_cs336_results,
    "rollouts": read_rollouts,
    "openai_gsm8k": read_openai_gsm8k,
    "predictions": read_predictions,
    "tora": read_tora,
    "abel": read_abel,
}

# ---- the sources -----------------------------------------------------------------------

_DLK = "donglinkang2021/cs336-assignment5-alignment"
_DLK_C = "317aa525decf9687ed93665f097266caaa2e913a"
_SHIB = "ShibukiZero/assignment5-alignment"
_SHIB_C = "463384087ed09c2e16e326b04f8c2bbf157c4495"
_SHIB_RUNS = "artifacts/experiments/ch7"


def _steps(run: str, steps: list[int]) -> tuple[str, ...]:
    return tuple(f"{_SHIB_RUNS}/{run}/grpo_step_{s:06d}/sample_rollouts.jsonl" for s in steps)


_EARLY = list(range(1, 31))
_LATE = list(range(150, 200, 2))

SOURCES: tuple[Source, ...] = (
    Source(
        "dlk-qwen25math15b-math500",
        _DLK,
        _DLK_C,
        ("outputs/qwen2.5-math-1.5b/math500_hf/results.jsonl",),
        "none (no LICENSE file)",
        "Qwen2.5-Math-1.5B (base), r1_zero prompt",
        "math500",
        "cs336_results",
        500,
    ),
    Source(
        "dlk-qwen25math15binst-math500",
        _DLK,
        _DLK_C,
        ("outputs/qwen2.5-math-1.5b-inst/math500_hf/results.jsonl",),
        "none (no LICENSE file)",
        "Qwen2.5-Math-1.5B-Instruct, r1_zero prompt",
        "math500",
        "cs336_results",
        500,
    ),
    Source(
        "dlk-qwen25math15b-math",
        _DLK,
        _DLK_C,
        ("outputs/qwen2.5-math-1.5b/math_local/results.jsonl",),
        "none (no LICENSE file)",
        "Qwen2.5-Math-1.5B (base), r1_zero prompt",
        "math",
        "cs336_results",
        400,
    ),
    Source(
        "dlk-qwen25math15binst-math",
        _DLK,
        _DLK_C,
        ("outputs/qwen2.5-math-1.5b-inst/math_local/results.jsonl",),
        "none (no LICENSE file)",
        "Qwen2.5-Math-1.5B-Instruct, r1_zero prompt",
        "math",
        "cs336_results",
        400,
    ),
    Source(
        "dlk-qwen25math15b-gsm8k",
        _DLK,
        _DLK_C,
        ("outputs/qwen2.5-math-1.5b/gsm8k_local/results.jsonl",),
        "none (no LICENSE file)",
        "Qwen2.5-Math-1.5B (base), r1_zero prompt",
        "gsm8k",
        "cs336_results",
        500,
    ),
    Source(
        "shib-grpo-r1zero-early",
        _SHIB,
        _SHIB_C,
        _steps("grpo_prompt_ablation/runs/r1_zero_reference", _EARLY)
        + _steps("grpo_baselines/runs/no_baseline", _EARLY),
        "none (no LICENSE file)",
        "Qwen2.5-Math-1.5B during GRPO (steps 1-30), r1_zero prompt",
        "math (train)",
        "rollouts",
        400,
    ),
    Source(
        "shib-grpo-r1zero-late",
        _SHIB,
        _SHIB_C,
        _steps("grpo_prompt_ablation/runs/r1_zero_reference", _LATE)
        + _steps("grpo_length_normalization/runs/masked_mean", _LATE),
        "none (no LICENSE file)",
        "Qwen2.5-Math-1.5B during GRPO (steps 150-198), r1_zero prompt",
        "math (train)",
        "rollouts",
        300,
    ),
    Source(
        "shib-grpo-questiononly",
        _SHIB,
        _SHIB_C,
        _steps("grpo_prompt_ablation/runs/question_only", _EARLY + _LATE),
        "none (no LICENSE file)",
        "Qwen2.5-Math-1.5B during GRPO, question-only prompt",
        "math (train)",
        "rollouts",
        400,
    ),
    *(
        Source(
            f"openai-gsm8k-{key.replace('_', '-')}",
            "openai/grade-school-math",
            "3101c7d5072418e28b9008a6636bde82a006892c",
            ("grade_school_math/data/example_model_solutions.jsonl",),
            "MIT",
            f"GPT-3 {key.split('_')[0].upper()} ({key.split('_')[1]}) (Cobbe et al. 2021)",
            "gsm8k",
            "openai_gsm8k",
            300,
            options={"key": key},
        )
        for key in ("6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification")
    ),
    *(
        Source(
            f"dhanvin-llama3-8b-gsm8k{suffix.replace('_', '-')}",
            "Dhanvin/spring2024-assignment5-alignment",
            "1757c951da2af24050dc8909cd1b8b40da1e252d",
            (f"model_predictions_store/gsm8k/eval_results/eval_results{suffix}.jsonl",),
            "none (no LICENSE file)",
            f"Meta-Llama-3-8B (base), prompt '{suffix or 'plain'}'",
            "gsm8k",
            "predictions",
            cap,
        )
        for suffix, cap in (("", 150), ("_explain", 400), ("_single_sentence", 300))
    ),
    *(
        Source(
            f"tora-{name}-gsm8k",
            "microsoft/ToRA",
            "213c1c995038c73fab10343814df7a42f990f026",
            (f"src/outputs/llm-agents/{name}-v1.0/gsm8k/test_tora_-1_seed0_t0.0_s0_e1319.jsonl",),
            "MIT",
            model,
            "gsm8k",
            "tora",
            300,
        )
        for name, model in (
            ("tora-70b", "ToRA-70B (Llama-2-70B), tool-integrated"),
            ("tora-code-34b", "ToRA-Code-34B (CodeLlama-34B), tool-integrated"),
        )
    ),
)


SOURCES += tuple(
    Source(
        f"abel-{size}-{folder.replace('_', '-')}",
        "GAIR-NLP/abel",
        "3a24ef24e9ea32708fe4fa4c36bf504a74b4bdf0",
        (f"outputs/{folder}/{size}.jsonl",),
        "none (no LICENSE file; README: the models are Apache-2.0)",
        f"Abel-{size.upper()} (Llama-2-{size.upper()} fine-tuned), '[Final solution] ... #### n'",
        "gsm8k" if folder == "gsm8k" else "gsm8k (robust: perturbed numbers)",
        "abel",
        cap,
    )
    for size, folder, cap in (
        ("7b", "gsm8k", 250),
        ("70b", "gsm8k", 250),
        ("13b", "gsm8k_robust", 200),
    )
)


# ---- build -----------------------------------------------------------------------------


def _git_show(mirror: Path, commit: str, path: str) -> str:
    out = subprocess.run(
        ["git", "--git-dir", str(mirror), "show", f"{commit}:{path}"],
        capture_output=True,
        check=False,
    )
    if out.returncode != 0:
        raise FileNotFoundError(out.stderr.decode(errors="replace").strip())
    return out.stdout.decode("utf-8")


def build_source(source: Source, mirrors: Path) -> list[Row]:
    """All rows of one source (seeded sample of ``cap``), or raise FileNotFoundError when
    its snapshot is missing."""
    mirror = mirrors / source.repo.replace("/", "+") / "repo"
    if not mirror.is_dir():
        raise FileNotFoundError(f"no snapshot of {source.repo} at {mirror}")
    triples: list[tuple[str, str, str, str]] = []  # (key, problem, response, gold)
    for path in source.paths:
        text = _git_show(mirror, source.commit, path)
        for i, (problem, response, gold) in enumerate(READERS[source.reader](text, source)):
            if gold is None or not gold.strip() or not isinstance(response, str):
                continue
            triples.append((f"{path}#{i}", problem, response, gold.strip()))
    rng = random.Random(f"{SEED}:{source.name}")
    picked = sorted(rng.sample(range(len(triples)), min(source.cap, len(triples))))
    rows = []
    for j in picked:
        key, problem, response, gold = triples[j]
        digest = hashlib.sha256(key.encode()).hexdigest()[:10]
        rows.append(
            {
                "id": f"{source.name}:{digest}",
                "source": source.name,
                "model": source.model,
                "dataset": source.dataset,
                "problem": problem,
                "response": response,
                "gold": gold,
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--out", type=Path, default=REPO / "build" / "real_corpus")
    parser.add_argument("--only", nargs="*", default=None, help="source names to build")
    parser.add_argument("--strict", action="store_true", help="a missing snapshot is an error")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {}
    total = 0
    for source in SOURCES:
        if args.only and source.name not in args.only:
            continue
        try:
            rows = build_source(source, args.mirrors)
        except FileNotFoundError as exc:
            if args.strict:
                raise SystemExit(f"{source.name}: {exc}") from exc
            print(f"skip {source.name}: {exc}", file=sys.stderr)
            continue
        payload = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()
        path = args.out / f"{source.name}.jsonl.gz"
        with path.open("wb") as fh, gzip.GzipFile(fileobj=fh, mode="wb", mtime=0) as gz:
            gz.write(payload)
        manifest[source.name] = {
            "rows": len(rows),
            "sha256": hashlib.sha256(payload).hexdigest(),
            "repo": source.repo,
            "commit": source.commit,
            "licence": source.licence,
            "model": source.model,
            "dataset": source.dataset,
        }
        total += len(rows)
        print(f"{source.name}: {len(rows)} rows")
    (args.out / "MANIFEST.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    print(f"total: {total} rows in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
