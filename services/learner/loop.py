"""The learner's consume -> train -> checkpoint -> acknowledge loop (a ``BackgroundWorker``).

Exactly-once protocol (no group lost, none trained twice in the surviving lineage, whatever
moment the process is SIGKILLed):

1. Groups are read from the groups stream with a consumer group (XREADGROUP); a read entry
   stays *pending* in Redis until acknowledged.
2. After each step the group ids join the in-memory *consumed* list and the entry ids join
   the *unacknowledged* list. Nothing is acknowledged yet: the step's effect lives only in
   process memory.
3. Every ``checkpoint_every`` steps (and on a clean stop) a checkpoint recording the model,
   optimizer, RNG and the consumed ids is written atomically (temp folder + rename + fsync).
   Only after that are the entries it covers acknowledged (XACK).
4. On start the learner restores the newest checkpoint (consumed ids included), drops run-log
   lines of later steps, and takes over every pending entry of its consumer group (XAUTOCLAIM
   with idle 0; the learner is the group's only consumer). A pending entry whose group id is
   in the restored consumed set was trained and checkpointed but its XACK was lost: it is
   acknowledged and skipped. Every other pending entry was either never trained or trained
   only in the lost process memory: it is trained now.

SIGKILL between 2 and 3 loses the steps since the last checkpoint together with the model
state they produced, and step 4 repeats exactly those groups; SIGKILL between the rename and
the XACKs leaves entries that step 4 skips. A group id that arrives twice (a duplicate entry)
is acknowledged and skipped. A group that can never be trained (``check_group`` fails) is
copied to ``<groups>:dead`` with the reason and acknowledged. Weights published from a lost
step are superseded: on resume, when any version newer than the checkpoint's exists (in Redis
or on disk), the restored model is published under the next unused number
(``grpo.services.learner.publish.next_version``), so generation drops the lost lineage.

Reading follows the one stream-consumer protocol (``grpo.services.runtime.streams.StreamConsumer``);
every Redis call rides out an outage with backoff (``Outage``, ``redis_outage_s``). The
crash policy is the one of every consumer: a failed loop ends its thread, ``is_alive()`` turns
False, ``serve`` drains the process and exits non-zero, and the supervisor restarts it.
The assembler's counters come from its ``GetStats`` RPC (``assembler_address``).

With other ranks (``parallel``), this loop drives them (``grpo.learner.distributed.RankCommand``):
a train command per batch, a heartbeat after ``dist_heartbeat_s`` without one (an idle world
notices a dead rank), and, for an FSDP-sharded model, a gather command before each publish
and checkpoint. A failed collective (a rank died) fails the loop like any error; the loop
then sends no stop command, and the process exits, so the other ranks' next collective
fails too and every rank restarts from the last checkpoint, which step 4 resumes exactly.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

import torch

from grpo.errors import (
    FailedPreconditionError,
    GrpoError,
    InvalidArgumentError,
    UnavailableError,
)
from grpo.integrity import DamagedError, NoDigestsError, check_digests
from grpo.learner import metric_names as mn
from grpo.learner.checkpoint import (
    DAMAGED_PREFIX,
    CheckpointState,
    intact_checkpoint,
    load_checkpoint,
    quarantine,
    save_checkpoint,
)
from grpo.learner.diagnostics import undecided_diagnostics
from grpo.learner.distributed import FullModelView, RankCommand, gather_full_state
from grpo.learner.lora import is_lora, merged_view
from grpo.learner.tracking import open_tracker
from grpo.learner.trainer import Trainer
from grpo.services.learner.batch import check_group, group_rows, outcome_reward
from grpo.services.learner.publish import (
    highest_folder_version,
    next_version,
    publish_weights,
)
from grpo.services.learner.runlog import RunLog
from grpo.services.learner.settings import LearnerServiceSettings
from grpo.services.runtime.policy import read_policy
from grpo.services.runtime.score_status import is_undecided
from grpo.services.runtime.streams import Outage, StreamConsumer, StreamEntry, StreamNames, Streams
from grpo.v1 import common_pb2

__all__ = ["LearnerLoop", "LearnerStatus", "group_records_for", "resolved_config"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LearnerStatus:
    """A consistent snapshot for ``GetStatus``."""

    step: int
    policy_version: int
    consumed_groups: int
    last_metrics: dict[str, float] = field(default_factory=dict)
    last_checkpoint: str = ""
    paused: bool = False


T = TypeVar("T")


def group_records_for(
    groups: Sequence[common_pb2.Group], step: int, algo: Any
) -> list[dict[str, Any]]:
    """The ``groups.jsonl`` records of one step's groups.

    Fields: step, group_id, prompt_id, task_type, status, round, rewards (None = missing; the
    combined reward with several weighted rewards), mean, std (the algo's convention), correct
    (read from the primary reward), missing, zero_variance (from
    ``grpo.learner.diagnostics.group_records``), response_tokens, policy_versions,
    straggler_wait_s (seconds).
    """
    from grpo.learner.diagnostics import group_records

    size = max(max(int(g.group_size), len(g.members)) for g in groups)
    rewards = torch.full((len(groups), max(size, 2)), float("nan"), dtype=torch.float64)
    for p, g in enumerate(groups):
        for m in g.members:
            r = outcome_reward(m)
            if r is not None and m.rollout.index < rewards.shape[1]:
                rewards[p, m.rollout.index] = r
    graded = rewards.clone()  # correct counts read the primary reward (several rewards)
    for p, g in enumerate(groups):
        for m in g.members:
            if len(m.components) > 1 and m.rollout.index < graded.shape[1]:
                graded[p, m.rollout.index] = float(m.outcome.reward)
    stats = group_records(
        rewards,
        group_ids=[g.group_id for g in groups],
        std=algo.std,
        eps=algo.eps,
        correct_rewards=graded,
    )
    out = []
    for g, st in zip(groups, stats, strict=True):
        first = g.members[0].rollout if g.members else common_pb2.Rollout()
        out.append(
            {
                "step": step,
                "group_id": g.group_id,
                "prompt_id": g.prompt_id,
                "task_type": first.task.type,
                "status": common_pb2.GroupStatus.Name(g.status),
                "round": g.round,
                "rewards": [outcome_reward(m) for m in g.members],
                "mean": st.mean,
                "std": st.std,
                "correct": st.correct,
                "missing": int(g.group_size) - (st.size - st.missing),
                "zero_variance": st.zero_variance,
                "response_tokens": [len(m.rollout.completion.token_ids) for m in g.members],
                "policy_versions": [int(m.rollout.completion.policy_version) for m in g.members],
                "straggler_wait_s": g.straggler_wait_s,
            }
        )
    return out


class LearnerLoop:
    """Consumes B groups per step, trains, publishes every K and checkpoints every M steps.

    Args:
        settings: the service settings.
        client: a redis-py client (binary responses).
        trainer: the trainer (model on its device).
        tokenizer: saved with every published weights folder.
        parallel: ``grpo.learner.distributed.DataParallel`` of rank 0 when world_size > 1.
        assembler_stats: returns the assembler's counters (name -> value) or {} (default: the
            GetStats RPC at ``settings.assembler_address``, when set).
    """

    def __init__(
        self,
        settings: LearnerServiceSettings,
        *,
        client: Any,
        trainer: Trainer,
        tokenizer: Any,
        parallel: Any | None = None,
        assembler_stats: Any | None = None,
    ) -> None:
        self.settings = settings
        self.names = StreamNames(settings.namespace)
        self.client = client
        self._checkpoint_key = self.names.key("learner", "checkpoint_step")
        self.streams = Streams(client)
        self.outage = Outage(settings.redis_outage_s, what="redis (learner)")
        self.groups = StreamConsumer(
            self.streams,
            self.names.groups,
            settings.consumer_group,
            settings.consumer,
            common_pb2.Group,
            reclaim_idle_ms=0,
        )
        self._assembler_stats = assembler_stats or _assembler_stats_rpc(settings.assembler_address)
        self.trainer = trainer
        self.tokenizer = tokenizer
        self.parallel = parallel
        self.run_dir = Path(settings.run_dir)
        self.ckpt_root = self.run_dir / "checkpoints"
        self.runlog = RunLog(self.run_dir)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._requests: queue.Queue[tuple[threading.Event, list[Any], Callable[[], Any]]] = (
            queue.Queue()
        )
        self._paused = False
        self._published_step = -1
        self.error: BaseException | None = None

        self.consumed: list[str] = []
        self._consumed_set: set[str] = set()
        self._unacked: list[str] = []
        self._buffer: list[StreamEntry[common_pb2.Group]] = []
        self.policy_version = 0
        self.trained_tokens = 0
        self.run_start_unix_s = time.time()
        self.wait_s_total = 0.0
        self.last_metrics: dict[str, float] = {}
        self.last_checkpoint = ""
        self._ckpt_step = 0
        self._commanded_at = time.monotonic()  # last command sent to the other ranks
        self._beat = time.monotonic()  # the loop's last turn (progress_age_s)
        self._resume()

    # ------------------------------------------------------------------ lifecycle
    def _resume(self) -> None:
        """Restore the newest checkpoint (if any) and align the policy version with Redis; a
        fresh run publishes the initial policy as version 0."""
        path, state = self._restore()
        if path is not None and state is not None:
            t = self.trainer
            t.step_count = state.step
            self.consumed = list(state.consumed_group_ids)
            self._consumed_set = set(self.consumed)
            self.policy_version = state.policy_version
            self.trained_tokens = int(state.extra.get("trained_tokens", 0))
            self.run_start_unix_s = float(state.extra.get("run_start_unix_s", time.time()))
            self.wait_s_total = float(state.extra.get("wait_s_total", 0.0))
            t.skipped_steps_total = int(state.extra.get("skipped_steps_total", 0))
            self.last_checkpoint = str(path)
            self._ckpt_step = state.step
            log.info("resumed", extra={"checkpoint": str(path), "step": state.step})
        self.runlog.truncate_after(self.trainer.step_count)
        self.runlog.tracker = open_tracker(
            self.settings.logging,
            self.run_dir,
            settings=resolved_config(self.settings),
            # Steps after the restored one (0 = none) were lost: their older values go.
            resume_step=self.trainer.step_count,
        )
        key = self.names.policy_key
        announced = self.outage.call(lambda: read_policy(self.client, key))
        in_redis = -1 if announced is None else int(announced.policy_version)
        newest = max(in_redis, highest_folder_version(self.run_dir))
        unusable = announced is not None and _unusable(Path(announced.path), self.run_dir)
        if (
            newest > self.policy_version
            or (path is not None and in_redis != self.policy_version)
            or unusable
        ):
            # Weights of steps lost with the previous process exist (generation may hold
            # them), or the announced folder is gone (a moved run dir) or damaged: publish the
            # restored model under a number never used before.
            self._publish(self.outage.call(lambda: next_version(self.client, key, self.run_dir)))
        elif newest < 0:
            # A fresh run: the initial policy (model_path) is published as version 0, the
            # version generation starts from and the run driver evaluates first.
            self._publish(0)
        else:
            self.policy_version = max(self.policy_version, in_redis, 0)
            self._published_step = self.trainer.step_count  # that version holds these weights

    def _restore(self) -> tuple[Path | None, CheckpointState | None]:
        """Load the newest intact checkpoint into the trainer (``intact_checkpoint``); one
        that fails its digests, or to load, is moved aside with one clear log line naming why
        and the checkpoint used instead (the groups of its steps were acknowledged and are
        not trained again: the run goes on from the older step)."""
        t = self.trainer
        while True:
            path, skipped = intact_checkpoint(self.ckpt_root)
            state = None
            if path is not None:
                try:
                    state = load_checkpoint(path, model=t.model, optimizer=t.optimizer,
                                            scheduler=t.scheduler, critic=t.critic)  # fmt: skip
                except Exception as exc:  # unreadable although its digests (if any) match
                    skipped.append((quarantine(path, f"failed to load: {exc!r}"), repr(exc)))
            intact = state is not None and path is not None
            using = path.name if intact and path is not None else "none (no intact checkpoint)"
            for moved, why in skipped:
                log.error(
                    "checkpoint %s is damaged and skipped (%s); kept as %s; resuming from %s",
                    moved.name.split("-", 1)[1].rsplit("-", 1)[0], why, moved.name, using,
                    extra={"checkpoint_damaged": moved.name, "resumed_from": using},
                )  # fmt: skip
            if state is None and path is None:
                self._refuse_fresh_start()
            if state is not None or path is None:
                return path, state

    def _refuse_fresh_start(self) -> None:
        """No intact checkpoint: a fresh start, unless this run checkpointed before (its
        checkpoints were damaged and moved aside, or the newest one it recorded in Redis is
        gone). Starting over then would silently drop every trained step: the groups those
        checkpoints covered were acknowledged and are never trained again.

        Raises:
            DamagedError: the run checkpointed before and nothing of it is intact (the
                learner fails; two equal failures in a row end ``grpo run`` with a summary
                naming it).
        """
        root = Path(self.ckpt_root)
        damaged = sorted(p.name for p in root.glob(f"{DAMAGED_PREFIX}*")) if root.is_dir() else []
        recorded = self.outage.call(lambda: self.client.get(self._checkpoint_key))
        step = int(recorded) if recorded else 0
        if not damaged and step <= 0:
            return
        seen = f"damaged and moved aside: {', '.join(damaged)}" if damaged else "none left"
        raise DamagedError(
            f"no intact checkpoint in {root} ({seen}), but this run checkpointed up to step "
            f"{step or 'unknown'}: refusing to start over from the initial model, which would "
            "drop every trained step silently (their groups were acknowledged); put an intact "
            "checkpoint back (a damaged-* folder's DAMAGED.txt says what is wrong) or start a "
            "new run"
        )

    def start(self) -> None:
        """Start the loop thread (returns at once)."""
        if self._thread is not None:
            raise FailedPreconditionError("the learner loop is already running")
        self._thread = threading.Thread(target=self._run, name="learner-loop", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float) -> None:
        """Finish the step in progress, checkpoint and acknowledge, then join the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def run(self) -> None:
        """Run the loop in the calling thread until ``stop`` (idles after ``max_steps``)."""
        self._run()

    def is_alive(self) -> bool:
        """True while the loop thread runs; False once it failed (``serve`` then exits
        non-zero so the supervisor restarts the learner from its checkpoint)."""
        return self._thread is not None and self._thread.is_alive()

    def progress_age_s(self) -> float:
        """Seconds since the loop last turned (a step, a wait for groups or a pause each end
        a turn); 0.0 while it rides out a Redis outage (waiting by policy is progress) or once
        stopped. ``serve`` reports NOT_SERVING past ``server.stall_s``."""
        if self._stop.is_set() or self.outage.in_outage:
            return 0.0
        return time.monotonic() - self._beat

    def _redis(self, fn: Any) -> Any:
        """Run a Redis step, riding out an outage (``Outage.call``; stops with the loop)."""
        return self.outage.call(fn, stop=self._stop)

    def status(self) -> LearnerStatus:
        """Step, policy version, consumed groups, last metrics and checkpoint (thread-safe)."""
        with self._lock:
            return LearnerStatus(
                step=self.trainer.step_count,
                policy_version=self.policy_version,
                consumed_groups=len(self.consumed),
                last_metrics=dict(self.last_metrics),
                last_checkpoint=self.last_checkpoint,
                paused=self._paused,
            )

    def request_checkpoint(self, timeout_s: float | None = None) -> tuple[str, int]:
        """Ask the loop to checkpoint after the step in progress; wait for the result.

        Returns:
            (checkpoint folder, step).

        Raises:
            FailedPreconditionError: the loop is not running or did not answer in time.
        """
        return self._between_steps(
            lambda: (self._checkpoint(), self.trainer.step_count), timeout_s, "checkpoint"
        )

    def set_paused(self, paused: bool, timeout_s: float | None = None) -> tuple[int, int]:
        """Pause training after the step in progress, or train again; wait until it applies.

        A pause publishes the weights of the last step first when ``publish_every`` skipped
        them, so the run driver's final evaluation scores the last step (it pauses the
        learner before that evaluation). A new learner process trains: a pause is not kept.

        Returns:
            (step, policy version) when it applied.

        Raises:
            FailedPreconditionError: the loop is not running or did not answer in time.
        """

        def apply() -> tuple[int, int]:
            if paused and self._published_step < self.trainer.step_count:
                self._publish(self.policy_version + 1)
            self._paused = paused
            log.info("training paused" if paused else "training resumed",
                     extra={"step": self.trainer.step_count})  # fmt: skip
            return self.trainer.step_count, self.policy_version

        return self._between_steps(apply, timeout_s, "pause" if paused else "resume")

    def _between_steps(self, fn: Callable[[], T], timeout_s: float | None, what: str) -> T:
        """Run ``fn`` in the loop thread between two steps; its result (or error) here."""
        if self._thread is None or not self._thread.is_alive():
            raise FailedPreconditionError("the learner loop is not running")
        done = threading.Event()
        holder: list[Any] = []
        self._requests.put((done, holder, fn))
        if not done.wait(timeout_s):
            raise FailedPreconditionError(f"no {what} within {timeout_s} s")
        if isinstance(holder[0], BaseException):
            raise holder[0]
        return cast(T, holder[0])

    # ------------------------------------------------------------------ the loop
    def _run(self) -> None:
        s = self.settings
        try:
            # The learner is the group's only consumer: take over every pending entry.
            count = max(1000, 4 * s.batch_groups * s.checkpoint_every)
            self._admit(self._redis(lambda: self.groups.reclaim(count)))
            waited_from = time.perf_counter()
            while not self._stop.is_set():
                self._beat = time.monotonic()
                self._heartbeat()
                self._serve_requests()
                if self._paused or (s.max_steps and self.trainer.step_count >= s.max_steps):
                    self._stop.wait(0.2)
                    continue
                need = s.batch_groups - len(self._buffer)
                if need > 0:
                    entries = self._redis(
                        lambda n=need: self.streams.consume(
                            self.names.groups,
                            s.consumer_group,
                            s.consumer,
                            common_pb2.Group,
                            count=n,
                            block_ms=s.block_ms,
                        )
                    )
                    self._admit(entries)
                if len(self._buffer) >= s.batch_groups:
                    batch = self._buffer[: s.batch_groups]
                    self._buffer = self._buffer[s.batch_groups :]
                    wait_s = time.perf_counter() - waited_from
                    self._train(batch, wait_s)
                    waited_from = time.perf_counter()
        except UnavailableError as exc:
            if not self._stop.is_set():  # an outage past its budget: report dead
                self.error = exc
                log.error("learner loop stops and reports dead: %s", exc)
        except BaseException as exc:  # recorded; the thread ends, is_alive() turns False
            self.error = exc
            log.exception("learner loop failed; reporting dead")
        finally:
            self._finish()

    def _finish(self) -> None:
        """Clean stop: checkpoint unsaved steps, acknowledge, release the other ranks."""
        try:
            if self.error is None and self.trainer.step_count > self._ckpt_step:
                self._checkpoint()
        finally:
            try:
                if self.parallel is not None and self.error is None:
                    # After a failure the peers learn it from this process' exit instead (a
                    # stop sent to a hung peer would wait for dist_timeout_s).
                    self._command(RankCommand("stop"))
                self._serve_requests()
            finally:
                self.runlog.close()

    def _command(self, command: RankCommand) -> None:
        """Send ``command`` to the other ranks (a collective; raises when a rank died)."""
        assert self.parallel is not None
        self.parallel.broadcast_command(command)
        self._commanded_at = time.monotonic()

    def _heartbeat(self) -> None:
        """A heartbeat to the other ranks when none got a command for ``dist_heartbeat_s``:
        the command, then a barrier (so a rank that stopped answering fails it within
        ``dist_timeout_s`` even while the world idles)."""
        idle_s = time.monotonic() - self._commanded_at
        if self.parallel is not None and idle_s >= self.settings.dist_heartbeat_s:
            self._command(RankCommand("heartbeat"))
            self.parallel.barrier()

    def _admit(self, entries: Sequence[StreamEntry[common_pb2.Group]]) -> None:
        """Buffer new groups; acknowledge duplicates of groups already trained or buffered.

        A group failing ``check_group`` (no members, G < 2, inconsistent token lists, bad step
        spans) is copied to ``<groups>:dead`` with the reason and acknowledged.
        """
        buffered = {e.message.group_id for e in self._buffer}
        dup = []
        for entry in entries:
            gid = entry.message.group_id
            if gid in self._consumed_set or gid in buffered:
                dup.append(entry.id)
                continue
            try:
                check_group(entry.message)
            except GrpoError as exc:
                # A group that can never be trained would crash every restart: park it.
                log.error(
                    "untrainable group dead-lettered", extra={"group_id": gid, "reason": str(exc)}
                )
                self._redis(lambda e=entry, r=str(exc)[:500]: self.groups.dead_letter(e, r))
                continue
            buffered.add(gid)
            self._buffer.append(entry)
        if dup:
            # A consumed id here was trained before the restored checkpoint (durable), or its
            # original entry is still pending until the next checkpoint: acking is safe.
            self._redis(lambda: self.groups.ack(dup))

    def _train(self, entries: list[StreamEntry[common_pb2.Group]], wait_s: float) -> None:
        busy_from = time.perf_counter()
        s = self.settings
        groups = [e.message for e in entries]
        shard = groups
        if self.parallel is not None:
            from grpo.learner.distributed import shard_groups

            self._command(RankCommand("train", groups))
            shard = shard_groups(groups, self.parallel.rank, self.parallel.world_size)
        staleness = _staleness(groups, self.policy_version)
        metrics = self.trainer.step([group_rows(g) for g in shard])
        metrics.update(
            undecided_diagnostics(
                [sum(is_undecided(m.outcome) for m in g.members) for g in shard],
                [len(g.members) for g in shard],
            )
        )
        step = self.trainer.step_count
        tokens = sum(len(m.rollout.completion.token_ids) for g in groups for m in g.members)
        with self._lock:
            self.consumed.extend(g.group_id for g in groups)
            self._consumed_set.update(g.group_id for g in groups)
            self._unacked.extend(e.id for e in entries)
            self.trained_tokens += tokens
            self.wait_s_total += wait_s
        if step % s.publish_every == 0:
            self._publish(self.policy_version + 1)
        wall = time.time() - self.run_start_unix_s
        busy_s = time.perf_counter() - busy_from
        counters = self._assembler_stats()
        record: dict[str, Any] = {
            mn.STEP: step,
            mn.POLICY_VERSION: self.policy_version,
            mn.WALL_CLOCK_S: wall,
            mn.GENERATED_TOKENS: counters.get("generated_tokens", self.trained_tokens),
            "trained_tokens": self.trained_tokens,
            "groups_consumed": len(self.consumed),
            "time/wait_groups_s": wait_s,
            # since the run's first learner start (start-up and the first groups' wait
            # included); the step's own share is the one that says what bounds the run now
            "learner/idle_frac": self.wait_s_total / max(wall, 1e-9),
            "learner/idle_frac_step": wait_s / max(wait_s + busy_s, 1e-9),
            "policy/staleness_mean": staleness,
            "learner/redis_outage_s": self.outage.total_s,
        }
        record.update(metrics)
        record.update({mn.assembler_metric(k): float(v) for k, v in counters.items()})
        self.runlog.write_step(record, group_records_for(groups, step, self.settings.algo))
        with self._lock:
            self.last_metrics = {k: float(v) for k, v in record.items()}
        if step % s.checkpoint_every == 0 or (s.max_steps and step >= s.max_steps):
            self._checkpoint()

    def _publish(self, version: int) -> None:
        model: Any = self.trainer.model
        if is_lora(model):  # generation gets the merged weights, a plain model folder
            model = merged_view(model)
        if self.parallel is not None and self.parallel.fsdp:  # every rank joins the gather
            self._command(RankCommand("gather_weights"))
            model = FullModelView(model, gather_full_state(model).model)
        self.outage.call(
            lambda: publish_weights(
                self.client,
                self.names.policy_key,
                model=model,
                tokenizer=self.tokenizer,
                run_dir=self.run_dir,
                version=version,
                step=self.trainer.step_count,
                keep=self.settings.keep_weights,
            ),
            stop=self._stop,
        )
        with self._lock:
            self.policy_version = version
            self._published_step = self.trainer.step_count

    def _checkpoint(self) -> str:
        """Write a checkpoint of the current state, then acknowledge what it covers."""
        t = self.trainer
        if t.step_count == self._ckpt_step and self.last_checkpoint:
            return self.last_checkpoint
        full = None
        if self.parallel is not None and self.parallel.fsdp:  # every rank joins the gather
            self._command(RankCommand("gather_checkpoint"))
            full = gather_full_state(t.model, t.optimizer)
        state = CheckpointState(
            step=t.step_count,
            policy_version=self.policy_version,
            consumed_group_ids=list(self.consumed),
            resolved_config=resolved_config(self.settings),
            precision=t.precision,
            extra={
                "trained_tokens": self.trained_tokens,
                "run_start_unix_s": self.run_start_unix_s,
                "wait_s_total": self.wait_s_total,
                "skipped_steps_total": t.skipped_steps_total,
            },
        )
        path = save_checkpoint(
            self.ckpt_root,
            model=t.model,
            optimizer=t.optimizer,
            scheduler=t.scheduler,
            state=state,
            keep_last=self.settings.keep_checkpoints,
            critic=t.critic,
            full_state=full,
        )
        # Durable now: acknowledge every entry the checkpoint covers. When Redis is down past
        # the loop's stop, the entries stay pending; a restart skips them (consumed ids).
        if self._unacked:
            unacked = list(self._unacked)
            try:
                self._redis(lambda: self.groups.ack(unacked))
            except UnavailableError:
                if not self._stop.is_set():
                    raise
                log.warning(
                    "checkpoint %s written; its %d acks wait for a restart", path, len(unacked)
                )
        # Recorded in Redis: a learner that later finds no intact checkpoint refuses to start
        # over (``_refuse_fresh_start``).
        try:
            self._redis(lambda: self.client.set(self._checkpoint_key, t.step_count))
        except UnavailableError:
            if not self._stop.is_set():
                raise
        with self._lock:
            self._unacked = []
            self._ckpt_step = t.step_count
            self.last_checkpoint = str(path)
        return str(path)

    def _serve_requests(self) -> None:
        while True:
            try:
                done, holder, fn = self._requests.get_nowait()
            except queue.Empty:
                return
            try:
                holder.append(fn())
            except BaseException as exc:
                holder.append(exc)
            done.set()


def _unusable(folder: Path, run_dir: Path) -> bool:
    """True when an announced policy folder cannot be loaded: gone (the run dir moved),
    another run dir's (this one is a copy of a run dir whose original still exists: its
    weights are pruned and rewritten by that run, not this one) or its files differ from
    their digests (logged once, naming why)."""
    if not folder.is_dir():
        log.warning("the announced policy folder %s is gone; republishing", folder)
        return True
    ours = (run_dir / "weights").resolve()
    if folder.resolve().parent != ours:
        log.warning(
            "the announced policy folder %s is not in this run dir's weights (%s: a copied "
            "run dir); republishing",
            folder,
            ours,
        )
        return True
    try:
        check_digests(folder)
    except NoDigestsError:
        return False
    except DamagedError as exc:
        log.error("the announced policy is damaged (%s); republishing the restored model", exc)
        return True
    return False


def _assembler_stats_rpc(address: str) -> Any:
    """A function returning the Assembler's GetStats counters (name -> number), {} on failure.

    ``generated_tokens`` there counts every sampled token, rejected groups included (the run's
    real generation cost); without an assembler the result is empty. Each verifier address the
    assembler calls adds ``verifier/<address>/calls``, ``failed_calls``, ``latency_mean_s``,
    ``latency_max_s`` (once it has been called) and one count per score status
    (``SCORE_STATUS_OK``, ...); the step's record names them ``assembler/verifier/<address>/...``.
    """
    if not address:
        return dict
    state: dict[str, Any] = {}

    def fetch() -> dict[str, float]:
        import grpc

        from grpo.v1 import assembler_pb2, assembler_pb2_grpc

        if "stub" not in state:
            state["stub"] = assembler_pb2_grpc.AssemblerStub(grpc.insecure_channel(address))
        try:
            reply = state["stub"].GetStats(assembler_pb2.GetStatsRequest(), timeout=2.0)
        except grpc.RpcError as exc:  # optional information, never fatal
            log.debug("assembler GetStats failed: %s", exc)
            return {}
        stats = reply.stats
        if not stats.groups_opened:
            return {}
        out = {f.name: float(getattr(stats, f.name)) for f in stats.DESCRIPTOR.fields}
        for ep in reply.verifiers:  # each verifier address the assembler calls
            out.update(
                {
                    f"verifier/{ep.address}/calls": float(ep.calls),
                    f"verifier/{ep.address}/failed_calls": float(
                        sum(n for code, n in ep.codes.items() if code != "OK")
                    ),
                }
            )
            if ep.calls:  # a latency over no call is not written (not 0)
                out[f"verifier/{ep.address}/latency_mean_s"] = ep.latency_s_sum / ep.calls
                out[f"verifier/{ep.address}/latency_max_s"] = ep.latency_s_max
            out.update(
                {f"verifier/{ep.address}/{status}": float(n) for status, n in ep.statuses.items()}
            )
        return out

    return fetch


def _staleness(groups: Sequence[common_pb2.Group], version: int) -> float:
    """Mean (version of π_old − sampling version) over the batch's rollouts (0 = on-policy)."""
    versions = [m.rollout.completion.policy_version for g in groups for m in g.members]
    return sum(version - v for v in versions) / len(versions) if versions else 0.0


def resolved_config(settings: LearnerServiceSettings) -> dict[str, Any]:
    """The resolved settings plus the algorithm's pinned definitions (checkpoint metadata)."""
    out: dict[str, Any] = {"settings": settings.model_dump(mode="json")}
    definition = getattr(settings.algo, "resolved_definition", None)
    if definition is None:
        raise InvalidArgumentError("algo config lacks resolved_definition()")
    out["algo_definition"] = definition()
    return out
