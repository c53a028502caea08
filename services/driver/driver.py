"""The run driver: feeds prompts with backpressure, evaluates the held-out set, stops on a
budget and writes the summary. It talks to the services only through an ``Endpoints`` view
(the learner's GetStatus, the assembler's GetStats, the outcome verifier's address, a health
check) and to Redis through the run's streams, so the same class runs inside ``grpo run``
next to a ``LocalCluster`` or on its own against remote services.

``RunDriver.train(steps)`` feeds from a thread (``FeedLoop``: ``PromptFeeder.pump`` every
``FEED_S``) while its loop checks health, polls the learner and the assembler, stops on
``budget.steps`` learner steps, ``budget.generated_tokens``, ``budget.wall_clock_s`` or an
exhausted feeder, and evaluates the latest published policy every ``eval.every_steps`` steps.
``evaluate`` is the one held-out evaluation call
(``grpo.services.driver.heldout.heldout_accuracy``); each evaluation is appended to
``eval.jsonl``. ``summary`` builds ``summary.json``. ``drive`` is the whole job of the driver
component (``grpo serve driver``, ``grpo.services.driver.service``): evaluate the
initial policy, train, evaluate the final policy, write the summary.

Restartable: with a ``DriverRecord`` (Redis, under the run's namespace) every evaluation is
recorded before it is reported, and a restarted driver reuses a recorded one instead of running
it again (the final one only when it was of the same policy folder); the training seconds
already spent count against ``budget.wall_clock_s``; the feeder continues where the prompts
stream says it stopped (``PromptFeeder.resume``).
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import grpc

from grpo.errors import FailedPreconditionError, GrpoError
from grpo.integrity import DamagedError, NoDigestsError, check_digests
from grpo.learner.metric_names import GROUPS_REWARD_MEAN, LEARNER_REDIS_OUTAGE_S
from grpo.services.driver.curriculum import PassRateCurriculum
from grpo.services.driver.feeder import PromptFeeder
from grpo.services.driver.heldout import heldout_accuracy
from grpo.services.driver.summary import Outages, RunSummary
from grpo.services.driver.token_budget import TokenCounts, TokenGate, closed_groups
from grpo.services.runtime.accounting import RunAccounting
from grpo.services.runtime.policy import read_policy, snapshot_policy
from grpo.services.runtime.streams import REDIS_ERRORS, Outage, StreamNames, Streams
from grpo.services.settings.run import RunConfig
from grpo.services.settings.verifiers import plan_verifiers
from grpo.services.tasks.run_tasks import RunTasks, task_digest
from grpo.v1 import assembler_pb2, common_pb2, learner_pb2

__all__ = [
    "LEARNER_GROUP",
    "NO_SIGNAL_GROUPS",
    "PAUSE_TIMEOUT_S",
    "UNRESPONSIVE_PAUSE_S",
    "WORKER_GROUP",
    "DriverRecord",
    "Endpoints",
    "Progress",
    "RunDriver",
    "RunYieldedError",
]

log = logging.getLogger(__name__)

LEARNER_GROUP = "learner"
"""Consumer group of the learner on the groups stream (learner service default)."""
NO_SIGNAL_GROUPS = 200
"""Closed groups without one kept for training before the driver warns (``train``)."""
WORKER_GROUP = "rollout-workers"
"""Consumer group of the rollout workers on the prompts stream (worker default)."""
POLL_S = 0.5
"""Seconds between two iterations of the driver loop (status poll, stop checks, evaluations)."""
FEED_S = 0.05
"""Seconds between two pumps of the feeding thread (``FeedLoop``). Feeding used to run once
per driver iteration: a rollout worker that had taken its ``prompts_ahead`` jobs then waited
up to ``POLL_S`` (and a whole held-out evaluation) for the next ones, which capped the main
job at ``prompts_ahead`` groups per 0.5 s (docs/generation.md)."""
REDIS_OUTAGE_S = 300.0
"""Longest Redis outage the driver rides out (feeding paused, retried with backoff) before it
fails the run (seconds)."""


class RunYieldedError(GrpoError):
    """The driver left its run to another driver (``RunDriver.yield_requested``): nothing was
    finished, the next driver resumes from the run's record."""


class DriverRecord:
    """What a driver must not lose or redo across restarts, in Redis under the run namespace:
    ``<ns>:driver:evals`` (hash: evaluation label -> its eval.jsonl row as JSON),
    ``<ns>:driver:elapsed_s`` (training seconds spent so far) and ``<ns>:driver:data`` (the
    digests of the tasks the run's first driver loaded, ``check_data``)."""

    def __init__(self, client: Any, names: StreamNames) -> None:
        """Args: client: a redis-py client; names: the run's stream names (namespace)."""
        self._client = client
        self._evals = names.key("driver", "evals")
        self._elapsed = names.key("driver", "elapsed_s")
        self._data = names.key("driver", "data")

    def check_data(self, tasks: RunTasks) -> None:
        """Record the digests of ``tasks`` (training and held-out, ``task_digest``) when this
        is the run's first driver; else check them against the recorded ones. A driver
        restarted mid-run (by ``grpo run``'s supervisor, a pod restart) loads the data again:
        a file changed meanwhile (rows appended move the held-out split) would make it feed
        the old held-out prompts as training prompts, at the feeder's old position in another
        list, and evaluate another held-out set.

        Raises:
            FailedPreconditionError: the data differs from what the run's first driver loaded
                (the message says which set); the driver exits, and ``grpo run`` ends the run
                with a summary naming it after the same failure twice.
        """
        now = {"train": task_digest(tasks.train), "heldout": task_digest(tasks.heldout),
               "train_tasks": len(tasks.train), "heldout_tasks": len(tasks.heldout)}  # fmt: skip
        self._client.set(self._data, json.dumps(now), nx=True)
        raw = self._client.get(self._data)
        first = json.loads(raw) if raw else now
        changed = [
            f"the {said} tasks ({first[f'{name}_tasks']} when the run started, "
            f"{now[f'{name}_tasks']} now)"
            for name, said in (("heldout", "held-out"), ("train", "training"))
            if first[name] != now[name]
        ]
        if changed:
            raise FailedPreconditionError(
                "the run's data changed while it ran: "
                + " and ".join(changed)
                + " differ from what its first driver loaded; a restarted driver must feed and "
                "evaluate the data the run began with: restore the data file (or data section)"
            )

    def evaluation(self, label: str) -> dict[str, Any] | None:
        """The recorded evaluation ``label`` ("sft", "step N", "final"), or None."""
        raw = self._client.hget(self._evals, label)
        return json.loads(raw) if raw else None

    def evaluations(self) -> list[dict[str, Any]]:
        """Every recorded evaluation."""
        return [json.loads(v) for v in self._client.hvals(self._evals)]

    def record_evaluation(self, row: dict[str, Any]) -> None:
        """Record an evaluation row (keyed by its ``label``)."""
        self._client.hset(self._evals, row["label"], json.dumps(row))

    def elapsed_s(self) -> float:
        """Training seconds spent by earlier drivers of this run (0 for a fresh run)."""
        raw = self._client.get(self._elapsed)
        return float(raw) if raw else 0.0

    def save_elapsed_s(self, seconds: float) -> None:
        """Store the training seconds spent so far."""
        self._client.set(self._elapsed, f"{seconds:.3f}")


PAUSE_TIMEOUT_S = 120.0
"""How long the driver waits for the learner to pause (its step in progress) or resume."""
UNRESPONSIVE_PAUSE_S = 10.0
"""How long it waits instead when the learner did not answer the last status polls."""


class Endpoints(Protocol):
    """What the driver needs from the services of a run."""

    def learner_status(self) -> learner_pb2.GetStatusResponse:
        """The learner's GetStatus (raises grpc.RpcError when it is down)."""
        ...

    def assembler_stats(self) -> assembler_pb2.AssemblerStats:
        """The assembler's GetStats counters (raises grpc.RpcError when it is down)."""
        ...

    def set_learner_paused(self, paused: bool, timeout_s: float) -> learner_pb2.SetPausedResponse:
        """The learner's SetPaused (raises grpc.RpcError when it does not answer in time)."""
        ...

    def verifier_address(self, name: str) -> str:
        """``host:port`` of the verifier service ``name``."""
        ...

    def check(self) -> None:
        """Raise when the run cannot go on (a service died and is not being restarted)."""
        ...


@dataclass
class Progress:
    """What the live display shows; also the last line of the run log.

    Attributes:
        step: learner steps done.
        policy_version: latest published policy version.
        reward: mean outcome reward of the last learner batch (nan before the first step).
        heldout_accuracy: last held-out greedy accuracy (nan before the first evaluation).
        tokens_per_s: generated tokens per second of wall clock since training started.
        stats: the assembler's counters.
        elapsed_s: seconds since training started.
        last_metrics: the learner's metrics of its last step.
    """

    step: int = 0
    policy_version: int = 0
    reward: float = float("nan")
    heldout_accuracy: float = float("nan")
    tokens_per_s: float = 0.0
    stats: assembler_pb2.AssemblerStats = field(default_factory=assembler_pb2.AssemblerStats)
    elapsed_s: float = 0.0
    last_metrics: dict[str, float] = field(default_factory=dict)


def _newest_intact_below(folder: Path) -> Path | None:
    """The newest published version folder (``v<N>`` beside ``folder``) older than it whose
    files match their digests (or that has none), or None."""
    here = int(folder.name[1:])
    older = sorted(
        (p for p in folder.parent.glob("v*") if p.name[1:].isdigit() and int(p.name[1:]) < here),
        key=lambda p: int(p.name[1:]),
        reverse=True,
    )
    for candidate in older:
        try:
            check_digests(candidate)
        except NoDigestsError:
            return candidate
        except DamagedError:
            continue
        return candidate
    return None


def _first_metric(metrics: dict[str, float], *names: str) -> float:
    for name in names:
        if name in metrics:
            return float(metrics[name])
    return float("nan")


class FeedLoop(threading.Thread):
    """The feeding thread of ``RunDriver.train``: ``feeder.pump(limit())`` every ``FEED_S``
    until ``halt``, so jobs are refilled as soon as the workers take them, also while the
    driver polls or evaluates. Redis errors are ridden out with ``outage``'s backoff (feeding
    paused); the error that ends the thread (``OutageBudgetExceededError`` past the budget, or
    any other) is kept and raised by ``check`` in the driver's loop."""

    def __init__(self, feeder: PromptFeeder, limit: Callable[[], int], outage: Outage) -> None:
        """Args:
        feeder: the run's feeder (only this thread pumps it while it runs).
        limit: jobs the next pump may write (the token budget's bound).
        outage: the driver's Redis outage clock.
        """
        super().__init__(name="grpo-feeder", daemon=True)
        self._feeder = feeder
        self._limit = limit
        self._outage = outage
        self._halt = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        pause = 0.0
        while not self._halt.wait(pause):
            try:
                self._feeder.pump(self._limit())
                self._outage.ok()
                pause = FEED_S
            except REDIS_ERRORS as exc:  # ride it out; the services do the same
                try:
                    pause = self._outage.failed(exc)
                except BaseException as fatal:  # past the outage budget
                    self.error = fatal
                    return
            except BaseException as exc:
                self.error = exc
                return

    def check(self) -> None:
        """Raise the error that stopped the thread, if any."""
        if self.error is not None:
            raise self.error

    def halt(self) -> None:
        """Stop feeding and wait for the thread's pump in progress to end."""
        self._halt.set()
        if self.is_alive():
            self.join()


class RunDriver:
    """Feeds, evaluates, enforces the budget and summarises one run (module docstring)."""

    def __init__(
        self,
        config: RunConfig,
        tasks: RunTasks,
        *,
        streams: Streams,
        names: StreamNames,
        endpoints: Endpoints,
        out_dir: Path,
        on_progress: Callable[[Progress], None] | None = None,
        log_fn: Callable[[str], None] | None = None,
        record: DriverRecord | None = None,
    ) -> None:
        """Args:
        config: the run; tasks: its task sets; streams, names: the run's Redis streams;
        endpoints: the services (see ``Endpoints``); out_dir: where ``eval.jsonl`` and
        ``summary.json`` go; on_progress: called each poll; log_fn: human-readable milestones;
        record: where evaluations and spent seconds survive a restart (None: not recorded).
        """
        self.config = config
        self.tasks = tasks
        self.streams = streams
        self.names = names
        self.endpoints = endpoints
        self.out_dir = out_dir
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._on_progress = on_progress
        self._log = log_fn or log.info
        self.progress = Progress()
        self.evals: list[dict[str, Any]] = []
        self._started_at = 0.0
        # The assembler's counters and the dead prompt jobs at the first poll (the token
        # gate's baseline; None until polled) and the dead jobs at the last poll.
        self._stats_at_start: assembler_pb2.AssemblerStats | None = None
        self._dead_jobs_at_start = 0
        self._dead_jobs = 0
        self._jobs_in_flight_at_start = 0  # an earlier driver's jobs still in flight
        self.token_gate = TokenGate.of(config)
        self._feeder: PromptFeeder | None = None
        self.record = record
        self._elapsed_before = record.elapsed_s() if record is not None else 0.0
        self.stop_requested = threading.Event()
        self.yield_requested = threading.Event()
        """With ``stop_requested``: leave the run to another driver (``drive`` raises
        ``RunYieldedError`` instead of pausing the learner and evaluating the final policy)."""
        self.redis_outage = Outage(REDIS_OUTAGE_S, backoff_max_s=1.0, what="redis (run driver)")
        self._unanswered_since = 0.0  # monotonic s of the first failed poll in a row (0: none)

    # ---------------------------------------------------------------- evaluation
    def evaluate(self, model: Path | str, label: str, *, due: int | None = None) -> float:
        """Held-out accuracy of the policy in ``model`` (appended to ``eval.jsonl``; recorded
        in the ``DriverRecord``, and taken from it when a restarted driver asks again).

        Args:
            model: the policy folder; label: "sft", "step N" or "final"; due: the step
                multiple of ``eval.every_steps`` this evaluation is for.

        Returns:
            Accuracy in [0, 1]; nan when the held-out set is empty.
        """
        if not self.tasks.heldout:
            return float("nan")
        done = self.record.evaluation(label) if self.record is not None else None
        if done is not None and (label != "final" or done.get("model_dir") == str(model)):
            self.evals.append(done)
            self._log(f"held-out accuracy ({label}): {done['accuracy']:.3f} (recorded earlier)")
            return float(done["accuracy"])
        started = time.perf_counter()
        outcome = None
        primary = plan_verifiers(self.config.verifiers, [self.tasks.task_type]).primary(
            self.tasks.task_type
        )
        if self.tasks.task_type == "code" and primary.form != "endpoint":
            # The sandbox runs in the verifier's own process (never here); an endpoint is
            # called by heldout_accuracy itself.
            outcome = self.endpoints.verifier_address(primary.service)
        out_dir = self.out_dir / "eval" / label.replace(" ", "-")  # samples.jsonl, summary
        model, pinned = self._pin(Path(model), out_dir / "policy")
        try:
            result = heldout_accuracy(
                pinned,
                self.tasks.heldout,
                config=self.config,
                task_type=self.tasks.task_type,
                outcome_address=outcome,
                out_dir=out_dir,
            )
        finally:
            if pinned != model:
                shutil.rmtree(pinned, ignore_errors=True)
        row = {
            "label": label,
            "step": self.progress.step,
            "generated_tokens": self.progress.stats.generated_tokens,
            "accuracy": result.accuracy,
            "correct": result.correct,
            "total": result.total,
            "eval_s": round(time.perf_counter() - started, 2),
            "model_dir": str(model),
            "wall_clock_s": round(self._elapsed(), 2),
        }
        if due is not None:
            row["due"] = due
        if self.record is not None:
            self.record.record_evaluation(row)
        self.evals.append(row)
        with (self.out_dir / "eval.jsonl").open("a") as fh:
            fh.write(json.dumps(row) + "\n")
        self._log(
            f"held-out accuracy ({label}): {result.accuracy:.3f} ({result.correct}/{result.total})"
        )
        return float(result.accuracy)

    def _pin(self, model: Path, dest: Path, attempts: int = 3) -> tuple[Path, Path]:
        """``(evaluated folder, folder to load)``: a published version (``weights/v<N>``) is
        snapshot to ``dest`` first, since the learner keeps training and prunes old versions
        while an evaluation runs; a version pruned before it could be pinned is replaced by
        the newest published one (recorded as the evaluated folder). Other folders (the
        initial policy, a pulled copy) are loaded in place.

        A damaged version (its files differ from the digests recorded at publication) is
        replaced by the newest intact version below it (one warning line).

        Raises:
            NotFoundError: every attempt found its version pruned or incomplete.
            DamagedError: the version is damaged and no older intact one is left.
        """
        from grpo.errors import NotFoundError

        if model.parent.name != "weights" or not re.fullmatch(r"v\d+", model.name):
            return model, model
        for attempt in range(1, attempts + 1):
            try:
                return model, snapshot_policy(model, dest)
            except DamagedError as exc:
                intact = _newest_intact_below(model)
                if intact is None:
                    raise
                log.error("%s; evaluating the newest intact version %s instead", exc, intact)
                self._log(f"warning: {model.name} is damaged; evaluating {intact.name} instead")
                model = intact
                continue
            except NotFoundError:
                newest = self.published_policy()
                if attempt == attempts or newest is None or Path(newest.path) == model:
                    raise
                log.warning(
                    "policy %s was pruned before its evaluation; using %s", model, newest.path
                )
                model = Path(newest.path)
        return model, model  # attempts < 1: load in place

    # ---------------------------------------------------------------- feeding and polling
    def make_feeder(self) -> PromptFeeder:
        """The prompt feeder of this run (backpressure bounds from ``generation``/``learner``)."""
        cfg = self.config
        cur = cfg.data.curriculum
        curriculum = (
            PassRateCurriculum(
                seed=cfg.seed,
                min_accept=cur.min_accept,
                power=cur.power,
                half_life=cur.half_life,
                bucket_field=cur.bucket_field,
            )
            if cur.enabled
            else None
        )
        return PromptFeeder(
            self.streams,
            self.names,
            self.tasks.train,
            group_size=cfg.generation.group_size,
            prompts_ahead=cfg.generation.prompts_ahead,
            groups_ahead=cfg.generation.groups_ahead or 2 * cfg.learner.batch_groups,
            worker_group=WORKER_GROUP,
            learner_group=LEARNER_GROUP,
            seed=cfg.seed,
            repeats=cfg.data.prompt_repeats,
            curriculum=curriculum,
            correct_threshold=cfg.assembler.dynamic_sampling.correct_threshold,
        )

    def published_policy(self) -> common_pb2.PolicyWeights | None:
        """The latest PolicyWeights the learner published, or None."""
        return read_policy(self.streams.client, self.names)

    def wait_for_publish(
        self, step: int, timeout_s: float = 60.0
    ) -> common_pb2.PolicyWeights | None:
        """Wait until the learner has published the weights of ``step`` (or give up).

        Returns:
            The latest PolicyWeights (possibly older than ``step`` after the timeout or when a
            service died), or None.
        """
        deadline = time.monotonic() + timeout_s
        policy = self.published_policy()
        while (policy is None or policy.step < step) and time.monotonic() < deadline:
            try:
                self.endpoints.check()
            except Exception:
                break
            time.sleep(0.2)
            policy = self.published_policy()
        return policy

    def _elapsed(self) -> float:
        """Training seconds of this run: earlier drivers' plus this one's since ``train``
        (a driver that is not training reads what the record says)."""
        if not self._started_at:
            return self.record.elapsed_s() if self.record is not None else self._elapsed_before
        return self._elapsed_before + time.time() - self._started_at

    def _first_due_eval(self) -> int:
        """The multiple of ``eval.every_steps`` after the last recorded evaluation (0 = off)."""
        every = self.config.eval.every_steps
        if not every:
            return 0
        done = [
            int(r["due"]) for r in (self.record.evaluations() if self.record else []) if "due" in r
        ]
        return max(done, default=0) + every

    def poll(self) -> Progress:
        """Refresh ``self.progress`` from the learner and the assembler."""
        status = self.endpoints.learner_status()
        stats = self.endpoints.assembler_stats()
        p = self.progress
        p.step = int(status.step)
        p.policy_version = int(status.policy_version)
        p.last_metrics = dict(status.last_metrics)
        p.reward = _first_metric(p.last_metrics, GROUPS_REWARD_MEAN)
        p.stats = stats
        if self.token_gate.budget:  # the token gate's counts (Redis reads only with a budget)
            self._poll_dead_jobs()
            if self._stats_at_start is None:
                self._take_token_baseline(stats)
        p.elapsed_s = self._elapsed()
        if self.record is not None and self._started_at:
            try:  # best effort: the next poll saves it again (Redis may be out or full)
                self.record.save_elapsed_s(p.elapsed_s)
            except REDIS_ERRORS as exc:
                log.warning("spent seconds not recorded this time: %s", exc)
        p.tokens_per_s = stats.generated_tokens / max(p.elapsed_s, 1e-9)
        if self._on_progress is not None:
            self._on_progress(p)
        return p

    def train(self, steps: int | None = None) -> str:
        """Feed and monitor until the step, token or time budget is reached.

        Args:
            steps: learner steps to reach (default ``budget.steps``).

        Returns:
            Why it stopped: "steps", "generated_tokens", "wall_clock", "exhausted", or
            "interrupted" (``stop_requested`` was set).

        Raises:
            FailedPreconditionError: a service died (``Endpoints.check``).
            OutageBudgetExceededError: Redis stayed unreachable longer than
                ``REDIS_OUTAGE_S`` (raised from the feeding thread).
        """
        cfg = self.config
        target = steps or cfg.budget.steps
        if not self._started_at:
            self._started_at = time.time()
        if self._feeder is None:
            self._feeder = self.make_feeder()
        feeder = self._feeder
        feed = FeedLoop(feeder, lambda: self.jobs_within_token_budget(feeder), self.redis_outage)
        feed.start()
        try:
            return self._monitor(feeder, feed, target)
        finally:
            feed.halt()
            # Training time ends here, whether or not the last polls were answered.
            self.progress.elapsed_s = self._elapsed()

    def _monitor(self, feeder: PromptFeeder, feed: FeedLoop, target: int) -> str:
        """``train``'s loop while ``feed`` feeds: poll, stop on a budget, evaluate."""
        cfg = self.config
        deadline = time.monotonic() + cfg.budget.wall_clock_s - self._elapsed_before
        next_eval = self._first_due_eval()
        idle_since = time.monotonic()
        warned_no_signal = False
        while True:
            # The wall clock first: whatever the polls return (a hung learner answers none,
            # Redis may be out), it ends the run on time.
            if self.stop_requested.is_set():
                return "interrupted"
            if time.monotonic() > deadline:
                return "wall_clock"
            self.endpoints.check()
            feed.check()
            if self.redis_outage.in_outage:  # the feeder rides it out; so does the loop
                self.stop_requested.wait(POLL_S)
                continue
            try:
                progress = self.poll()
            except grpc.RpcError as exc:
                self._unanswered_since = self._unanswered_since or time.monotonic()
                silent = time.monotonic() - self._unanswered_since
                log.warning("status poll failed (no answer for %.0f s): %s", silent, exc)
                self.stop_requested.wait(POLL_S)
                continue
            self._unanswered_since = 0.0
            if progress.step >= target:
                return "steps"
            if self.token_budget_spent(feeder):
                return "generated_tokens"
            if feeder.exhausted and progress.stats.groups_pending == 0:
                if time.monotonic() - idle_since > 60:
                    return "exhausted"
            else:
                idle_since = time.monotonic()
            if not warned_no_signal:
                warned_no_signal = self.warn_if_no_signal(progress.stats)
            if next_eval and progress.step >= next_eval:
                # Feeding goes on during an evaluation, so a fast learner can pass several
                # multiples meanwhile: evaluate the latest one passed (the policies of the
                # others are gone), so the evaluations stay in step order, one per due.
                due = progress.step // cfg.eval.every_steps * cfg.eval.every_steps
                next_eval = due + cfg.eval.every_steps
                policy = self.published_policy()
                if policy is not None and policy.path:
                    progress.heldout_accuracy = self.evaluate(
                        Path(policy.path), f"step {progress.step}", due=due
                    )
            self.stop_requested.wait(POLL_S)

    def token_counts(self, feeder: PromptFeeder) -> TokenCounts | None:
        """What the token gate reads (``token_budget.TokenCounts``): the last poll's counters
        since the first poll, and the jobs ``feeder`` wrote; None before the first poll."""
        start = self._stats_at_start
        if start is None:
            return None
        stats = self.progress.stats
        return TokenCounts(
            counted=int(stats.generated_tokens),
            issued_jobs=feeder.fed
            + int(stats.regenerations - start.regenerations)
            + self._jobs_in_flight_at_start,
            received=int(stats.rollouts_received - start.rollouts_received),
            late=int(stats.rollouts_late - start.rollouts_late),
            closed=closed_groups(stats)
            - closed_groups(start)
            + self._dead_jobs
            - self._dead_jobs_at_start,
        )

    def jobs_within_token_budget(self, feeder: PromptFeeder, limit: int = 64) -> int:
        """Prompt jobs the feeder may still write (at most ``limit``) under
        ``budget.generated_tokens`` (0 = no bound: ``limit``): none whose worst case (G·L_max
        per group, its possible regenerations included) could pass what is left once every
        job issued and not yet counted is reserved at its worst case
        (``token_budget.TokenGate.jobs``); 0 before the first poll (the counts are unknown)."""
        if not self.token_gate.budget:
            return limit
        counts = self.token_counts(feeder)
        return 0 if counts is None else self.token_gate.jobs(counts, limit)

    def token_budget_spent(self, feeder: PromptFeeder) -> bool:
        """The token budget is spent (``token_budget.TokenGate.spent``): the counted tokens
        reached it, or every issued group closed and no further job fits."""
        counts = self.token_counts(feeder)
        return counts is not None and self.token_gate.spent(counts)

    def _take_token_baseline(self, stats: assembler_pb2.AssemblerStats) -> None:
        """The token gate's baseline at the first poll: the assembler's counters, the dead
        jobs, and the jobs an earlier driver of this run left in flight (jobs the rollout
        workers have not finished, plus the groups the assembler holds open; a job whose
        group just opened may count twice, which only reserves more). Left unset while Redis
        does not answer (the gate feeds nothing until it is set)."""
        try:
            unfinished = self.streams.lag(self.names.prompts, WORKER_GROUP)
        except REDIS_ERRORS as exc:
            log.warning("token budget baseline not taken this time: %s", exc)
            return
        self._jobs_in_flight_at_start = int(unfinished + stats.groups_pending)
        self._dead_jobs_at_start = self._dead_jobs
        self._stats_at_start = stats

    def _poll_dead_jobs(self) -> None:
        """Read how many prompt jobs the rollout workers moved to dead letters (jobs that will
        never have a rollout; the last value is kept while Redis does not answer)."""
        try:
            self._dead_jobs = int(self.streams.client.xlen(f"{self.names.prompts}:dead"))
        except REDIS_ERRORS as exc:
            log.warning("dead prompt jobs not read this time: %s", exc)

    def warn_if_no_signal(self, stats: assembler_pb2.AssemblerStats) -> bool:
        """Log once that no group with a reward spread has closed out of ``NO_SIGNAL_GROUPS``
        closed ones (the policy solves none of the prompts, or all of them; dropped by dynamic
        sampling or, with its mode off, trained on at zero advantage): the run then only burns
        generation until a budget ends it. Returns True when it warned."""
        rejected = stats.groups_rejected_all_correct + stats.groups_rejected_all_wrong
        zero = max(stats.groups_zero_variance, rejected)
        informative = stats.groups_accepted - (zero - rejected)  # accepted with a spread
        if informative > 0 or zero < NO_SIGNAL_GROUPS:
            return False
        if rejected:
            kind = (
                "all wrong"
                if stats.groups_rejected_all_wrong >= stats.groups_rejected_all_correct
                else "all correct"
            )
            detail = (
                f"mostly {kind}; {stats.groups_rejected_all_wrong} all wrong, "
                f"{stats.groups_rejected_all_correct} all correct"
            )
        else:
            detail = "each all correct or all wrong, trained on with dynamic sampling off"
        self._log(
            f"warning: {zero} groups closed and none had a reward spread ({detail}): no group "
            "has anything to learn from. Check the warm start (held-out accuracy above), the "
            "task difficulty, or assembler.dynamic_sampling."
        )
        return True

    # ---------------------------------------------------------------- the whole job
    def drive(
        self,
        initial_model: Path | str | None = None,
        steps: int | None = None,
        *,
        started: float | None = None,
    ) -> RunSummary:
        """Evaluate the initial policy ("sft"), train until a budget or ``stop_requested``,
        pause the learner (SetPaused: it takes no step after the one in progress), wait for
        that step's weights, evaluate them ("final") and write ``summary.json``.

        Args:
            initial_model: the initial policy's folder; None = the folder of the published
                version 0 (the learner publishes ``model.path`` as version 0).
            steps: learner steps to reach (default ``budget.steps``).
            started: ``time.time()`` when the run began (default: now).

        Returns:
            The summary written to ``out_dir/summary.json`` (``leftover_processes`` empty: the
            driver starts no process).

        Raises:
            FailedPreconditionError: no initial policy given and none published.
            grpc.RpcError / redis errors: a service stayed unreachable (a restart resumes).
        """
        from grpo.errors import FailedPreconditionError

        started = time.time() if started is None else started
        if initial_model is None:
            first = self.published_policy()
            if first is None or not first.path:
                raise FailedPreconditionError(
                    "no initial policy: give the driver one or let the learner publish version 0"
                )
            initial_model = first.path
        sft_accuracy = self.evaluate(initial_model, "sft")
        self._pause_learner(False)  # a driver restarted after the pause below trains again
        stop_reason = self.train(steps)
        if stop_reason == "interrupted" and self.yield_requested.is_set():
            raise RunYieldedError(
                "left the run to the next driver: no pause, no final evaluation, no summary "
                f"(training seconds spent so far: {self.progress.elapsed_s:.1f}, recorded)"
            )
        paused_at = self._pause_learner(True)
        try:
            self.poll()
        except grpc.RpcError as exc:
            log.warning("final status poll failed: %s", exc)
        final_step = self.progress.step if paused_at is None else paused_at
        policy = self.wait_for_publish(final_step)
        final_dir = policy.path if policy is not None and policy.path else initial_model
        final_accuracy = self.evaluate(final_dir, "final")
        return self.summary(
            stop_reason=stop_reason,
            sft_accuracy=sft_accuracy,
            final_accuracy=final_accuracy,
            final_step=final_step,
            policy=policy,
            started=started,
            outages=Outages(self.reported_outages(), "GetStatus/GetStats (per process)"),
        )

    def _pause_learner(self, paused: bool) -> int | None:
        """Pause the learner (before the final evaluation: it then scores the last step and
        the learner trains no further) or let it train; the learner's step then, or None when
        it did not answer within ``PAUSE_TIMEOUT_S`` (logged: a pause that failed leaves the
        learner training during the final evaluation, which ``summary.json``'s
        ``last_published_step`` shows)."""
        # A learner that has not answered the last polls is hung or gone: a pause it cannot
        # serve must not hold the final evaluation for PAUSE_TIMEOUT_S.
        timeout = UNRESPONSIVE_PAUSE_S if self._unanswered_since else PAUSE_TIMEOUT_S
        try:
            reply = self.endpoints.set_learner_paused(paused, timeout)
        except grpc.RpcError as exc:
            log.warning("the learner did not %s: %s", "pause" if paused else "resume", exc)
            return None
        return int(reply.step)

    def reported_outages(self) -> dict[str, dict[str, float]]:
        """Outage seconds per dependency per service as the services report them: this
        driver's own Redis outages, the learner's ``LEARNER_REDIS_OUTAGE_S`` (GetStatus, its
        last step's metrics) and the assembler's ``redis_outage_s`` and ``verifier_outage_s``
        (GetStats), from the last ``poll``. Shape ``{dependency: {service: seconds}}``, as
        ``grpo.local.outages.service_outages`` (which ``grpo run`` uses instead:
        it reads the services' logs). The Redis figures are per process: a restarted service
        starts again at 0; ``verifier_outage_s`` is kept across assembler restarts."""
        p = self.progress
        return {
            "redis": {
                "assembler": round(p.stats.redis_outage_s, 2),
                "driver": round(self.redis_outage.total_s, 2),
                "learner": round(p.last_metrics.get(LEARNER_REDIS_OUTAGE_S, 0.0), 2),
            },
            "verifiers": {"assembler": round(p.stats.verifier_outage_s, 2)},
        }

    # ---------------------------------------------------------------- summary
    def recorded_evals(self) -> list[dict[str, Any]]:
        """Every evaluation of the run so far, earlier drivers' included, in step order
        (this driver's own when Redis does not answer)."""
        rows = list(self.evals)
        if self.record is not None:
            try:
                rows = self.record.evaluations()
            except REDIS_ERRORS as exc:
                log.warning("recorded evaluations unreadable (%s); this driver's only", exc)
        order = {"sft": 0, "final": 2}
        return sorted(rows, key=lambda r: (order.get(r["label"], 1), r.get("step", 0)))

    def _curriculum_summary(self) -> dict[str, Any] | None:
        """``curriculum``: this driver's prompt decisions per bucket (None when it is off)."""
        feeder = self._feeder
        if feeder is None or feeder.curriculum is None:
            return None
        return {
            "fed": feeder.fed,
            "skipped": feeder.skipped,
            "buckets": feeder.curriculum.stats(),
        }

    def summary(
        self,
        *,
        stop_reason: str,
        sft_accuracy: float,
        final_accuracy: float,
        final_step: int,
        policy: common_pb2.PolicyWeights | None,
        started: float,
        leftover_processes: tuple[int, ...] = (),
        accounting: RunAccounting | None = None,
        outages: Outages | None = None,
        write: bool = True,
    ) -> RunSummary:
        """The run's ``RunSummary`` (written to ``summary.json`` unless ``write`` is False).

        Args:
            stop_reason: why training stopped (``train``'s answer, "interrupted" or "error").
            sft_accuracy, final_accuracy: held-out accuracy before and after GRPO.
            final_step: learner steps done when training stopped.
            policy: the final published policy (None when none was published).
            started: ``time.time()`` when the run began (SFT included).
            leftover_processes: pids killed after the services stopped (should be empty).
            accounting: the run's accounting; None = the assembler's counters of the last
                poll (produced and queued unknown).
            outages: seconds per dependency per service; None = not gathered.
            write: write ``out_dir/summary.json``.
        """
        summary = RunSummary(
            config=self.config.name,
            stop_reason=stop_reason,
            sft_accuracy=sft_accuracy,
            final_accuracy=final_accuracy,
            steps=max(final_step, self.progress.step),
            final_policy_version=policy.policy_version if policy is not None else 0,
            final_policy_step=policy.step if policy is not None else 0,
            accounting=accounting or RunAccounting.from_stats(self.progress.stats),
            grpo_wall_clock_s=round(self.progress.elapsed_s, 1),
            wall_clock_s=round(time.time() - started, 1),
            evals=tuple(self.recorded_evals()),
            leftover_processes=tuple(leftover_processes),
            outages=outages,
            curriculum=self._curriculum_summary(),
        )
        if write:
            summary.write(self.out_dir / "summary.json")
        return summary
