"""One run per run dir (``grpo.local.rundir``): the kernel-released lock names its holder, and
the run's identity (its id, which names the Redis namespace, and its data) survives a move and
refuses a resume whose data changed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from grpo.local.rundir import (
    IDENTITY_FILE,
    LOCK_FILE,
    RunDirBusyError,
    RunDirLock,
    RunIdentity,
    RunRefusedError,
    task_digest,
)
from grpo.services.settings.run import RunConfig
from grpo.services.tasks.run_tasks import RunTasks
from grpo.v1 import common_pb2

_HOLD = """
import sys, time
from pathlib import Path
from grpo.local.rundir import RunDirLock
lock = RunDirLock.acquire(Path(sys.argv[1]))
print("held", flush=True)
time.sleep(600)
"""


def test_a_second_holder_is_refused_naming_the_first_and_death_releases_it(
    tmp_path: Path,
) -> None:
    run_dir = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(run_dir)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(RunDirBusyError, match=f"in use by pid {holder.pid}") as busy:
            RunDirLock.acquire(run_dir)
        assert busy.value.pid == holder.pid
        assert isinstance(busy.value, RunRefusedError)  # grpo run exits 2 on it
        holder.send_signal(signal.SIGKILL)  # no clean-up at all: the kernel releases it
        holder.wait(10)
        with RunDirLock.acquire(run_dir) as lock:
            assert lock.held
            assert (run_dir / LOCK_FILE).read_text().strip() == str(os.getpid())
            # One holder per folder within a process too (flock is per open file).
            with pytest.raises(RunDirBusyError, match=f"pid {os.getpid()}"):
                RunDirLock.acquire(run_dir)
        assert not lock.held
        RunDirLock.acquire(run_dir).release()  # released by the context manager
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


def _task(i: int) -> common_pb2.Task:
    return common_pb2.Task(id=f"t{i}", type="math", prompt=f"{i}+1=", gold_answer=str(i + 1))


def _tasks(n: int, heldout: int) -> RunTasks:
    tasks = [_task(i) for i in range(n)]
    return RunTasks(train=tasks[:-heldout], heldout=tasks[-heldout:], sft=[], task_type="math")


def test_a_run_keeps_its_id_and_namespace_and_refuses_data_that_changed(tmp_path: Path) -> None:
    config = RunConfig(data={"source": "arith", "train_size": 4})
    first = tmp_path / "first"
    first.mkdir()
    identity = RunIdentity.create(config, first, _tasks(10, 3))
    assert identity.namespace == f"run-{identity.run_id}"
    recorded = json.loads((first / IDENTITY_FILE).read_text())
    assert recorded["data"]["heldout_ids"] == ["t7", "t8", "t9"]
    moved = tmp_path / "renamed"
    first.rename(moved)  # a moved folder resumes its own state
    again = RunIdentity.resume(config, moved, _tasks(10, 3))
    assert again == replace(identity, path=str(moved))  # recorded where it is now
    # Rows appended to the data move the held-out split: refused, naming what moved.
    with pytest.raises(RunRefusedError, match="held-out set moved") as moved_split:
        RunIdentity.resume(config, moved, _tasks(12, 3))
    assert "['t7', 't8']" in str(moved_split.value) and "['t10', 't11']" in str(moved_split.value)
    edited = _tasks(10, 3)
    edited.train[0].gold_answer = "99"
    with pytest.raises(RunRefusedError, match="training tasks changed"):
        RunIdentity.resume(config, moved, edited)
    named = RunConfig(data={"source": "arith", "train_size": 4}, namespace="mine")
    assert RunIdentity.create(named, tmp_path, _tasks(4, 1)).namespace == "mine"


def test_a_copy_of_a_run_dir_that_still_exists_is_refused_on_a_shared_redis(
    tmp_path: Path,
) -> None:
    """``cp -a`` of a run dir holds its run id, hence its namespace: on a shared Redis the
    copy's resume is refused naming the original (both would consume the same streams); with
    the embedded Redis (its own copy of the state) it is a fork and resumes; once the original
    is gone (a move) nothing is refused."""
    config = RunConfig(data={"source": "arith", "train_size": 4})
    original = tmp_path / "original"
    original.mkdir()
    identity = RunIdentity.create(config, original, _tasks(10, 3))
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-a", str(original), str(copy)], check=True)
    with pytest.raises(RunRefusedError, match=f"a copy of the run dir {original}"):
        RunIdentity.resume(config, copy, _tasks(10, 3), shared_redis=True)
    assert RunIdentity.resume(config, copy, _tasks(10, 3)).run_id == identity.run_id  # a fork
    moved = tmp_path / "moved"
    subprocess.run(["cp", "-a", str(original), str(moved)], check=True)
    os.rename(original, tmp_path / "gone")
    (tmp_path / "gone" / IDENTITY_FILE).unlink()
    assert RunIdentity.resume(config, moved, _tasks(10, 3), shared_redis=True).path == str(moved)


def test_a_run_dir_from_before_run_ids_keeps_its_old_namespace(tmp_path: Path) -> None:
    config = RunConfig(data={"source": "arith", "train_size": 4})
    old = tmp_path / "20261201-e2e tiny"
    old.mkdir()
    identity = RunIdentity.resume(config, old, _tasks(5, 2))
    assert identity.namespace == "run-20261201-e2e-tiny"
    assert RunIdentity.read(old / IDENTITY_FILE) == identity  # written for the next resume
    assert identity.writes_digests is False  # its checkpoints may be from before digests


def test_a_new_run_records_that_it_writes_digests(tmp_path: Path) -> None:
    """run.json of a new run says every checkpoint and published version has a manifest
    (``grpo.integrity.run_writes_digests``); a resume keeps it; a run dir from before run.json
    whose checkpoints already have an index is recorded as writing them too."""
    from grpo.integrity import INDEX_FILE, RUN_RECORD_KEY, run_writes_digests

    config = RunConfig(data={"source": "arith", "train_size": 4})
    run_dir = tmp_path / "run"
    (run_dir / "checkpoints" / "step-00000002").mkdir(parents=True)
    RunIdentity.create(config, run_dir, _tasks(5, 2))
    assert json.loads((run_dir / IDENTITY_FILE).read_text())[RUN_RECORD_KEY] is True
    assert run_writes_digests(run_dir / "checkpoints" / "step-00000002")
    assert RunIdentity.resume(config, run_dir, _tasks(5, 2)).writes_digests is True
    old = tmp_path / "old"
    (old / "checkpoints").mkdir(parents=True)
    (old / "checkpoints" / INDEX_FILE).write_text('{"manifests": {}}')
    assert RunIdentity.resume(config, old, _tasks(5, 2)).writes_digests is True


def test_the_task_digest_sees_every_field_and_the_order() -> None:
    tasks = [_task(i) for i in range(3)]
    base = task_digest(tasks)
    assert base == task_digest([_task(i) for i in range(3)]) and base.startswith("sha256:")
    assert task_digest(tasks[::-1]) != base
    changed = [_task(i) for i in range(3)]
    changed[1].prompt = "2+1 ="
    assert task_digest(changed) != base


def test_resume_refusal_and_busy_dir_exit_2_from_the_cli(tmp_path: Path) -> None:
    """``grpo run --resume`` of a folder another process holds exits 2 naming its pid,
    before anything is read or written."""
    run_dir = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(run_dir)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        second = subprocess.run(
            [sys.executable, "-m", "grpo.cli", "run", "--resume", str(run_dir)],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        said = " ".join((second.stdout + second.stderr).split())
        assert second.returncode == 2, said
        assert f"in use by pid {holder.pid}" in said
        assert time.monotonic() - started < 60
        assert sorted(p.name for p in run_dir.iterdir()) == [LOCK_FILE]
    finally:
        holder.kill()
        holder.wait()
