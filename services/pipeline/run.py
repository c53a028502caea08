"""``grpo run``: the whole pipeline on one machine, as separate service processes.

``Pipeline.run()``:

1. prepares the policy: a fresh tiny model (``model.path`` unset) and the SFT warm start, run
   in this process before any service starts (so it may use every core);
2. evaluates the warm-started policy on the held-out set (greedy) -> ``sft_accuracy``;
3. starts Redis (embedded unless ``REDIS_URL``/``redis_url``), writes one settings YAML per
   service into ``<run_dir>/services/``, launches the verifiers, assembler, rollout worker(s)
   and learner as ``grpo serve`` processes on loopback ports (one torch thread each) and waits
   until each answers health checks;
4. feeds prompts with backpressure and shows live progress until ``budget.steps`` learner
   steps are done or ``budget.wall_clock_s`` passes (or Ctrl-C), evaluating the latest
   published policy every ``eval.every_steps`` steps;
5. stops every service (SIGTERM, SIGKILL after the grace), checks that no process is left,
   evaluates the last published policy -> ``final_accuracy``, and writes ``summary.json``.

Run directory: ``config.yaml`` (resolved RunConfig), ``services/*.yaml``, ``logs/*.log``,
``model/`` (initial and SFT weights), the learner's ``metrics.jsonl``, ``groups.jsonl``,
``checkpoints/`` and ``weights/``, the assembler's ``assembler_groups.jsonl``, ``eval.jsonl``
and ``summary.json``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import yaml

from grpo.errors import FailedPreconditionError
from grpo.services.pipeline.config import RunConfig
from grpo.services.pipeline.feeder import PromptFeeder
from grpo.services.pipeline.processes import ProcessSupervisor
from grpo.services.pipeline.service_configs import (
    assembler_settings,
    learner_settings,
    rollout_worker_settings,
    verifier_settings,
    write_service_config,
)
from grpo.services.pipeline.tasks import RunTasks, load_run_tasks
from grpo.services.redis_server import EmbeddedRedis, connect, redis_url_from_env
from grpo.services.streams import StreamNames, Streams
from grpo.v1 import (
    assembler_pb2,
    assembler_pb2_grpc,
    common_pb2,
    learner_pb2,
    learner_pb2_grpc,
)

__all__ = ["Pipeline", "Progress", "default_run_dir"]

log = logging.getLogger(__name__)

LEARNER_GROUP = "learner"
"""Consumer group of the learner on the groups stream (learner service default)."""
NO_SIGNAL_GROUPS = 200
"""Closed groups without one kept for training before ``grpo run`` warns (``train``)."""
WORKER_GROUP = "rollout-workers"
"""Consumer group of the rollout workers on the prompts stream (worker default)."""


def default_run_dir(config: RunConfig, root: Path = Path("runs")) -> Path:
    """``runs/<UTC timestamp>-<config name>``."""
    return root / f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{config.name}"


@dataclass
class Progress:
    """What the live display shows; also the last line of the run log.

    Attributes:
        step: learner steps done.
        policy_version: latest published policy version.
        reward: mean outcome reward of the last learner batch (nan before the first step).
        heldout_accuracy: last held-out greedy accuracy (nan before the first evaluation).
        tokens_per_s: generated tokens per second of wall clock since services started.
        stats: the assembler's counters.
        elapsed_s: seconds since services started.
    """

    step: int = 0
    policy_version: int = 0
    reward: float = float("nan")
    heldout_accuracy: float = float("nan")
    tokens_per_s: float = 0.0
    stats: assembler_pb2.AssemblerStats = field(default_factory=assembler_pb2.AssemblerStats)
    elapsed_s: float = 0.0
    last_metrics: dict[str, float] = field(default_factory=dict)


def _first_metric(metrics: dict[str, float], *names: str) -> float:
    for name in names:
        if name in metrics:
            return float(metrics[name])
    return float("nan")


class Pipeline:
    """One local run (see the module docstring); also driven step by step by the e2e test."""

    def __init__(
        self,
        config: RunConfig,
        run_dir: Path,
        *,
        on_progress: Callable[[Progress], None] | None = None,
        log_fn: Callable[[str], None] | None = None,
    ) -> None:
        """Args: config: the run; run_dir: output folder (created); on_progress: called each
        poll with the current Progress; log_fn: receives human-readable milestones."""
        self.config = config
        self.run_dir = run_dir.resolve()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.namespace = config.namespace or "run-" + "".join(
            c if c.isalnum() else "-" for c in self.run_dir.name
        )
        self.names = StreamNames(self.namespace)
        self._on_progress = on_progress
        self._log = log_fn or (lambda msg: log.info(msg))
        self.supervisor = ProcessSupervisor(self.run_dir / "logs")
        self._redis_server: EmbeddedRedis | None = None
        self.redis_url = ""
        self.client: Any = None
        self.streams: Streams | None = None
        self.tasks: RunTasks | None = None
        self.model_dir: Path | None = None
        self.progress = Progress()
        self._started_at = 0.0
        self._evals: list[dict[str, Any]] = []
        (self.run_dir / "config.yaml").write_text(
            yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
        )

    # ---------------------------------------------------------------- policy and eval
    def prepare_model(self) -> Path:
        """Initialise the tiny model (when ``model.path`` is unset) and run SFT when enabled.

        Returns:
            The folder of the policy the services start from.
        """
        import torch

        from grpo.learner.sft import run_sft
        from grpo.learner.tiny_model import init_tiny_model

        cfg = self.config.model
        self.tasks = self.tasks or load_run_tasks(self.config)
        torch.set_num_threads(1)  # 2 threads lose 4-8x as soon as anything else runs
        if cfg.path is not None:
            model_dir = Path(cfg.path).resolve()
        else:
            tiny = cfg.tiny
            model_dir = init_tiny_model(
                self.run_dir / "model" / "init",
                seed=self.config.seed,
                hidden=tiny.hidden,
                layers=tiny.layers,
                heads=tiny.heads,
                kv_heads=tiny.kv_heads,
                intermediate=tiny.intermediate,
                max_positions=tiny.max_positions,
            )
            self._log(f"initialised tiny model in {model_dir}")
        if cfg.sft.enabled:
            if not self.tasks.sft:
                raise FailedPreconditionError(
                    f"model.sft.enabled but data.source={self.config.data.source!r} has no "
                    "worked solutions; disable SFT or use data.source: arith"
                )
            sft = cfg.sft
            out = self.run_dir / "model" / "sft"
            started = time.perf_counter()
            check = self._sft_check(sft.target_accuracy) if sft.target_accuracy > 0 else None
            result = run_sft(
                model_dir,
                self.tasks.sft,
                out_dir=out,
                steps=sft.steps or None,
                epochs=sft.epochs or None,
                time_budget_s=sft.time_budget_s or None,
                lr=sft.lr,
                batch_size=sft.batch_size,
                warmup_steps=sft.warmup_steps,
                schedule=sft.schedule,
                seed=self.config.seed,
                log_every=200,
                on_log=lambda step, loss: self._log(f"SFT step {step}: loss {loss:.3f}"),
                check_every=sft.check_every,
                check=check,
            )
            reached = ""
            if result.stopped_by_check:
                reached = f", dev accuracy {result.checks[-1][1]:.3f} reached the target"
            elif check is not None:
                last = (
                    f"last dev accuracy {result.checks[-1][1]:.3f} at step {result.checks[-1][0]}"
                    if result.checks
                    else "never checked"
                )
                reached = f", target {sft.target_accuracy:.3f} NOT reached ({last})"
            self._log(
                f"SFT: {result.steps} steps, loss {result.final_loss:.3f}{reached}, "
                f"{time.perf_counter() - started:.0f} s"
            )
            model_dir = out
        self.model_dir = model_dir
        return model_dir

    def _sft_check(self, target: float) -> Callable[[Path, int], tuple[float, bool]]:
        """``run_sft``'s check: greedy accuracy on the dev set; stop at ``target``."""
        from grpo.learner.sft import greedy_accuracy

        assert self.tasks is not None
        dev = self.tasks.dev

        def check(model_dir: Path, step: int) -> tuple[float, bool]:
            accuracy = greedy_accuracy(
                str(model_dir),
                dev,
                max_new_tokens=self.config.eval.max_new_tokens,
                batch_size=self.config.eval.batch_size,
            ).accuracy
            self._log(f"SFT step {step}: dev accuracy {accuracy:.3f} (target {target:.3f})")
            return accuracy, accuracy >= target

        return check

    def evaluate(self, model_dir: Path, label: str) -> float:
        """Held-out greedy accuracy of the policy in ``model_dir`` (appended to eval.jsonl).

        Returns:
            Accuracy in [0, 1]; nan when the held-out set is empty.
        """
        from grpo.learner.sft import greedy_accuracy

        tasks = self.tasks or load_run_tasks(self.config)
        if not tasks.heldout:
            return float("nan")
        started = time.perf_counter()
        check = self._verifier_check() if tasks.task_type == "code" else None
        result = greedy_accuracy(
            str(model_dir),
            tasks.heldout,
            max_new_tokens=self.config.eval.max_new_tokens,
            batch_size=self.config.eval.batch_size,
            check=check,
        )
        row = {
            "label": label,
            "step": self.progress.step,
            "generated_tokens": self.progress.stats.generated_tokens,
            "accuracy": result.accuracy,
            "correct": result.correct,
            "total": result.total,
            "eval_s": round(time.perf_counter() - started, 2),
            "model_dir": str(model_dir),
            "wall_clock_s": round(time.time() - self._started_at, 2) if self._started_at else 0,
        }
        self._evals.append(row)
        with (self.run_dir / "eval.jsonl").open("a") as fh:
            fh.write(json.dumps(row) + "\n")
        self._log(
            f"held-out accuracy ({label}): {result.accuracy:.3f} ({result.correct}/{result.total})"
        )
        return result.accuracy

    def _verifier_check(self) -> Callable[[str, common_pb2.Task], bool]:
        from grpo.v1 import verifier_pb2, verifier_pb2_grpc

        service = self.supervisor.services.get(self.config.verifiers.outcome)
        if service is None:
            raise FailedPreconditionError("the outcome verifier must run for a code evaluation")
        stub = verifier_pb2_grpc.VerifierStub(grpc.insecure_channel(service.address))

        def check(text: str, task: common_pb2.Task) -> bool:
            reply = stub.Score(verifier_pb2.ScoreRequest(task=task, response=text), timeout=60)
            ok = reply.score.status == common_pb2.SCORE_STATUS_OK
            return (
                ok
                and reply.score.reward >= self.config.assembler.dynamic_sampling.correct_threshold
            )

        return check

    # ---------------------------------------------------------------- services
    def start_redis(self) -> str:
        """Use ``redis_url`` / ``$REDIS_URL`` or start an embedded server; returns the URL."""
        url = self.config.redis_url or redis_url_from_env()
        if not url:
            self._redis_server = EmbeddedRedis()
            self._redis_server.__enter__()
            url = self._redis_server.url
            self._log(f"embedded Redis at {url}")
        self.redis_url = url
        self.client = connect(url)
        self.streams = Streams(self.client)
        return url

    def _service_yaml(self, name: str, settings: dict[str, Any], service: str) -> Path:
        return write_service_config(service, settings, self.run_dir / "services" / f"{name}.yaml")

    def start_services(self) -> None:
        """Write each service's YAML and launch verifiers, assembler, workers and learner.

        Raises:
            FailedPreconditionError / DeadlineExceededError: a service failed to start
                (its log tail is in the message).
        """
        import torch

        cfg = self.config
        assert self.model_dir is not None and self.tasks is not None
        if not self.redis_url:
            self.start_redis()
        torch.set_num_threads(1)
        self._started_at = time.time()
        sup = self.supervisor
        verifier_names = [cfg.verifiers.outcome]
        if cfg.verifiers.process:
            verifier_names.append(cfg.verifiers.process)
        for name in verifier_names:
            sup.start(name, self._service_yaml(name, verifier_settings(cfg, name), name))
        route: dict[str, list[str]] = {"outcome": [sup.services[cfg.verifiers.outcome].address]}
        if cfg.verifiers.process:
            route["process"] = [sup.services[cfg.verifiers.process].address]
        sup.start(
            "assembler",
            self._service_yaml(
                "assembler",
                assembler_settings(
                    cfg,
                    redis_url=self.redis_url,
                    namespace=self.namespace,
                    routing={self.tasks.task_type: route},
                    group_log=self.run_dir / "assembler_groups.jsonl",
                ),
                "assembler",
            ),
        )
        self.start_learner()
        for i in range(cfg.generation.workers):
            name = f"rollout-worker-{i}"
            settings = rollout_worker_settings(
                cfg,
                redis_url=self.redis_url,
                namespace=self.namespace,
                model_path=self.model_dir,
                index=i,
            )
            sup.start(
                name, self._service_yaml(name, settings, "rollout-worker"), service="rollout-worker"
            )
        sup.wait_healthy(list(sup.services), cfg.budget.startup_timeout_s)
        self._log("services: " + ", ".join(f"{n}@{p.port}" for n, p in sup.services.items()))

    def start_learner(self) -> None:
        """(Re)start the learner process; it resumes from its last checkpoint in the run dir."""
        assert self.model_dir is not None
        settings = learner_settings(
            self.config,
            redis_url=self.redis_url,
            namespace=self.namespace,
            model_path=self.model_dir,
            run_dir=self.run_dir,
        )
        self.supervisor.start("learner", self._service_yaml("learner", settings, "learner"))

    def learner_status(self) -> learner_pb2.GetStatusResponse:
        """The learner's GetStatus (raises grpc.RpcError when it is down)."""
        with grpc.insecure_channel(self.supervisor.services["learner"].address) as channel:
            stub = learner_pb2_grpc.LearnerStub(channel)
            return stub.GetStatus(learner_pb2.GetStatusRequest(), timeout=10)

    def assembler_stats(self) -> assembler_pb2.AssemblerStats:
        """The assembler's GetStats counters."""
        with grpc.insecure_channel(self.supervisor.services["assembler"].address) as channel:
            stub = assembler_pb2_grpc.AssemblerStub(channel)
            return stub.GetStats(assembler_pb2.GetStatsRequest(), timeout=10).stats

    def make_feeder(self) -> PromptFeeder:
        """The prompt feeder of this run (backpressure bounds from ``generation``/``learner``)."""
        assert self.streams is not None and self.tasks is not None
        cfg = self.config
        return PromptFeeder(
            self.streams,
            self.names,
            self.tasks.train,
            group_size=cfg.generation.group_size,
            prompts_ahead=cfg.generation.prompts_ahead,
            groups_ahead=2 * cfg.learner.batch_groups,
            worker_group=WORKER_GROUP,
            learner_group=LEARNER_GROUP,
            seed=cfg.seed,
            repeats=cfg.data.prompt_repeats,
        )

    def published_policy(self) -> common_pb2.PolicyWeights | None:
        """The latest PolicyWeights the learner published, or None."""
        raw = self.client.get(self.names.policy_key)
        return common_pb2.PolicyWeights.FromString(raw) if raw else None

    def wait_for_publish(
        self, step: int, timeout_s: float = 60.0
    ) -> common_pb2.PolicyWeights | None:
        """Wait until the learner has published the weights of ``step`` (or give up).

        Returns:
            The latest PolicyWeights (possibly older than ``step`` after the timeout), or None.
        """
        deadline = time.monotonic() + timeout_s
        policy = self.published_policy()
        while (policy is None or policy.step < step) and time.monotonic() < deadline:
            if self.supervisor.dead():
                break
            time.sleep(0.2)
            policy = self.published_policy()
        return policy

    def poll(self) -> Progress:
        """Refresh ``self.progress`` from the learner and the assembler."""
        status = self.learner_status()
        stats = self.assembler_stats()
        p = self.progress
        p.step = int(status.step)
        p.policy_version = int(status.policy_version)
        p.last_metrics = dict(status.last_metrics)
        p.reward = _first_metric(p.last_metrics, "reward/mean", "groups/reward_mean")
        p.stats = stats
        p.elapsed_s = time.time() - self._started_at
        p.tokens_per_s = stats.generated_tokens / max(p.elapsed_s, 1e-9)
        if self._on_progress is not None:
            self._on_progress(p)
        return p

    def train(self, steps: int | None = None) -> str:
        """Feed and monitor until the step or time budget is reached.

        Args:
            steps: learner steps to reach (default ``budget.steps``).

        Returns:
            Why it stopped: "steps", "generated_tokens", "wall_clock" or "exhausted".

        Raises:
            FailedPreconditionError: a service process died.
        """
        cfg = self.config
        target = steps or cfg.budget.steps
        feeder = self.make_feeder()
        deadline = time.monotonic() + cfg.budget.wall_clock_s
        next_eval = cfg.eval.every_steps or 0
        idle_since = time.monotonic()
        warned_no_signal = False
        while True:
            dead = self.supervisor.dead()
            if dead:
                tails = "\n".join(
                    f"--- {n}:\n{self.supervisor.services[n].log_tail(1500)}" for n in dead
                )
                raise FailedPreconditionError(f"service(s) {dead} exited:\n{tails}")
            feeder.pump()
            try:
                progress = self.poll()
            except grpc.RpcError as exc:
                log.warning("status poll failed: %s", exc)
                time.sleep(0.5)
                continue
            if progress.step >= target:
                return "steps"
            token_budget = cfg.budget.generated_tokens
            if token_budget and progress.stats.generated_tokens >= token_budget:
                return "generated_tokens"
            if time.monotonic() > deadline:
                return "wall_clock"
            if feeder.exhausted and progress.stats.groups_pending == 0:
                if time.monotonic() - idle_since > 60:
                    return "exhausted"
            else:
                idle_since = time.monotonic()
            if not warned_no_signal:
                warned_no_signal = self._warn_if_no_signal(progress.stats)
            if next_eval and progress.step >= next_eval:
                next_eval += cfg.eval.every_steps
                policy = self.published_policy()
                if policy is not None and policy.path:
                    progress.heldout_accuracy = self.evaluate(
                        Path(policy.path), f"step {progress.step}"
                    )
            time.sleep(0.5)

    def _warn_if_no_signal(self, stats: assembler_pb2.AssemblerStats) -> bool:
        """Log once that dynamic sampling has kept no group out of ``NO_SIGNAL_GROUPS`` closed
        ones (the policy solves none of the prompts, or all of them): the run then only burns
        generation until a budget ends it. Returns True when it warned."""
        rejected = stats.groups_rejected_all_correct + stats.groups_rejected_all_wrong
        if stats.groups_accepted or rejected < NO_SIGNAL_GROUPS:
            return False
        kind = (
            "all wrong"
            if stats.groups_rejected_all_wrong >= stats.groups_rejected_all_correct
            else "all correct"
        )
        self._log(
            f"warning: {rejected} groups closed and none was kept for training (mostly {kind}; "
            f"{stats.groups_rejected_all_wrong} all wrong, {stats.groups_rejected_all_correct} "
            "all correct): no group has a reward spread to learn from. Check the warm start "
            "(held-out accuracy above), the task difficulty, or assembler.dynamic_sampling."
        )
        return True

    def stop_services(self) -> list[int]:
        """Stop every service (SIGTERM, then SIGKILL after the grace) and Redis.

        Returns:
            Pids of processes that were still alive afterwards and had to be killed (should
            be empty).
        """
        codes = self.supervisor.stop_all(self.config.budget.stop_grace_s)
        self._log("stopped services: " + ", ".join(f"{n}={c}" for n, c in codes.items()))
        if self.client is not None:
            self.client.close()
            self.client = None
        if self._redis_server is not None:
            self._redis_server.__exit__(None, None, None)
            self._redis_server = None
        return self.supervisor.reap_orphans()

    def run(self, steps: int | None = None) -> dict[str, Any]:
        """The whole job (see the module docstring); returns the summary written to disk."""
        started = time.time()
        self.tasks = load_run_tasks(self.config)
        model_dir = self.prepare_model()
        sft_accuracy = self.evaluate(model_dir, "sft")
        stop_reason = "error"
        left: list[int] = []
        try:
            self.start_services()
            stop_reason = self.train(steps)
        except KeyboardInterrupt:
            stop_reason = "interrupted"
            self._log("interrupted: stopping services")
        finally:
            final_step = self.progress.step
            with contextlib.suppress(Exception):
                self.poll()
            policy = None
            if self.client is not None:
                with contextlib.suppress(Exception):
                    policy = self.wait_for_publish(self.progress.step)
            left = self.stop_services()
        final_dir = Path(policy.path) if policy is not None and policy.path else model_dir
        import torch

        torch.set_num_threads(1)
        final_accuracy = self.evaluate(final_dir, "final")
        stats = self.progress.stats
        summary = {
            "config": self.config.name,
            "stop_reason": stop_reason,
            "sft_accuracy": sft_accuracy,
            "final_accuracy": final_accuracy,
            "accuracy_gain_points": round(100 * (final_accuracy - sft_accuracy), 2),
            "steps": max(final_step, self.progress.step),
            "final_policy_version": policy.policy_version if policy is not None else 0,
            "final_policy_step": policy.step if policy is not None else 0,
            "generated_tokens": stats.generated_tokens,
            "kept_tokens": stats.kept_tokens,
            "rollouts": stats.rollouts_received,
            "groups_accepted": stats.groups_accepted,
            "groups_rejected_all_correct": stats.groups_rejected_all_correct,
            "groups_rejected_all_wrong": stats.groups_rejected_all_wrong,
            "groups_rejected_too_few_valid": stats.groups_rejected_too_few_valid,
            "groups_timed_out": stats.groups_timed_out,
            "rewards_missing": stats.rewards_missing,
            "grpo_wall_clock_s": round(self.progress.elapsed_s, 1),
            "wall_clock_s": round(time.time() - started, 1),
            "leftover_processes": left,
            "evals": self._evals,
        }
        (self.run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        return summary
