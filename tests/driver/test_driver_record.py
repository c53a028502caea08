"""The driver's record of the run's data (``DriverRecord.check_data``): a driver restarted
mid-run on a data file changed meanwhile is refused, naming which set changed."""

from __future__ import annotations

from typing import Any

import pytest

from grpo.errors import FailedPreconditionError
from grpo.services.driver.driver import DriverRecord
from grpo.services.runtime.streams import StreamNames
from grpo.services.tasks.run_tasks import RunTasks
from grpo.v1 import common_pb2


def _tasks(rows: int, heldout: int) -> RunTasks:
    tasks = [common_pb2.Task(id=f"t{i}", type="arith", prompt=f"{i}+1=", gold_answer=str(i + 1))
             for i in range(rows)]  # fmt: skip
    return RunTasks(train=tasks[:-heldout], heldout=tasks[-heldout:], sft=[], task_type="arith")


def test_a_restarted_driver_refuses_data_changed_since_the_first_one_loaded_it(
    redis_client: Any, redis_namespace: str
) -> None:
    names = StreamNames(redis_namespace)
    DriverRecord(redis_client, names).check_data(_tasks(10, 3))  # the first driver records
    DriverRecord(redis_client, names).check_data(_tasks(10, 3))  # a restart, same data
    with pytest.raises(FailedPreconditionError, match=r"held-out tasks \(3 when the run started"):
        DriverRecord(redis_client, names).check_data(_tasks(12, 3))  # rows appended
    edited = _tasks(10, 3)
    edited.train[0].gold_answer = "99"
    with pytest.raises(FailedPreconditionError, match=r"the training tasks \(7 when") as refused:
        DriverRecord(redis_client, names).check_data(edited)
    assert "held-out" not in str(refused.value)
