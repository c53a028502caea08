"""The parts of summary.json and the console that add up a run, without running one:

- ``accounting``: "rejected" is every rejection reason (too many undecided included), the
  identity ``opened = accepted + rejected + pending`` holds with timed out beside it, undecided
  rewards are counted; ``grpo run``'s closing lines say the same;
- ``outage_s`` (seconds per dependency per service) is summed from the lines a real ``Outage``
  writes through the services' JSON log formatter, restarts included; the run driver's own
  view (``RunDriver.reported_outages``, for a driver without service logs) reads the services'
  figures from GetStatus/GetStats.

A failing run end to end is in test_run_failure.py."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grpo.cli_run import _accounting_lines
from grpo.errors import FailedPreconditionError
from grpo.learner import metric_names as mn
from grpo.local.outages import dependency_of, log_outages, service_outages
from grpo.services.driver.driver import Progress, RunDriver
from grpo.services.driver.summary import Death, Failure, Outages, RunSummary, Stall
from grpo.services.runtime.accounting import RunAccounting, run_accounting
from grpo.services.runtime.logging import JsonFormatter
from grpo.services.runtime.streams import Outage, StreamNames, Streams
from grpo.services.settings.run import load_run_config
from grpo.services.tasks.run_tasks import load_run_tasks
from grpo.v1 import assembler_pb2

REPO = Path(__file__).resolve().parents[2]


class _Lines(logging.Handler):
    """Collects formatted records: what ``grpo serve`` writes to a service's log."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(JsonFormatter())
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture
def log_lines() -> Iterator[list[str]]:
    handler = _Lines()
    logger = logging.getLogger("grpo.services.runtime.streams")
    logger.addHandler(handler)
    try:
        yield handler.lines
    finally:
        logger.removeHandler(handler)


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_closed_outages_sum_to_the_outages_own_total(log_lines: list[str]) -> None:
    clock = _Clock()
    redis, verifiers = (
        Outage(60, what="redis (assembler)", clock=clock),
        Outage(60, what="verifiers", clock=clock),
    )
    for length in (1.25, 0.5):
        redis.failed(ConnectionError("refused"))
        verifiers.failed(ConnectionError("down"))
        clock.now += length
        redis.ok()
        clock.now += 2.0  # the verifiers stay down 2 s longer
        verifiers.ok()
    log_lines.insert(0, "Traceback (most recent call last):")  # not JSON: skipped
    found = log_outages(log_lines, end=time.time())
    assert found == {"redis": pytest.approx(redis.total_s), "verifiers": verifiers.total_s}
    assert found["redis"] == pytest.approx(1.75) and found["verifiers"] == pytest.approx(5.75)


def test_an_outage_open_at_a_death_or_at_the_end_counts_until_the_next_one_or_end(
    log_lines: list[str],
) -> None:
    first = Outage(60, what="redis (learner)")
    first.failed(ConnectionError("refused"))  # the process dies in the outage
    time.sleep(0.3)
    second = Outage(60, what="redis (learner)")  # its restart finds Redis still down
    second.failed(ConnectionError("refused"))
    assert '"outage": "open"' in log_lines[0] and len(log_lines) == 2
    end = time.time() + 1.0
    total = log_outages(log_lines, end=end)["redis"]
    # 0.3 s from the first open to the second, then the second until `end` (~1 s)
    assert 1.25 < total < 1.6, total
    second.ok()
    assert log_outages(log_lines, end=end + 100)["redis"] == pytest.approx(
        0.3 + second.total_s, abs=0.1
    )


def test_service_outages_lists_every_dependency_a_service_uses(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    closed = '{"ts": "2026-01-01T00:00:00.000+00:00", "outage_of": "redis (rollout worker)", '
    (logs / "rollout-worker-0.log").write_text(closed + '"outage": "closed", "outage_s": 1.234}\n')
    (logs / "verifier-math.log").write_text('{"msg": "serving"}\n')
    uses = {
        "assembler": ("redis", "verifiers"),
        "rollout-worker-0": ("redis",),
        "verifier-math": (),
    }
    assert service_outages(logs, uses, end=time.time()) == {
        "redis": {"assembler": 0.0, "rollout-worker-0": 1.23},
        "verifiers": {"assembler": 0.0},
    }
    assert dependency_of("redis (run driver)") == "redis"
    assert dependency_of("verifiers") == "verifiers"


def test_the_driver_reports_each_services_own_figures(
    tmp_path: Path, redis_client: Any, redis_namespace: str
) -> None:
    cfg = load_run_config(REPO / "configs" / "e2e-tiny.yaml")
    driver = RunDriver(
        cfg,
        load_run_tasks(cfg),
        streams=Streams(redis_client),
        names=StreamNames(redis_namespace),
        endpoints=None,  # type: ignore[arg-type]  # the figures of the last poll only
        out_dir=tmp_path / "run",
    )
    driver.progress = Progress(
        stats=assembler_pb2.AssemblerStats(redis_outage_s=2.5, verifier_outage_s=7.25),
        last_metrics={mn.LEARNER_REDIS_OUTAGE_S: 3.0},
    )
    assert driver.reported_outages() == {
        "redis": {"assembler": 2.5, "driver": 0.0, "learner": 3.0},
        "verifiers": {"assembler": 7.25},
    }


def test_rejected_counts_every_reason_and_the_identity_holds() -> None:
    stats = assembler_pb2.AssemblerStats(
        groups_opened=20, groups_accepted=9, groups_rejected_all_correct=2,
        groups_rejected_all_wrong=3, groups_rejected_too_few_valid=1,
        groups_rejected_too_many_undecided=4, groups_pending=1, groups_timed_out=2,
        rewards_missing=7, rewards_undecided=5, rollouts_received=78, rollouts_late=1,
        rollouts_held=1,
    )  # fmt: skip
    acc = run_accounting(stats, rollouts_produced=84, rollouts_queued=5)
    groups = acc["groups"]
    assert isinstance(groups, dict)
    assert groups["rejected"] == 10 and groups["identity_gap"] == 0  # 9 + 10 + 1 = 20
    assert groups["rejected_by_reason"] == {
        "all_correct": 2, "all_wrong": 3, "too_few_valid": 1, "too_many_undecided": 4,
    }  # fmt: skip
    assert groups["timed_out"] == 2  # beside the identity, not a term of it
    assert acc["rewards"] == {"missing": 7, "undecided": 5, "missing_by_reason": {}}
    assert acc["rollouts"] == {
        "produced": 84, "scored": 78, "in_closed_groups": 0, "late": 1, "queued": 5,
        "held": 1, "identity": "produced = scored + late + queued + unaccounted",
        "unaccounted": 0,
    }  # fmt: skip
    assert run_accounting(stats, 83, 5)["rollouts"]["unaccounted"] == -1  # type: ignore[index]
    unread = run_accounting(stats, None, None)["rollouts"]
    assert unread["produced"] is None and unread["unaccounted"] is None  # type: ignore[index]
    reasons = {"undecided": 5, "gold_unparsable": 2}
    summary = _summary(
        RunAccounting.from_stats(stats, 84, 5, reasons),
        restarts={"learner": 1},
        outages=Outages(
            {"redis": {"learner": 1.25, "assembler": 0.0}, "verifiers": {"assembler": 0.0}},
            "service logs",
        ),
    )
    identity, _zero, restarts = _accounting_lines(summary)
    assert identity == (
        "groups opened 20 = accepted 9 + rejected 10 (2 all correct, 3 all wrong, 1 too few "
        "valid, 4 too many undecided) + pending 1 (gap 0); timed out 2, closed short 0; "
        "rewards missing 7 (undecided 5; 2 gold unparsable, 5 undecided)"
    )
    assert restarts == "restarts {'learner': 1}; outage seconds: redis learner 1.2"
    flat = assembler_pb2.AssemblerStats(
        groups_zero_variance=6, zero_variance_tokens=150, generated_tokens=500, kept_tokens=500
    )
    assert _accounting_lines(_summary(RunAccounting.from_stats(flat)))[1] == (
        "zero-variance groups (all correct or all wrong, kept or not) 6: 150 of 500 generated "
        "tokens; never trained on: 0"
    )


def _summary(accounting: RunAccounting, **more: Any) -> RunSummary:
    return RunSummary(
        config="t", stop_reason="steps", sft_accuracy=0.5, final_accuracy=0.75, steps=3,
        final_policy_version=3, final_policy_step=3, accounting=accounting,
        grpo_wall_clock_s=10.0, wall_clock_s=12.0, **more,
    )  # fmt: skip


def test_the_summary_reads_back_by_attribute_with_the_keys_it_always_had() -> None:
    """``RunSummary`` round-trips through summary.json, keeps every key earlier summaries had
    (tools read the JSON), and its flat counters are its accounting's (one source)."""
    stats = assembler_pb2.AssemblerStats(
        groups_opened=5, groups_accepted=3, groups_rejected_all_wrong=1, groups_pending=1,
        rewards_missing=2, rewards_undecided=1, rollouts_received=18, generated_tokens=400,
        kept_tokens=300,
    )  # fmt: skip
    summary = _summary(
        RunAccounting.from_stats(stats, 20, 2, {"undecided": 1, "gold_unparsable": 1}),
        outages=Outages({"redis": {"learner": 0.5}}, "service logs"),
        restarts={"learner": 1},
        deaths=(Death("learner", "stalled: no progress for 9.0 s"),),
        stalls=(Stall("learner", 9.0, True),),
        failure=Failure("service learner died", "learner", "disk full (ENOSPC)", "OSError: x"),
        run_id="abc",
        resumed=False,
    )
    data = summary.as_dict()
    legacy = {
        "config", "stop_reason", "sft_accuracy", "final_accuracy", "accuracy_gain_points",
        "steps", "final_policy_version", "final_policy_step", "generated_tokens", "kept_tokens",
        "rollouts", "groups_accepted", "groups_rejected_all_correct", "groups_rejected_all_wrong",
        "groups_rejected_too_few_valid", "groups_rejected_too_many_undecided",
        "groups_timed_out", "groups_zero_variance", "zero_variance_tokens", "rewards_missing",
        "rewards_undecided", "grpo_wall_clock_s", "wall_clock_s", "leftover_processes",
        "evals", "outage_s", "outage_source", "groups_opened", "groups_pending",
        "groups_closed_short", "accounting", "restarts", "deaths", "failure", "resumed",
    }  # fmt: skip
    assert legacy <= set(data)
    assert data["failure"] == "service learner died" and data["failed_service"] == "learner"
    assert data["failure_cause"] == "disk full (ENOSPC)"
    assert data["groups_accepted"] == data["accounting"]["groups"]["accepted"] == 3
    assert data["rewards_missing"] == data["accounting"]["rewards"]["missing"] == 2
    assert data["accounting"]["rewards"]["missing_by_reason"] == {
        "gold_unparsable": 1, "undecided": 1,
    }  # fmt: skip
    assert data["accuracy_gain_points"] == 25.0
    back = RunSummary.from_dict(json.loads(json.dumps(data)))
    assert back == summary
    assert back.accounting.rollouts.unaccounted == 0 and back.accounting.groups.identity_gap == 0
    with pytest.raises(FailedPreconditionError, match="not a run summary"):
        RunSummary.from_dict({"config": "x"})
