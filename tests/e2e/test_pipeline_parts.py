"""Parts of `grpo run` that need no service process: RunConfig, task sets, the prompt feeder."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from grpo.errors import InvalidArgumentError
from grpo.services.driver.driver import FeedLoop
from grpo.services.driver.feeder import PromptFeeder
from grpo.services.runtime.streams import Outage, OutageBudgetExceededError, StreamNames, Streams
from grpo.services.settings.run import RunConfig, load_run_config
from grpo.services.settings.services import service_settings
from grpo.services.tasks.run_tasks import load_run_tasks
from grpo.v1 import common_pb2
from tests.helpers import wait_until

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "configs").glob("*.yaml")))
def test_shipped_configs_load(name: str) -> None:
    cfg = load_run_config(REPO / "configs" / name)
    assert cfg.name == name.removesuffix(".yaml")


def test_outcome_only_twin_differs_from_the_main_job_only_in_process_reward() -> None:
    """The equal-token comparison of docs/pipeline.md needs the two configs to stay in step."""
    main = load_run_config(REPO / "configs" / "arith-cpu.yaml").model_dump(mode="json")
    twin = load_run_config(REPO / "configs" / "arith-cpu-outcome-only.yaml").model_dump(mode="json")
    assert twin["verifiers"]["process"] is None and twin["learner"]["algo"]["process_weight"] == 0
    assert main["verifiers"]["process"] == "verifier-steps"
    for cfg in (main, twin):
        cfg["name"] = None
        cfg["verifiers"]["process"] = None
        cfg["verifiers"]["extra"].pop("verifier-steps", None)
        cfg["learner"]["algo"].pop("process_weight")
    assert twin == main


def test_overrides_and_invariants() -> None:
    cfg = load_run_config(
        REPO / "configs" / "arith-cpu.yaml", {"budget.steps": 3, "learner.trainer.lr": 2e-5}
    )
    assert cfg.budget.steps == 3 and cfg.learner.trainer.lr == 2e-5
    with pytest.raises(InvalidArgumentError, match="process_weight"):
        load_run_config(REPO / "configs" / "arith-cpu.yaml", {"learner.algo.process_weight": 0})
    with pytest.raises(InvalidArgumentError, match="bogus"):
        load_run_config(REPO / "configs" / "arith-cpu.yaml", {"generation.bogus": 1})
    with pytest.raises(ValueError, match="train_size"):
        RunConfig.model_validate({"data": {"source": "arith", "train_size": 0}})


def test_learner_sections_are_typed_when_the_config_loads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = REPO / "configs" / "e2e-tiny.yaml"
    # A typo in the trainer or algo block is reported at load, with its dotted path.
    with pytest.raises(InvalidArgumentError, match=r"learner\.trainer\.lrr"):
        load_run_config(path, {"learner.trainer.lrr": 1e-5})
    with pytest.raises(InvalidArgumentError, match=r"learner\.algo\.estimatorr"):
        load_run_config(path, {"learner.algo.estimatorr": "rloo"})
    # The environment reaches nested trainer fields.
    monkeypatch.setenv("GRPO_RUN_LEARNER__TRAINER__LR", "3e-6")
    monkeypatch.setenv("GRPO_RUN_LEARNER__ALGO__ESTIMATOR", "rloo")
    cfg = load_run_config(path)
    assert cfg.learner.trainer.lr == 3e-6 and cfg.learner.algo.estimator == "rloo"
    # One process_weight default (the learner's): a process verifier without an explicit
    # weight is valid.
    raw = {"verifiers": {"process": "verifier-steps"}, "data": {"train_size": 4}}
    assert RunConfig.model_validate(raw).learner.algo.process_weight == 1.0


def test_values_shared_with_generation_are_derived_once_and_conflicts_fail() -> None:
    path = REPO / "configs" / "e2e-tiny.yaml"
    cfg = load_run_config(path, {"generation.temperature": 0.7, "generation.max_new_tokens": 9})
    assert cfg.learner.trainer.temperature == 0.7
    assert cfg.learner.trainer.max_response_length == 9
    assert cfg.learner.trainer.seed == cfg.seed
    # Setting the same value is allowed (a dumped config.yaml reloads), a different one is not.
    again = RunConfig.model_validate(cfg.model_dump(mode="json"))
    assert again == cfg
    with pytest.raises(InvalidArgumentError, match=r"temperature=0\.5 conflicts"):
        load_run_config(path, {"learner.trainer.temperature": 0.5})
    with pytest.raises(InvalidArgumentError, match="max_response_length=7 conflicts"):
        load_run_config(path, {"learner.trainer.max_response_length": 7})
    with pytest.raises(InvalidArgumentError, match="bypass"):
        load_run_config(path, {"generation.extra": {"worker": {"sampling": {"temperature": 2}}}})
    with pytest.raises(InvalidArgumentError, match="bypass"):
        load_run_config(path, {"learner.extra": {"trainer": {"max_response_length": 3}}})
    # What the learner is told is what the run config says.
    settings = service_settings(cfg, "learner", {"model_path": "m", "run_dir": "r"})
    assert settings["trainer"]["temperature"] == 0.7
    assert settings["trainer"]["max_response_length"] == 9
    worker = service_settings(cfg, "rollout-worker", {"backend": {"model_path": "m"}})
    assert worker["worker"]["sampling"]["temperature"] == 0.7


def test_arith_heldout_is_disjoint_from_training_and_sft() -> None:
    cfg = RunConfig.model_validate(
        {
            "data": {"train_size": 300, "heldout_size": 100},
            "model": {"sft": {"enabled": True, "examples": 500, "steps": 1}},
        }
    )
    tasks = load_run_tasks(cfg)
    held = {t.prompt for t in tasks.heldout}
    assert len(tasks.train) == 300 and len(held) == 100
    assert not held & {t.prompt for t in tasks.train}
    assert not held & {p for p, _ in tasks.sft}
    assert tasks.task_type == "arith" and tasks.dev == []  # no target_accuracy: no dev set
    with_target = cfg.model_copy(
        update={
            "model": cfg.model.model_copy(
                update={"sft": cfg.model.sft.model_copy(update={"target_accuracy": 0.3})}
            )
        }
    )
    dev = load_run_tasks(with_target).dev
    assert len({t.prompt for t in dev}) == with_target.model.sft.dev_size
    assert not held & {t.prompt for t in dev}


def _tasks(n: int) -> list[common_pb2.Task]:
    return [common_pb2.Task(id=f"t{i}", type="arith", prompt=f"{i}+1=") for i in range(n)]


def _feeder(streams: Streams, names: StreamNames, tasks: int, **kwargs: int) -> PromptFeeder:
    """A feeder of ``tasks`` arith tasks, G = 4, at most 3 unfinished jobs ("workers" and
    "learner" groups); ``kwargs``: groups_ahead, seed, repeats."""
    return PromptFeeder(
        streams,
        names,
        _tasks(tasks),
        group_size=4,
        prompts_ahead=3,
        worker_group="workers",
        learner_group="learner",
        **kwargs,
    )


def test_feeder_applies_backpressure_and_never_feeds_twice(
    redis_client: redis.Redis, redis_namespace: str
) -> None:
    names = StreamNames(redis_namespace)
    streams = Streams(redis_client)
    streams.ensure_group(names.prompts, "workers")

    def feeder() -> PromptFeeder:
        return _feeder(streams, names, 5, groups_ahead=2, seed=7, repeats=2)

    f = feeder()
    assert f.pump() == 3  # prompts stream full: 3 unfinished jobs
    assert f.pump() == 0
    entries = streams.consume(names.prompts, "workers", "w", common_pb2.PromptJob, 10, None)
    streams.ack(names.prompts, "workers", [e.id for e in entries[:2]])
    assert f.pump() == 2
    # Groups waiting for the learner also hold the feeder back ...
    streams.ensure_group(names.groups, "learner")
    for i in range(2):
        streams.produce(names.groups, common_pb2.Group(group_id=f"g{i}"))
    pending = streams.consume(names.prompts, "workers", "w", common_pb2.PromptJob, 10, None)
    streams.ack(names.prompts, "workers", [e.id for e in pending + entries])
    assert f.pump() == 0
    # ... until delivered: read-but-unacknowledged groups (learner between checkpoints) do not.
    streams.consume(names.groups, "learner", "l", common_pb2.Group, 10, None)
    assert f.pump() == 3
    # A restarted feeder with the same seed re-feeds nothing already written.
    again = feeder()
    streams.ack(
        names.prompts,
        "workers",
        [
            e.id
            for e in streams.consume(names.prompts, "workers", "w", common_pb2.PromptJob, 10, None)
        ],
    )
    assert again.resumed_at == 8  # found from the stream's dedup markers, not by re-feeding
    assert again.pump() == 2 and again.exhausted  # only the 2 jobs of pass 2 not yet written
    raw = redis_client.xrange(names.prompts)
    jobs = [common_pb2.PromptJob.FromString(fields[b"pb"]) for _i, fields in raw]  # type: ignore[union-attr]
    ids = [j.group_id for j in jobs]
    assert len(ids) == len(set(ids)) == 10
    assert sorted(ids) == sorted(f"t{i}/e{e}" for i in range(5) for e in range(2))
    assert {j.group_size for j in jobs} == {4}


def test_children_do_not_inherit_settings_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the run dir's YAML says is what a launched service runs with."""
    from grpo.local.processes import ProcessSupervisor
    from grpo.services.runtime.config import child_environment

    parent = {
        "PATH": "/bin",
        "GRPO_TRAINER__LR": "1e-3",  # would override the learner's YAML
        "grpo_redis_url": "redis://elsewhere:6379/0",
        "GRPO_RUN_BUDGET__STEPS": "3",
        "GRPO_DATA_DIR": "/data",
        "REDIS_URL": "redis://x",
    }
    assert child_environment(parent) == {
        "PATH": "/bin",
        "GRPO_DATA_DIR": "/data",
        "REDIS_URL": "redis://x",
    }
    monkeypatch.setenv("GRPO_TRAINER__LR", "1e-3")
    supervisor = ProcessSupervisor(tmp_path / "logs", env={"GRPO_EXPLICIT": "1"})
    assert "GRPO_TRAINER__LR" not in supervisor._env  # what every child is started with
    assert supervisor._env["GRPO_EXPLICIT"] == "1"  # explicit extras still pass


def test_unknown_settings_variables_are_refused_or_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A nested ``GRPO_*`` typo is refused naming the closest setting (the learner's and
    ``grpo run``'s ``GRPO_RUN_*`` alike); a one-level unknown name is logged, not dropped
    silently; another prefix's and the process-level names pass."""
    from grpo.services.learner.settings import LearnerServiceSettings
    from grpo.services.runtime.config import load_settings

    env = {
        "GRPO_MODEL_PATH": "/m",
        "GRPO_MODEL_PAHT": "/m",  # one level: maybe another tool's, so only logged
        "GRPO_RUN_BUDGET__STEPS": "3",  # grpo run's, not the learner's
        "GRPO_DATA_DIR": "/data",  # a process-level name
    }
    with caplog.at_level("WARNING", logger="grpo.services.runtime.config"):
        settings = load_settings(LearnerServiceSettings, environ=env)
    assert str(settings.model_path) == "/m"
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1 and "GRPO_MODEL_PAHT" in warned[0] and "GRPO_MODEL_PATH" in warned[0]
    assert "LearnerServiceSettings" in warned[0]
    with pytest.raises(InvalidArgumentError, match=r"GRPO_TRAINER__LRR .*GRPO_TRAINER__LR "):
        load_settings(LearnerServiceSettings, environ={**env, "GRPO_TRAINER__LRR": "1e-3"})
    with pytest.raises(InvalidArgumentError, match=r"GRPO_RUN_BUDGET__STEPZ .*BUDGET__STEPS "):
        load_run_config(REPO / "configs" / "e2e-tiny.yaml", environ={"GRPO_RUN_BUDGET__STEPZ": "1"})


def test_a_users_jsonl_dataset_with_a_field_mapping(tmp_path: Path) -> None:
    import json

    rows = [{"q": f"{i}+{i}=", "a": 2 * i, "kind": "arith", "uid": f"u{i}"} for i in range(10)]
    path = tmp_path / "mine.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    mapping = {
        "path": str(path),
        "prompt_field": "q",
        "gold_field": "a",
        "task_type_field": "kind",
        "id_field": "uid",
        "prompt_template": "Q: {prompt}",
    }
    cfg = RunConfig.model_validate(
        {"data": {"source": "jsonl", "dataset": mapping, "heldout_size": 3, "train_size": 5}}
    )
    tasks = load_run_tasks(cfg)
    assert [t.id for t in tasks.train] == [f"u{i}" for i in range(5)]
    assert [t.id for t in tasks.heldout] == ["u7", "u8", "u9"]  # the last rows, disjoint
    first = tasks.train[0]
    assert (first.prompt, first.gold_answer, first.type) == ("Q: 0+0=", "0", "arith")
    assert tasks.task_type == "arith" and tasks.sft == []
    # A separate held-out file (same mapping) is taken out of the training rows by id.
    held = tmp_path / "held.jsonl"
    held.write_text(json.dumps(rows[2]) + "\n")
    split = load_run_tasks(
        RunConfig.model_validate(
            {"data": {"source": "jsonl", "heldout_size": 5,
                      "dataset": {**mapping, "heldout_path": str(held)}}}
        )
    )  # fmt: skip
    assert [t.id for t in split.heldout] == ["u2"] and "u2" not in {t.id for t in split.train}
    # Bad input names the file, the line and the field.
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"q": "1+1="}) + "\n")
    with pytest.raises(InvalidArgumentError, match=r"bad\.jsonl:1: no field 'a'"):
        load_run_tasks(
            RunConfig.model_validate(
                {
                    "data": {
                        "source": "jsonl",
                        "heldout_size": 0,
                        "dataset": {**mapping, "path": str(bad)},
                    }
                }
            )
        )
    with pytest.raises(ValueError, match=r"data\.dataset\.path"):
        RunConfig.model_validate({"data": {"source": "jsonl"}})
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(
        "\n".join(json.dumps({**r, "kind": ["a", "b"][i % 2]}) for i, r in enumerate(rows))
    )
    with pytest.raises(InvalidArgumentError, match="one task type"):
        load_run_tasks(
            RunConfig.model_validate(
                {
                    "data": {
                        "source": "jsonl",
                        "heldout_size": 2,
                        "dataset": {**mapping, "path": str(mixed)},
                    }
                }
            )
        )


def test_feed_loop_refills_jobs_as_workers_finish_them(
    redis_client: redis.Redis, redis_namespace: str
) -> None:
    """The driver's feeding thread keeps ``prompts_ahead`` jobs unfinished while nothing else
    calls ``pump`` (the driver's loop may be inside an evaluation), and stops on ``halt``."""
    names = StreamNames(redis_namespace)
    streams = Streams(redis_client)
    streams.ensure_group(names.prompts, "workers")
    feeder = _feeder(streams, names, 40, groups_ahead=100)
    loop = FeedLoop(feeder, lambda: 64, Outage(30.0, what="redis (test)"))
    loop.start()
    try:
        done: list[str] = []
        for _ in range(4):  # a worker finishing its calls: the thread refills each time
            wait_until(lambda: streams.lag(names.prompts, "workers") == 3, what="3 jobs queued")
            jobs = streams.consume(names.prompts, "workers", "w", common_pb2.PromptJob, 10, None)
            assert len(jobs) == 3  # never more than prompts_ahead unfinished
            streams.ack(names.prompts, "workers", [e.id for e in jobs])
            done += [e.message.group_id for e in jobs]
        wait_until(lambda: feeder.fed == 15, what="the fifth refill")
    finally:
        loop.halt()
    assert not loop.is_alive()
    loop.check()  # no error
    assert len(done) == len(set(done)) == 12
    assert done == [feeder._job_id(i) for i in range(12)]  # in the feed order, once each


class _FailingFeeder:
    """A feeder whose every pump fails with ``error`` (the error paths of ``FeedLoop``)."""

    def __init__(self, error: BaseException) -> None:
        self.error = error
        self.pumps = 0

    def pump(self, limit: int = 64) -> int:
        self.pumps += 1
        raise self.error


def test_feed_loop_rides_out_a_redis_outage_then_reports_it_past_the_budget() -> None:
    outage = Outage(0.3, backoff_initial_s=0.01, backoff_max_s=0.02, what="redis (test)")
    feeder = _FailingFeeder(redis.ConnectionError("connection refused"))
    loop = FeedLoop(feeder, lambda: 64, outage)  # type: ignore[arg-type]
    loop.start()
    wait_until(lambda: not loop.is_alive(), what="the feeding thread to give up")
    assert feeder.pumps > 2  # retried with backoff before the budget ran out
    with pytest.raises(OutageBudgetExceededError):
        loop.check()


def test_feed_loop_stops_on_any_other_error_and_the_driver_loop_raises_it() -> None:
    feeder = _FailingFeeder(ValueError("corrupt task"))
    loop = FeedLoop(feeder, lambda: 64, Outage(30.0, what="redis (test)"))  # type: ignore[arg-type]
    loop.start()
    wait_until(lambda: not loop.is_alive(), what="the feeding thread to stop")
    assert feeder.pumps == 1
    with pytest.raises(ValueError, match="corrupt task"):
        loop.check()


@pytest.mark.parametrize(("groups_ahead", "held_back"), [(None, False), (3, True)])
def test_the_run_feeder_holds_back_on_generation_groups_ahead(
    tmp_path: Path,
    redis_client: redis.Redis,
    redis_namespace: str,
    groups_ahead: int | None,
    held_back: bool,
) -> None:
    """``generation.groups_ahead`` bounds the closed groups waiting for the learner; unset, the
    bound is 2 x ``learner.batch_groups`` (e2e-tiny: 4)."""
    from grpo.services.driver.driver import LEARNER_GROUP, RunDriver

    cfg = load_run_config(
        REPO / "configs" / "e2e-tiny.yaml", {"generation.groups_ahead": groups_ahead}
    )
    names = StreamNames(redis_namespace)
    streams = Streams(redis_client)
    streams.ensure_group(names.groups, LEARNER_GROUP)
    for i in range(3):  # 3 closed groups not yet delivered to the learner
        streams.produce(names.groups, common_pb2.Group(group_id=f"g{i}"))
    driver = RunDriver(
        cfg,
        load_run_tasks(cfg),
        streams=streams,
        names=names,
        endpoints=None,  # type: ignore[arg-type]  # feeding needs no service
        out_dir=tmp_path / "run",
    )
    written = driver.make_feeder().pump()
    assert (written == 0) is held_back, written


def test_a_job_redis_refuses_is_fed_first_next_time_never_skipped() -> None:
    """A write refused by Redis (out of memory here, a lost connection alike) does not cost
    the feeder its prompt: the next pump writes that job first, and every pass stays whole.
    A private server: its memory cap must not touch the suite's shared Redis."""
    from grpo.services.runtime.redis_server import EmbeddedRedis, connect

    with EmbeddedRedis() as server:
        client = connect(server.url)
        names = StreamNames("refused")
        streams = Streams(client)
        streams.ensure_group(names.prompts, "workers")
        feeder = _feeder(streams, names, 3, seed=1, repeats=1, groups_ahead=4)
        client.config_set("maxmemory", int(client.info("memory")["used_memory"]))
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            feeder.pump()  # noeviction: every write refused now
        assert not feeder.exhausted
        client.config_set("maxmemory", 0)
        assert feeder.pump() == 3 and feeder.exhausted
        raw = client.xrange(names.prompts)
        ids = sorted(common_pb2.PromptJob.FromString(f[b"pb"]).group_id for _i, f in raw)  # type: ignore[union-attr]
        client.close()
    assert ids == ["t0/e0", "t1/e0", "t2/e0"]
