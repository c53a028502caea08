"""WorkerPool: results, hard time limit with replacement, memory cap, crashes, threads."""

from __future__ import annotations

import concurrent.futures as cf
import time
from pathlib import Path

import _pool_funcs as funcs
import pytest
from helpers import wait_until

from grpo.errors import UnavailableError
from grpo.verifiers.sdk import (
    CheckMemoryError,
    CheckTimeoutError,
    PoolSettings,
    RemoteCheckError,
    WorkerCrashError,
    WorkerPool,
)


@pytest.fixture(scope="module")
def pool():
    with WorkerPool(PoolSettings(workers=2, timeout_s=20, memory_mb=512)) as p:
        yield p


def test_call_returns_result_from_another_process(pool: WorkerPool) -> None:
    assert pool.call(funcs.add, 2, 3) == 5
    assert pool.call(funcs.pid) in pool.pids


def test_timeout_kills_and_replaces_the_worker(pool: WorkerPool) -> None:
    before = set(pool.pids)
    replaced = pool.replaced
    start = time.monotonic()
    with pytest.raises(CheckTimeoutError):
        pool.call(funcs.sleep_then, 60, 1, timeout_s=0.5)
    assert time.monotonic() - start < 10  # killed, not waited for (60 s)
    assert pool.replaced == replaced + 1
    after = set(pool.pids)
    assert len(after) == 2 and after != before
    assert pool.call(funcs.add, 1, 1) == 2


def test_memory_cap_raises_and_pool_survives(pool: WorkerPool) -> None:
    with pytest.raises(CheckMemoryError):
        pool.call(funcs.allocate, 2048)
    assert pool.call(funcs.allocate, 16) == 16 * 1024 * 1024


def test_crash_is_reported_and_worker_replaced(pool: WorkerPool) -> None:
    with pytest.raises(WorkerCrashError):
        pool.call(funcs.die)
    assert len(pool.pids) == 2
    assert pool.call(funcs.add, 4, 4) == 8


def test_remote_exception_carries_its_type(pool: WorkerPool) -> None:
    with pytest.raises(RemoteCheckError) as info:
        pool.call(funcs.fail, "boom")
    assert info.value.exc_type == "ValueError"
    assert "boom" in str(info.value)


def test_concurrent_callers_from_threads(pool: WorkerPool) -> None:
    with cf.ThreadPoolExecutor(6) as ex:
        results = list(ex.map(lambda i: pool.call(funcs.add, i, i), range(30)))
    assert results == [2 * i for i in range(30)]


def test_deadline_with_no_free_worker_times_out() -> None:
    with WorkerPool(PoolSettings(workers=1, timeout_s=20)) as one, cf.ThreadPoolExecutor(1) as ex:
        busy = ex.submit(one.call, funcs.sleep_then, 3.0, 7)
        wait_until(lambda: one.idle_workers == 0, what="the only worker busy")
        with pytest.raises(CheckTimeoutError):
            one.call(funcs.add, 1, 2, deadline=time.monotonic() + 0.1)
        assert busy.result() == 7


def test_closed_pool_refuses_calls() -> None:
    p = WorkerPool(PoolSettings(workers=1))
    p.close()
    with pytest.raises(UnavailableError):
        p.call(funcs.add, 1, 2)


def test_worker_that_died_while_idle_is_replaced_before_the_call() -> None:
    import os
    import signal

    with WorkerPool(PoolSettings(workers=1, timeout_s=20)) as one:
        victim = one.pids[0]
        os.kill(victim, signal.SIGKILL)
        status = Path(f"/proc/{victim}/status")

        def dead() -> bool:
            try:
                return "zombie" in status.read_text()
            except FileNotFoundError:
                return True

        wait_until(dead, what=f"worker {victim} dead")
        assert one.call(funcs.add, 2, 2) == 4
        assert one.pids != [victim] and one.replaced == 1


def test_request_deadline_applies_to_calls_without_one() -> None:
    from grpo.verifiers.sdk import request_deadline

    with WorkerPool(PoolSettings(workers=1, timeout_s=20)) as one:
        with request_deadline(time.monotonic() + 0.5), pytest.raises(CheckTimeoutError):
            one.call(funcs.sleep_then, 30, 1)
        assert one.call(funcs.sleep_then, 0.01, 5) == 5  # outside the block: no deadline


def test_call_many_runs_a_batch_in_one_worker_in_order(pool: WorkerPool) -> None:
    outcomes = pool.call_many(funcs.act, [("ok", i) for i in range(20)])
    assert [o.value[0] for o in outcomes] == list(range(20))
    assert len({o.value[1] for o in outcomes}) == 1  # one message, one worker
    assert all(o.error is None and o.seconds >= 0 for o in outcomes)
    assert pool.call_many(funcs.act, []) == []


def test_call_many_gives_each_item_the_outcome_call_would() -> None:
    """Every failure of one item is that item's alone: a time limit or a crash replaces the
    worker and the items after it run on the next one; an error or the memory cap keeps it."""
    with WorkerPool(PoolSettings(workers=1, timeout_s=1.0, memory_mb=512)) as pool:
        batch = [("ok", 0), ("sleep", 30), ("ok", 2), ("die", 3), ("ok", 4), ("fail", 5)]
        batch += [("allocate", 2048), ("ok", 7)]
        start = time.monotonic()
        outcomes = pool.call_many(funcs.act, batch)
        assert time.monotonic() - start < 15  # the sleeping item was cut at its 1 s limit
        kinds = [type(o.error).__name__ if o.error else o.value[0] for o in outcomes]
        expected = [0, "CheckTimeoutError", 2, "WorkerCrashError", 4, "RemoteCheckError"]
        assert kinds == [*expected, "CheckMemoryError", 7]
        assert "item 5" in str(outcomes[5].error)
        assert pool.replaced == 2
        workers = [o.value[1] for o in outcomes if o.error is None]
        assert workers[0] != workers[1] != workers[2]  # replaced after the limit and the crash
        assert workers[2] == workers[3]  # an error or MemoryError keeps the worker
        assert outcomes[1].seconds == pytest.approx(1.0, abs=0.5)


def test_call_many_items_past_the_deadline_time_out() -> None:
    with WorkerPool(PoolSettings(workers=1, timeout_s=20, memory_mb=512)) as pool:
        deadline = time.monotonic() + 1.0
        outcomes = pool.call_many(
            funcs.act, [("ok", 0), ("sleep", 30), ("ok", 2)], deadline=deadline
        )
        assert outcomes[0].value[0] == 0
        assert isinstance(outcomes[1].error, CheckTimeoutError)
        # No worker free before the passed deadline: the rest time out without running.
        assert isinstance(outcomes[2].error, CheckTimeoutError)
        assert "before the call started" in str(outcomes[2].error)
        assert pool.replaced == 1  # only the item cut at the deadline cost a worker


def test_a_function_of_the_main_script_is_refused_with_the_reason(pool: WorkerPool) -> None:
    """Workers never import the main module (so a script needs no __main__ guard): a
    function defined there could not be found in a worker, and is refused up front."""
    from grpo.errors import InvalidArgumentError

    def in_script() -> int:
        return 1

    in_script.__module__ = "__main__"
    with pytest.raises(InvalidArgumentError, match="defined in the main script"):
        pool.call(in_script)
    assert pool.call(funcs.add, 1, 2) == 3
