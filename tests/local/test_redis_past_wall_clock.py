"""A run whose Redis answers nothing past its wall clock ends then, naming Redis (issue 35):
a hung Redis that ``grpo run`` does not restart (an external ``redis_url``) used to keep the
run going until every service's ``redis_outage_s`` ran out and the restarts were spent."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from grpo.errors import UnavailableError
from grpo.local.run import _LocalRun
from grpo.services.settings.run import load_run_config

REPO = Path(__file__).resolve().parents[2]


def _run(silent_s: float, elapsed_s: float) -> _LocalRun:
    run = object.__new__(_LocalRun)
    run.config = load_run_config(
        REPO / "configs" / "e2e-tiny.yaml",
        {"budget.wall_clock_s": 40.0, "budget.stop_grace_s": 10.0,
         "supervision.redis_reply_timeout_s": 5.0},
    )  # fmt: skip
    run.cluster = SimpleNamespace(  # type: ignore[assignment]
        redis_silent_s=lambda: silent_s, redis_url="redis://:secret@h:6379/0"
    )
    run.started = time.time() - elapsed_s
    return run


def test_past_the_wall_clock_with_redis_silent_the_run_ends_naming_redis() -> None:
    with pytest.raises(UnavailableError, match=r"Redis at .* not answering \(30 s") as ended:
        _run(silent_s=30.0, elapsed_s=55.0)._check_redis_past_wall_clock()
    assert "secret" not in str(ended.value)
    assert "budget.wall_clock_s 40 s" in str(ended.value)


@pytest.mark.parametrize(("silent_s", "elapsed_s"), [(30.0, 45.0), (4.0, 300.0), (0.0, 55.0)])
def test_before_the_wall_clock_or_with_redis_answering_it_goes_on(
    silent_s: float, elapsed_s: float
) -> None:
    _run(silent_s, elapsed_s)._check_redis_past_wall_clock()  # no error
