"""Generation benchmark: tokens per CPU-second by batch size and prompts per call, the cost of
μ, and the main job's generated tokens/s with several prompts per call against one.

Everything is measured in this run, side by side, with one torch thread:

1. ``generate`` on a random tiny model at batch sizes 1, 8 and 32 (one prompt, ``n`` =
   batch, fixed ``max_new_tokens``, EOS off so every row generates the same number of tokens),
   and the share of generation time spent on behavior log-probs (the per-step sampling
   function with and without the log-prob step, on [B, V] logits);
2. the rollout worker (``RolloutWorker`` on an embedded Redis, in this process) on the main
   job's policy (configs/arith-cpu.yaml, SFT warm start made here once) and its prompts:
   rollout tokens per CPU-second of the worker at G = 8 for 1, 2, 4 and 8 prompts per call
   (the worker's ``prompts_per_call``), in interleaved rounds, each over the same jobs;
3. the main job itself (``grpo run`` of configs/arith-cpu.yaml from that SFT policy, every
   service a process, ``STEPS`` learner steps, in-run evaluations off, 50 held-out tasks for
   the start and final evaluations): generated tokens per wall second (the assembler's
   generated tokens over the driver's GRPO wall clock) with the shipped ``prompts_per_call``
   against the same config with ``prompts_per_call: 1``, alternating in interleaved rounds.

Rates in 1 and 2 use this process's CPU time (the worker's own work: sampling and its Redis
client; the Redis server is another process), because the development machine is shared and
its wall-clock times are inflated; 3 is wall-clock by nature, so only its ratio within a
round means anything on a shared machine. Medians and ranges over the rounds are printed.
``GRPO_BENCH_ROUNDS`` (default 3) sets the rounds of 2 and 3; ``GRPO_BENCH_GENERATION_QUICK=1``
runs part 1 only. ``GRPO_BENCH_ANCHOR=<git rev>`` adds two arms to 3: that commit's code and
config (a ``git worktree``, run with this venv) with the shipped ``prompts_per_call`` and
with 1, so the shipped job is compared with an earlier code path in the same rounds
(docs/generation.md used c1dedb3, the code before the feeding thread).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from grpo.model import init_tiny_model
from grpo.services.driver.summary import RunSummary
from grpo.services.generation import transformers_backend
from grpo.services.generation.backend import BackendConfig, SamplingConfig
from grpo.services.generation.transformers_backend import TransformersBackend

__all__ = ["main"]

REPO = Path(__file__).resolve().parents[1]
MAIN_CONFIG = REPO / "configs" / "arith-cpu.yaml"
NEW_TOKENS = 48
REPEATS = 3
GROUP_SIZE = 8
PER_CALL = (1, 2, 4, 8)
JOBS_PER_ARM = 24
STEPS = 24


def _no_logprob_sampler(
    logits: torch.Tensor, sampling: SamplingConfig, generator: torch.Generator | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sampling without computing log-probs (returns zeros): the baseline for μ's cost."""
    probs = torch.softmax(logits / sampling.temperature, dim=-1)
    tokens = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
    return tokens, torch.zeros(tokens.shape)


def _time(
    backend: TransformersBackend, batch: int, sampling: SamplingConfig
) -> tuple[float, float, int]:
    """(wall s, cpu s, tokens) of the lowest-CPU of REPEATS generate calls with ``batch`` rows."""
    best = (float("inf"), 0.0, 0)
    for _ in range(REPEATS):
        wall, cpu = time.perf_counter(), time.process_time()
        out = backend.generate(["12+34="], batch, sampling)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        tokens = sum(len(c.token_ids) for c in out[0].completions)
        if cpu < best[1] or not best[2]:
            best = (wall, cpu, tokens)
    return best


Sampler = Callable[
    [torch.Tensor, SamplingConfig, torch.Generator | None], tuple[torch.Tensor, torch.Tensor]
]


def _sampler_cpu(sampler: Sampler, logits: torch.Tensor, sampling: SamplingConfig) -> float:
    """CPU seconds of one ``sampler(logits, sampling, generator)`` call (best mean of 3x2000)."""
    generator = torch.Generator().manual_seed(0)
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        for _ in range(2000):
            sampler(logits, sampling, generator)
        best = min(best, (time.process_time() - start) / 2000)
    return best


def _batch_sizes(tmp: Path) -> None:
    """Part 1: tokens per CPU-second at batch 1, 8, 32 and the cost of μ."""
    model_dir = init_tiny_model(tmp / "tiny")
    backend = TransformersBackend(BackendConfig(model_path=str(model_dir)))
    backend._eos = set()  # never stop early: equal lengths across batch sizes
    sampling = SamplingConfig(temperature=1.0, max_new_tokens=NEW_TOKENS, seed=1)
    backend.generate(["warm up"], 2, sampling)
    print(f"random tiny model, {NEW_TOKENS} new tokens per row, best of {REPEATS}, 1 thread")
    base = None
    for batch in (1, 8, 32):
        wall, cpu, tokens = _time(backend, batch, sampling)
        rate = tokens / cpu
        base = base or rate
        print(
            f"batch {batch:3d}: {rate:9.0f} tokens per cpu-s  ({cpu * 1e3:7.1f} ms cpu, "
            f"{wall * 1e3:7.1f} ms wall)  speed-up vs batch 1: {rate / base:5.1f}x"
        )
    vocab = backend.model.config.vocab_size
    for batch in (8, 32):
        gen_cpu = _time(backend, batch, sampling)[1]
        logits = torch.randn(batch, vocab)
        with_lp = _sampler_cpu(transformers_backend.sample_next_tokens, logits, sampling)
        without = _sampler_cpu(_no_logprob_sampler, logits, sampling)
        extra = max(0.0, with_lp - without) * NEW_TOKENS  # cpu s per generate call
        print(
            f"batch {batch:3d}: behavior log-probs cost {extra / gen_cpu * 100:5.2f}% of "
            f"generation time (sampling step {with_lp * 1e6:.1f} us with / "
            f"{without * 1e6:.1f} us without = {with_lp / without:.2f}x; "
            f"generate {gen_cpu * 1e3:.1f} ms cpu)"
        )


def _summary(values: Sequence[float]) -> str:
    return f"median {statistics.median(values):8.1f}  range {min(values):8.1f}-{max(values):8.1f}"


def _share(values: Sequence[float]) -> str:
    return f"median {statistics.median(values):8.2f}  range {min(values):8.2f}-{max(values):8.2f}"


def _ratio_summary(values: Sequence[float]) -> str:
    return f"median {statistics.median(values):.2f}x  range {min(values):.2f}-{max(values):.2f}x"


def _main_policy(tmp: Path) -> tuple[Path, list]:
    """The main job's SFT policy (made here, as ``grpo run`` makes it) and its training tasks."""
    from grpo.local.policy import prepare_policy
    from grpo.services.settings.run import load_run_config
    from grpo.services.tasks.run_tasks import load_run_tasks

    config = load_run_config(MAIN_CONFIG)
    tasks = load_run_tasks(config)
    started = time.perf_counter()
    policy = Path(prepare_policy(config, tmp / "sft-run", tasks, lambda _m: None))
    print(f"main job policy: SFT per {MAIN_CONFIG.name} in {time.perf_counter() - started:.0f} s")
    return policy, list(tasks.train)


def _worker_rates(policy: Path, tasks: list, rounds: int) -> dict[int, list[float]]:
    """Part 2: {prompts per call: [rollout tokens per worker CPU-second, one per round]}."""
    from grpo.services.generation.worker import RolloutWorker, RolloutWorkerConfig
    from grpo.services.runtime.redis_server import EmbeddedRedis, connect
    from grpo.services.runtime.streams import StreamNames, Streams
    from grpo.services.settings.run import load_run_config
    from grpo.v1 import common_pb2

    gen = load_run_config(MAIN_CONFIG).generation
    sampling = SamplingConfig(
        temperature=gen.temperature, top_p=gen.top_p, max_new_tokens=gen.max_new_tokens, seed=1
    )
    backend = TransformersBackend(BackendConfig(model_path=str(policy)))
    rates: dict[int, list[float]] = {p: [] for p in PER_CALL}
    with EmbeddedRedis() as server:
        client = connect(server.url)
        streams = Streams(client)
        for rnd in range(rounds):
            order = PER_CALL[rnd % len(PER_CALL) :] + PER_CALL[: rnd % len(PER_CALL)]
            jobs = tasks[rnd * JOBS_PER_ARM : (rnd + 1) * JOBS_PER_ARM]  # same jobs per arm
            for per_call in order:
                names = StreamNames(f"bench-r{rnd}-p{per_call}")
                for i, task in enumerate(jobs):
                    job = common_pb2.PromptJob(group_id=f"j{i}", task=task, group_size=GROUP_SIZE)
                    streams.produce(names.prompts, job)
                config = RolloutWorkerConfig(
                    namespace=names.namespace,
                    sampling=sampling,
                    prompts_per_call=per_call,
                    max_rows_per_call=GROUP_SIZE * max(PER_CALL),
                    fill_wait_ms=0,
                    block_ms=1,
                    max_rollout_lag=10**6,
                )
                worker = RolloutWorker(client, backend, config)
                cpu = time.process_time()
                while worker.groups_done < len(jobs):
                    worker.run_once()
                cpu = time.process_time() - cpu
                tokens = sum(
                    len(common_pb2.Rollout.FromString(f[b"pb"]).completion.token_ids)
                    for _i, f in client.xrange(names.rollouts)  # type: ignore[union-attr]
                )
                rates[per_call].append(tokens / cpu)
        client.close()
    return rates


class ServiceCpu:
    """Samples, every ``period_s``, the CPU seconds (user + system, /proc) of every process of
    one ``grpo run``: the services (command line naming ``run_dir``) and their descendants
    (verifier pool workers), summed per ``grpo serve`` name. Linux only."""

    def __init__(self, run_dir: Path, period_s: float = 0.25) -> None:
        self._metrics = run_dir / "metrics.jsonl"
        self.at_first_step: dict[str, float] | None = None  # per_service() once step 1 logged
        self._marker = str(run_dir.resolve())
        self._period = period_s
        self._tick = os.sysconf("SC_CLK_TCK")
        self._cpu: dict[int, tuple[str, float]] = {}  # pid -> (service, cpu s seen last)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ServiceCpu:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        parent: dict[int, int] = {}
        cpu: dict[int, float] = {}
        service: dict[int, str] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            pid = int(entry.name)
            parent[pid] = int(fields[1])
            cpu[pid] = (int(fields[11]) + int(fields[12])) / self._tick
            words = [a.decode(errors="replace") for a in argv]
            if "serve" in words and any(self._marker in w for w in words):
                service[pid] = words[words.index("serve") + 1]
        for pid, seconds in cpu.items():
            at, hops = pid, 0
            while at not in service and at in parent and hops < 8:
                at, hops = parent[at], hops + 1
            if at in service:
                self._cpu[pid] = (service[at], seconds)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            if (
                self.at_first_step is None
                and self._metrics.is_file()
                and self._metrics.stat().st_size
            ):
                self.at_first_step = self.per_service()
            self._stop.wait(self._period)

    def per_service(self) -> dict[str, float]:
        """CPU seconds per service name (descendants included)."""
        out: dict[str, float] = {}
        for name, seconds in self._cpu.values():
            out[name] = out.get(name, 0.0) + seconds
        return out


_TREE_RUN = """
import json, sys
from pathlib import Path
from grpo.services.settings.run import load_run_config
from grpo.local.run import run_local
run_local(load_run_config(sys.argv[1], json.loads(sys.argv[2])), Path(sys.argv[3]),
          log_fn=lambda _m: None)
"""


def _main_job(policy: Path, per_call: int, tmp: Path, tree: Path | None = None) -> dict[str, float]:
    """Part 3: one short ``grpo run`` of the main job from ``policy`` with ``per_call``; with
    ``tree`` (a checkout of another commit), that tree's code and config, run in a child
    process whose ``PYTHONPATH`` puts the tree first (its services inherit it)."""
    from grpo.local.run import run_local
    from grpo.services.settings.run import load_run_config

    config_path = MAIN_CONFIG if tree is None else tree / MAIN_CONFIG.relative_to(REPO)
    shipped = load_run_config(config_path)
    worker_extra = dict(shipped.generation.extra.get("worker", {}))
    worker_extra["prompts_per_call"] = per_call
    overrides = {
        "model.path": str(policy),
        "model.sft.enabled": False,
        "data.heldout_size": 50,
        "eval.every_steps": 0,
        "budget.steps": STEPS,
        "budget.wall_clock_s": 1800,
        "learner.checkpoint_every": 1000,
        "generation.extra": {**shipped.generation.extra, "worker": worker_extra},
    }
    run_dir = tmp / f"run-p{per_call}-{time.monotonic_ns()}"
    with ServiceCpu(run_dir) as cpu:
        if tree is None:
            config = load_run_config(config_path, overrides)
            summary = run_local(config, run_dir, log_fn=lambda _m: None)
        else:
            env = {**os.environ, "PYTHONPATH": str(tree)}
            args = [sys.executable, "-c", _TREE_RUN, str(config_path), json.dumps(overrides)]
            subprocess.run([*args, str(run_dir)], env=env, cwd=tree, check=True)
            summary = RunSummary.read(run_dir / "summary.json")
    services = cpu.per_service()
    wall = summary.grpo_wall_clock_s
    generated = float(summary.accounting.generated_tokens)
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    # After its first step (whose wait includes the run's start and the SFT evaluation): the
    # share of the learner's wall time spent waiting for groups, and spent in Trainer.step.
    later = [m for m in metrics if m["step"] > metrics[0]["step"]]
    span = later[-1]["wall_clock_s"] - metrics[0]["wall_clock_s"] if later else float("nan")
    worker_cpu = sum(v for k, v in services.items() if k.startswith("rollout-worker"))
    first = cpu.at_first_step or {}
    steps_after = max(summary.steps - int(metrics[0]["step"]), 1)
    return {
        # CPU s of the learner process per step after step 1 (start-up and model load excluded;
        # sampled every 0.25 s, so up to one sample late), and of all services together.
        "learner_cpu_s_per_step": (services.get("learner", 0.0) - first.get("learner", 0.0))
        / steps_after,
        "all_cpu_s_per_step": (sum(services.values()) - sum(first.values())) / steps_after,
        "tokens_per_s": generated / wall,
        # Steady state: tokens generated between the learner's first and last step over the
        # wall time between them (start-up, model loads and the first wait left out).
        "steady_tokens_per_s": (later[-1]["generated_tokens"] - metrics[0]["generated_tokens"])
        / span
        if later
        else float("nan"),
        "steps_per_s": summary.steps / wall,
        "learner_idle": sum(m["time/wait_groups_s"] for m in later) / span,
        "learner_busy": sum(m["time/step_s"] for m in later) / span,
        "learner_step_s": statistics.median(m["time/step_s"] for m in metrics),
        "generated_tokens_per_step": generated / summary.steps,
        "load_1min": os.getloadavg()[0],  # the machine's load at the run's end (all users)
        "worker_tokens_per_cpu_s": generated / max(worker_cpu, 1e-9),
        "rollouts": float(summary.accounting.rollouts.scored),
        "wall_s": wall,
        **{f"cpu_s/{k}": round(v, 1) for k, v in sorted(services.items())},
    }


def _anchor_tree(rev: str, tmp: Path) -> Path:
    """A ``git worktree`` of ``rev`` (the code path to compare against) under ``tmp``.

    Raises:
        subprocess.CalledProcessError: not a git checkout, or ``rev`` is unknown.
    """
    tree = tmp / "anchor"
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), rev],
        check=True,
        capture_output=True,
    )
    return tree


def main() -> None:
    """Print the measurements (rates and ratios measured in this run)."""
    torch.set_num_threads(1)
    rounds = int(os.environ.get("GRPO_BENCH_ROUNDS", "3"))
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        _batch_sizes(tmp)
        if os.environ.get("GRPO_BENCH_GENERATION_QUICK") == "1":
            return
        policy, tasks = _main_policy(tmp)
        rates = _worker_rates(policy, tasks, rounds)
        print(
            f"\nrollout worker, main job policy, G = {GROUP_SIZE}, {JOBS_PER_ARM} jobs per arm, "
            f"{rounds} interleaved rounds: rollout tokens per worker CPU-second"
        )
        for per_call in PER_CALL:
            ratios = [r / b for r, b in zip(rates[per_call], rates[1], strict=True)]
            print(
                f"  {per_call} prompts per call ({per_call * GROUP_SIZE:2d} rows): "
                f"{_summary(rates[per_call])}   vs 1 per call: {_ratio_summary(ratios)}"
            )
        from grpo.services.generation.worker import RolloutWorkerConfig
        from grpo.services.settings.run import load_run_config

        shipped = load_run_config(MAIN_CONFIG).generation.extra.get("worker", {})
        per_call = int(
            shipped.get(
                "prompts_per_call", RolloutWorkerConfig.model_fields["prompts_per_call"].default
            )
        )
        anchor = os.environ.get("GRPO_BENCH_ANCHOR", "")
        tree = _anchor_tree(anchor, tmp) if anchor else None
        arms: list[tuple[str, int, Path | None]] = [("shipped", per_call, None), ("1", 1, None)]
        if tree is not None:
            arms += [(f"{anchor} {per_call}", per_call, tree), (f"{anchor} 1", 1, tree)]
        runs: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in arms}
        for rnd in range(rounds):
            for name, arm, where in arms if rnd % 2 == 0 else arms[::-1]:
                runs[name].append(_main_job(policy, arm, tmp, where))
        if tree is not None:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)])
        print(
            f"\nmain job ({MAIN_CONFIG.name} from its SFT policy, {STEPS} learner steps, "
            f"{rounds} interleaved rounds; wall-clock rates, CPU shared with other work)"
        )
        for name, arm, where in arms:
            label = (
                ("shipped" if arm == per_call else "1 per call")
                if where is None
                else f"the code of {anchor}"
            )
            rows = runs[name]
            print(f"  prompts_per_call {arm} ({label}):")
            for key, what in (
                ("tokens_per_s", "generated tokens per wall s"),
                ("steady_tokens_per_s", "same, learner's first to last step"),
                ("steps_per_s", "learner steps per wall s"),
                ("learner_idle", "learner idle share after step 1"),
                ("learner_busy", "learner in Trainer.step, share"),
                ("learner_step_s", "Trainer.step wall s (median step)"),
                ("learner_cpu_s_per_step", "learner CPU s per step after step 1"),
                ("all_cpu_s_per_step", "all services' CPU s per step after 1"),
                ("generated_tokens_per_step", "generated tokens per learner step"),
                ("worker_tokens_per_cpu_s", "generated tokens per worker CPU s"),
                ("load_1min", "machine load average (1 min) at end"),
            ):
                values = [r[key] for r in rows]
                shares = (
                    "learner_idle",
                    "learner_busy",
                    "learner_step_s",
                    "learner_cpu_s_per_step",
                    "all_cpu_s_per_step",
                    "load_1min",
                )
                shown = _share(values) if key in shares else _summary(values)
                print(f"    {what:34s} {shown}")
            cpu_keys = sorted({k for r in rows for k in r if k.startswith("cpu_s/")})
            print(
                "    CPU s per run: "
                + ", ".join(
                    f"{k[6:]} {statistics.median(r.get(k, 0.0) for r in rows):.1f}"
                    for k in cpu_keys
                )
            )
        for key, what in (
            ("tokens_per_s", "generated tokens/s"),
            ("steady_tokens_per_s", "tokens/s, first to last step"),
            ("steps_per_s", "learner steps/s"),
            ("worker_tokens_per_cpu_s", "tokens per worker CPU s"),
        ):
            for name, _, _ in arms[1:]:
                ratios = [a[key] / b[key] for a, b in zip(runs["shipped"], runs[name], strict=True)]
                print(f"  shipped / {name:>12s}, {what:29s} same round: {_ratio_summary(ratios)}")
        print(json.dumps({"worker_tokens_per_cpu_s": rates, "main_job": runs}))


if __name__ == "__main__":
    main()
