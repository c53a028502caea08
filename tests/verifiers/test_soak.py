"""Soak: many killed checks leave exactly the configured workers and no zombies (make soak)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from grpo.v1 import common_pb2
from grpo.verifiers.math import MathConfig, MathVerifier
from grpo.verifiers.sdk import PoolSettings


def _descendants() -> dict[int, str]:
    """Process id -> state letter of every descendant of this test process."""
    parent: dict[int, int] = {}
    state: dict[int, str] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(stat.parent.name)
        state[pid], parent[pid] = fields[0], int(fields[1])
    mine = {os.getpid()}
    changed = True
    while changed:
        changed = False
        for pid, ppid in parent.items():
            if ppid in mine and pid not in mine:
                mine.add(pid)
                changed = True
    return {pid: state[pid] for pid in mine if pid != os.getpid()}


@pytest.mark.slow
def test_fifty_killed_checks_keep_the_pool_whole() -> None:
    config = MathConfig(pool=PoolSettings(workers=2, timeout_s=0.5))
    before = set(_descendants())
    with MathVerifier(config) as verifier:
        slow = r"\boxed{\frac{(x+1)^{200}(x-1)^{200}}{(x^2-1)^{199}(x-1)}}"  # ~11 s of sympy
        for i in range(50):
            score = verifier.verify(common_pb2.Task(gold_answer="x+1"), slow)
            assert score.status == common_pb2.SCORE_STATUS_UNDECIDED, i  # the verifier's limit
        assert verifier.pool.replaced == 50
        pids = verifier.pool.pids
        assert len(pids) == 2
        assert all(Path(f"/proc/{pid}").exists() for pid in pids)
        assert verifier.verify(common_pb2.Task(gold_answer="2"), r"\boxed{2}").reward == 1.0
        new = {pid: st for pid, st in _descendants().items() if pid not in before}
        assert set(pids) <= set(new)
        assert [pid for pid, st in new.items() if st == "Z"] == []
        assert len(new) <= len(pids) + 2  # the workers, plus the fork server and its tracker
