"""The fault matrix (issue 14): ``grpo run`` on e2e-tiny survives the crash of any part.

Each case is its own run of ``run_local`` (the code behind ``grpo run``) with the embedded,
durable Redis; a fault is injected by pid, as an operator would, at a point where the target
provably holds unfinished work: the process is SIGSTOPped, Redis is read (its pending entries,
the learner's last step against its last checkpoint), and only then is it killed (or, for the
hung verifier, left stopped for longer than the call deadline). Every run must finish its
steps and show, from its summary.json, run dir and Redis state:

- 0 rollouts lost (produced = scored + late + held; every trained group has its G members),
- 0 duplicated (no group id trained twice in the learner's lineage),
- the accounting identity gap 0, no group closed or trained short,
- no process left behind, a normal return ("exit 0"), and the restart (or outage) itself.

Beyond crashes (issue 35), each kind of fault a reliability engineer would try has its row,
each failing without its fix: services that hang (SIGSTOP) are restarted by liveness, and a hung
learner ends the run at its wall clock; a verifier stall within its retries wastes no group and
counts as outage; a second run on a live run dir is refused naming its pid and a moved run dir
resumes its own state; a full disk fails the run once, with a summary naming it; damaged
checkpoints are skipped for the newest intact one; a Redis that evicts is refused and a full one
is backpressure; data changed under a run is refused on resume and unparsable golds are named.

Held-out variants of those kinds (docs/results/2026-12-05-faults.md) that failed have their
rows too: a hung (SIGSTOPped) embedded Redis is restarted; a copy of a live run dir on a shared
Redis is refused; a run dir whose whole disk fills up ends with a summary naming it; checkpoints
damaged past their digests (meta.json or DIGESTS.json deleted, DIGESTS.json emptied), all of
them, make a clear refusal, not a fresh start; data changed under a live run is refused when
its driver restarts.

``make faults`` runs this file (several minutes on 2 cores; CI runs it after ``make test``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml
from helpers import wait_until

import grpo
from grpo.local.processes import ServiceFailedError
from grpo.local.run import run_local
from grpo.local.rundir import RunDirBusyError, RunRefusedError
from grpo.services.runtime.streams import StreamNames
from grpo.services.settings.run import RunConfig, load_run_config

pytestmark = [pytest.mark.slow, pytest.mark.faults, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]
G, B, STEPS = 4, 2, 24  # 48 groups: the run still needs every service after a fault


# ---- the run --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from grpo.model import init_tiny_model

    cfg = _config(Path("unused"))
    tiny = cfg.model.tiny
    return Path(
        init_tiny_model(
            tmp_path_factory.mktemp("model") / "init", seed=0, hidden=tiny.hidden,
            layers=tiny.layers, heads=tiny.heads, kv_heads=tiny.kv_heads,
            intermediate=tiny.intermediate, max_positions=tiny.max_positions,
        )
    )  # fmt: skip


def _overrides(model: Path) -> dict[str, Any]:
    return {
        "model.path": str(model),
        "model.sft.enabled": False,
        "generation.group_size": G,
        "generation.max_new_tokens": 12,
        "learner.batch_groups": B,
        "learner.checkpoint_every": 2,
        "data.heldout_size": 0,
        "assembler.dynamic_sampling.mode": "off",
        "assembler.verifier.timeout_s": 2.0,
        "assembler.verifier.max_attempts": 2,
        "assembler.verifier.outage_budget_s": 60.0,
        "supervision.backoff_initial_s": 0.2,
        "budget.steps": STEPS,
        "budget.wall_clock_s": 300,
        "budget.startup_timeout_s": 120,
        "budget.stop_grace_s": 10,
    }


def _config(model: Path) -> RunConfig:
    return load_run_config(REPO / "configs" / "e2e-tiny.yaml", _overrides(model))


def _run(
    config: RunConfig,
    run_dir: Path,
    inject: Callable[[Path], str],
    *,
    join_s: float = 400,
    unstick: Callable[[Path], None] | None = None,
    may_fail: bool = False,
) -> dict[str, Any]:
    """``run_local`` in a thread, ``inject(run_dir)`` here; returns summary.json plus the fault
    (``fault``), the console lines (``said``) and, with ``may_fail``, the run's error
    (``error``; else it is raised). A run still going after ``join_s`` fails the row; first
    ``unstick(run_dir)`` (e.g. SIGCONT a stopped service) lets it end, so nothing is left."""
    result: dict[str, Any] = {}
    said: list[str] = []

    def say(line: str) -> None:
        said.append(line)
        print(line)

    def target() -> None:
        try:
            result["summary"] = run_local(config, run_dir, log_fn=say)
        except BaseException as exc:  # re-raised below
            result["error"] = exc

    thread = threading.Thread(target=target, name="grpo-run")
    thread.start()
    stuck = False
    try:
        result["fault"] = inject(run_dir)
    finally:
        thread.join(join_s)
        stuck = thread.is_alive()
        if stuck and unstick is not None:
            unstick(run_dir)
        thread.join(400)
    assert not stuck, f"the run did not finish within {join_s} s"
    if "error" in result and not may_fail:
        raise result["error"]
    summary = json.loads((run_dir / "summary.json").read_text())
    return {**summary, "fault": result["fault"], "said": said, "error": result.get("error")}


def _overrides_with(model: Path, **more: Any) -> dict[str, Any]:
    return {**_overrides(model), **more}


def _config_with(model: Path, **more: Any) -> RunConfig:
    return load_run_config(REPO / "configs" / "e2e-tiny.yaml", _overrides_with(model, **more))


# ---- reading a run --------------------------------------------------------------------


def _cmdlines() -> dict[int, str]:
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                raw = Path(f"/proc/{entry}/cmdline").read_bytes()
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state != "Z":
                out[int(entry)] = raw.replace(b"\0", b" ").decode(errors="replace")
    return out


def _redis_port(run_dir: Path) -> int:
    settings = yaml.safe_load((run_dir / "services" / "assembler.yaml").read_text())
    return int(str(settings["redis_url"]).rsplit(":", 1)[1].split("/")[0])


def _pid_of(run_dir: Path, name: str) -> int | None:
    """The pid of a service (``services/<name>.yaml``) or of the embedded Redis (``redis``,
    found by its port: the server rewrites its command line to ``valkey-server HOST:PORT``)."""
    if name == "redis":
        needle = f"127.0.0.1:{_redis_port(run_dir)}"
        found = [p for p, cmd in _cmdlines().items() if "valkey-server" in cmd and needle in cmd]
    else:
        needle = f"--config {run_dir / 'services' / f'{name}.yaml'}"
        found = [pid for pid, cmd in _cmdlines().items() if needle in cmd]
    return min(found) if found else None


def _left_behind(run_dir: Path, redis_port: int) -> list[str]:
    """Command lines of live processes of the run: services (by run dir) and its Redis."""
    port = f"127.0.0.1:{redis_port}"
    return [
        c for c in _cmdlines().values() if str(run_dir) in c or ("valkey-server" in c and port in c)
    ]


def _client(run_dir: Path) -> redis.Redis:
    settings = yaml.safe_load((run_dir / "services" / "assembler.yaml").read_text())
    return redis.Redis.from_url(settings["redis_url"], socket_timeout=5)


def _names(run_dir: Path) -> StreamNames:
    settings = yaml.safe_load((run_dir / "services" / "assembler.yaml").read_text())
    return StreamNames(settings["namespace"])


def _steps(run_dir: Path) -> list[int]:
    path = run_dir / "metrics.jsonl"
    text = path.read_text() if path.is_file() else ""
    return [json.loads(x)["step"] for x in text.splitlines() if x.strip()]


def _checkpoint_step(run_dir: Path) -> int:
    steps = [int(p.name.split("-")[1]) for p in (run_dir / "checkpoints").glob("step-*")]
    return max(steps, default=0)


def _wait(cond: Callable[[], Any], what: str, timeout_s: float = 240.0) -> Any:
    """``wait_until`` with the fault matrix's patience (a step on 2 busy cores)."""
    return wait_until(cond, timeout_s=timeout_s, what=what)


def _stop_and_check(
    run_dir: Path, name: str, holds_work: Callable[[redis.Redis], str], *, patience_s: float = 0.0
) -> str:
    """SIGSTOP ``name`` and read Redis: once ``holds_work`` gives a description (within
    ``patience_s`` of the stop) return it with the process still stopped; else SIGCONT and
    try again. A stopped verifier needs patience: the assembler's next call to it hangs with
    its rollouts unacknowledged."""
    client = _wait(lambda: (run_dir / "services" / "assembler.yaml").is_file()
                   and _client(run_dir), "service configs")  # fmt: skip
    while True:
        pid = _wait(lambda: _pid_of(run_dir, name), f"{name} to run")
        os.kill(pid, signal.SIGSTOP)
        until = time.monotonic() + patience_s
        while True:
            try:
                evidence = holds_work(client)
            except redis.RedisError:
                evidence = ""
            if evidence:
                return f"{name} pid {pid}: {evidence}"
            if time.monotonic() >= until:
                break
            time.sleep(0.05)
        os.kill(pid, signal.SIGCONT)
        time.sleep(0.1)


def _kill_group(run_dir: Path, name: str) -> None:
    pid = _pid_of(run_dir, name)
    assert pid is not None
    os.killpg(pid, signal.SIGKILL)  # the service and its pool workers, as a crash would


# ---- the checks -----------------------------------------------------------------------


def _check(summary: dict[str, Any], run_dir: Path, *, redis_restarted: bool = False) -> None:
    assert summary["stop_reason"] == "steps", summary.get("failure")
    assert summary["steps"] >= STEPS
    accounting = summary["accounting"]
    assert accounting["groups"]["identity_gap"] == 0, accounting
    assert accounting["groups"]["closed_short"] == 0, accounting
    unaccounted = accounting["rollouts"]["unaccounted"]
    if redis_restarted:
        # None lost. Redis restarted from its append-only file can keep a record and lose its
        # ack: that rollout counts as scored and as queued (< 0; docs/runtime.md, known defect).
        assert unaccounted <= 0, accounting
    else:
        assert unaccounted == 0, accounting  # none lost
    assert summary["leftover_processes"] == []
    assert _left_behind(run_dir, _redis_port(run_dir)) == [], "processes left behind"
    lineage = [json.loads(x) for x in (run_dir / "groups.jsonl").read_text().splitlines()]
    ids = [row["group_id"] for row in lineage]
    assert len(ids) == len(set(ids)), "a group was trained twice"
    assert len(ids) >= STEPS * B
    for row in lineage:  # no group trained short
        assert len(row["rewards"]) == G and row["status"] == "GROUP_STATUS_COMPLETE", row


def _report(summary: dict[str, Any], name: str, run_dir: Path) -> None:
    groups, rollouts = summary["accounting"]["groups"], summary["accounting"]["rollouts"]
    line = {
        "fault": name,
        "injected": summary["fault"],
        "restarts": summary["restarts"],
        "outage_s": summary["outage_s"],
        "groups_opened": groups["opened"],
        "groups_rejected": groups["rejected"],
        "rewards_missing": summary["rewards_missing"],
        "rollouts_late": rollouts["late"],
        "generated_tokens": summary["generated_tokens"],
        "kept_tokens": summary["kept_tokens"],
        "wall_clock_s": summary["wall_clock_s"],
    }
    print("FAULT " + json.dumps(line))
    out = os.environ.get("GRPO_FAULTS_REPORT")
    if out:
        with open(out, "a") as fh:
            fh.write(json.dumps(line) + "\n")


# ---- the matrix -----------------------------------------------------------------------


def _learner_between_checkpoints(run_dir: Path) -> str:
    def holds(client: redis.Redis) -> str:
        steps, ckpt = _steps(run_dir), _checkpoint_step(run_dir)
        pending = int(client.xpending(_names(run_dir).groups, "learner")["pending"])  # type: ignore[index]
        if steps and steps[-1] > ckpt and pending > 0:
            return f"step {steps[-1]} trained, checkpoint {ckpt}, {pending} groups unacked"
        return ""

    _wait(lambda: _steps(run_dir), "a first learner step")
    evidence = _stop_and_check(run_dir, "learner", holds)
    _kill_group(run_dir, "learner")
    return evidence


def _pending_for(run_dir: Path, stream: str, group: str) -> Callable[[redis.Redis], str]:
    def holds(client: redis.Redis) -> str:
        key = getattr(_names(run_dir), stream)
        pending = int(client.xpending(key, group)["pending"])  # type: ignore[index]
        return f"{pending} {stream} entries unacknowledged" if pending else ""

    return holds


def _crash(name: str, stream: str, group: str, patience_s: float = 0.0) -> Callable[[Path], str]:
    def inject(run_dir: Path) -> str:
        _wait(lambda: _steps(run_dir), "a first learner step")
        holds = _pending_for(run_dir, stream, group)
        evidence = _stop_and_check(run_dir, name, holds, patience_s=patience_s)
        _kill_group(run_dir, name)
        return evidence

    return inject


def _redis_kill(run_dir: Path) -> str:
    return _signal_redis(run_dir, signal.SIGKILL, "killed")


def _verifier_hang(run_dir: Path) -> str:
    _wait(lambda: _steps(run_dir), "a first learner step")
    holds = _pending_for(run_dir, "rollouts", "assembler")
    evidence = _stop_and_check(run_dir, "verifier-math", holds, patience_s=5.0)
    time.sleep(6.0)  # > 2 attempts x the 2 s call deadline
    pid = _pid_of(run_dir, "verifier-math")
    assert pid is not None
    os.kill(pid, signal.SIGCONT)
    return evidence + ", stopped 6 s"


CASES: dict[str, Callable[[Path], str]] = {
    "learner SIGKILL between checkpoints": _learner_between_checkpoints,
    "assembler SIGKILL holding unacked rollouts": _crash("assembler", "rollouts", "assembler"),
    "rollout worker SIGKILL mid-group": _crash("rollout-worker-0", "prompts", "rollout-workers"),
    "verifier SIGKILL": _crash("verifier-math", "rollouts", "assembler", patience_s=5.0),
    "redis SIGKILL and restart": _redis_kill,
    "verifier SIGSTOP past the call deadline": _verifier_hang,
}
RESTARTED = {
    "learner SIGKILL between checkpoints": "learner",
    "assembler SIGKILL holding unacked rollouts": "assembler",
    "rollout worker SIGKILL mid-group": "rollout-worker-0",
    "verifier SIGKILL": "verifier-math",
    "redis SIGKILL and restart": "redis",
}


@pytest.mark.parametrize("name", list(CASES))
def test_fault(
    name: str, tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)  # the run's own durable, embedded Redis
    run_dir = tmp_path / "run"
    summary = _run(_config(tiny_model), run_dir, CASES[name])
    _report(summary, name, run_dir)
    _check(summary, run_dir, redis_restarted=name == "redis SIGKILL and restart")
    if name in RESTARTED:
        assert summary["restarts"].get(RESTARTED[name], 0) >= 1, summary["restarts"]
    else:  # the hung verifier: an outage, held through, and no reward lost to it
        assert summary["outage_s"]["verifiers"]["assembler"] > 0.0, summary["outage_s"]
        assert summary["rewards_missing"] == 0
    if name == "redis SIGKILL and restart":  # the services saw it, each in its own log
        assert max(summary["outage_s"]["redis"].values()) > 0.0, summary["outage_s"]


def _config_file(tmp_path: Path, model: Path, **more: Any) -> Path:
    """e2e-tiny with the matrix's overrides (and ``more``) as a YAML file for ``grpo run``."""
    base = yaml.safe_load((REPO / "configs" / "e2e-tiny.yaml").read_text())
    for dotted, value in _overrides_with(model, **more).items():
        node = base
        *parents, leaf = dotted.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(base))
    return config


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "REDIS_URL"}


GRPO = [sys.executable, "-m", "grpo.cli", "run"]


def test_grpo_run_sigkill_a_second_run_refused_then_resume_from_a_moved_dir(
    tiny_model: Path, tmp_path: Path
) -> None:
    """Kinds 3 and 7 (issue 35): while ``grpo run`` runs, a second ``--resume`` of its run
    dir exits 2 naming its pid and changes nothing; after a SIGKILL, the folder is renamed and
    ``--resume NEW_PATH`` continues the run in its own Redis namespace (the run id in
    run.json, not the folder's name), republishing the policy the moved folder holds."""
    run_dir = tmp_path / "run"
    # The first run must still run when it is killed (24 steps can be over by then on a
    # busy machine): it has no step budget of its own; the resume has STEPS.
    config = _config_file(tmp_path, tiny_model, **{"budget.steps": 10_000})
    first = subprocess.Popen([*GRPO, str(config), "--run-dir", str(run_dir)], env=_env(),
                             stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        _wait(lambda: _steps(run_dir) and _steps(run_dir)[-1] > _checkpoint_step(run_dir) >= 2,
              "a step after the first checkpoint")  # fmt: skip
        second = subprocess.run([*GRPO, "--resume", str(run_dir)], env=_env(), timeout=120,
                                capture_output=True, text=True)  # fmt: skip
        said = " ".join((second.stdout + second.stderr).split())
        assert second.returncode == 2, said
        assert f"in use by pid {first.pid}" in said, said
        with pytest.raises(RunDirBusyError, match=f"in use by pid {first.pid}"):
            grpo.run(_config(tiny_model), run_dir)  # the Python API: refused the same way
        assert first.poll() is None  # the first run goes on, untouched
        namespace = _names(run_dir).namespace
        first.send_signal(signal.SIGKILL)  # no shutdown at all
        first.wait(30)
        port = _redis_port(run_dir)
        _wait(
            lambda: not _left_behind(run_dir, port),
            "every service and the embedded Redis to die with grpo run",
            timeout_s=30,
        )
        assert not (run_dir / "summary.json").exists()
        moved = tmp_path / "moved"
        run_dir.rename(moved)
        resumed = subprocess.run([*GRPO, "--resume", str(moved), "--set",
                                  f"budget.steps={STEPS}"], env=_env(), timeout=400,
                                 capture_output=True, text=True)  # fmt: skip
        assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    finally:
        if first.poll() is None:
            first.kill()
    assert _names(moved).namespace == namespace  # its own state, not a fresh namespace
    summary = json.loads((moved / "summary.json").read_text())
    summary["fault"] = "grpo run SIGKILLed after a step past its checkpoint, dir moved"
    _report(summary, "grpo run SIGKILL, second run refused, resume a moved dir", moved)
    _check(summary, moved)
    assert summary["resumed"] is True
    assert summary["run_id"] == json.loads((moved / "run.json").read_text())["run_id"]

    # A new run in that folder through the Python API is refused as the CLI refuses it (it
    # overwrote run.json with a new run id and ran over the old run's Redis file and
    # checkpoints under a new namespace): nothing in the folder changes.
    def files() -> dict[Path, int]:  # run.lock aside: the refused call held the lock
        return {p: p.stat().st_mtime_ns for p in moved.rglob("*")
                if p.is_file() and p.name != "run.lock"}  # fmt: skip

    before = files()
    with pytest.raises(RunRefusedError, match="already holds a run"):
        grpo.run(_config(tiny_model), moved)
    assert files() == before


def test_a_copy_of_a_live_run_dir_on_a_shared_redis_is_refused(
    tiny_model: Path, tmp_path: Path
) -> None:
    """Kinds 3 and 7: ``cp -a`` of a live run dir whose Redis is a shared server
    (``redis_url``): the copy holds the same run id, hence the same namespace there, and is not
    locked (another folder). Its ``--resume`` exits 2 naming the original (before, it ran a
    second learner, assembler and workers on the original's streams); the original goes on."""
    from grpo.services.runtime.redis_server import EmbeddedRedis

    run_dir, copy = tmp_path / "run", tmp_path / "copy"
    with EmbeddedRedis() as server:
        config = _config_file(tmp_path, tiny_model, **{"budget.steps": 10_000,
                                                        "redis_url": server.url})  # fmt: skip
        first = subprocess.Popen([*GRPO, str(config), "--run-dir", str(run_dir)], env=_env(),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)  # fmt: skip
        try:
            _wait(lambda: _checkpoint_step(run_dir) >= 2, "a first checkpoint")
            subprocess.run(["cp", "-a", str(run_dir), str(copy)], check=True)
            second = subprocess.run([*GRPO, "--resume", str(copy)], env=_env(), timeout=120,
                                    capture_output=True, text=True)  # fmt: skip
            said = " ".join((second.stdout + second.stderr).split())
            assert second.returncode == 2, said
            assert f"a copy of the run dir {run_dir}" in said, said
            assert first.poll() is None  # the original goes on
            recorded = json.loads((copy / "run.json").read_text())["path"]
            assert recorded == str(run_dir.resolve())  # refused before it wrote anything
        finally:
            first.send_signal(signal.SIGTERM)
            first.wait(120)


# ---- liveness by progress (issue 35, kind 1) ------------------------------------------


def _hang(name: str, holds: Callable[[Path], Callable[[redis.Redis], str]] | None = None,
          patience_s: float = 0.0) -> Callable[[Path], str]:  # fmt: skip
    """SIGSTOP ``name`` (holding work when ``holds`` says what) and leave it stopped."""

    def inject(run_dir: Path) -> str:
        _wait(lambda: _steps(run_dir), "a first learner step")
        if holds is None:
            pid = _wait(lambda: _pid_of(run_dir, name), f"{name} to run")
            os.killpg(pid, signal.SIGSTOP)
            return f"{name} pid {pid} stopped after step {_steps(run_dir)[-1]}"
        return _stop_and_check(run_dir, name, holds(run_dir), patience_s=patience_s)

    return inject


def _cont(name: str) -> Callable[[Path], None]:
    def unstick(run_dir: Path) -> None:
        pid = _pid_of(run_dir, name)
        if pid is not None:
            os.killpg(pid, signal.SIGCONT)

    return unstick


HUNG = {
    "learner": _hang("learner"),
    "verifier-math": _hang(
        "verifier-math", lambda d: _pending_for(d, "rollouts", "assembler"), patience_s=5.0
    ),
    "assembler": _hang("assembler", lambda d: _pending_for(d, "rollouts", "assembler")),
}
STALL_S = 8.0


@pytest.mark.parametrize("name", list(HUNG))
def test_a_hung_service_is_restarted_by_liveness(
    name: str, tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A service SIGSTOPped (alive, its port open, answering nothing) is killed after
    ``supervision.stall_s`` without progress and restarted; the run finishes, losing nothing,
    and names it on the console and in its summary (a death "stalled: ...", a stall)."""
    monkeypatch.delenv("REDIS_URL", raising=False)
    run_dir = tmp_path / "run"
    config = _config_with(tiny_model, **{"supervision.stall_s": STALL_S})
    summary = _run(config, run_dir, HUNG[name], join_s=500, unstick=_cont(name))
    _report(summary, f"{name} SIGSTOP (hung)", run_dir)
    _check(summary, run_dir)
    assert summary["restarts"].get(name, 0) >= 1, summary["restarts"]
    assert any(d["service"] == name and d["reason"].startswith("stalled: no progress")
               for d in summary["deaths"]), summary["deaths"]  # fmt: skip
    assert any(s["service"] == name and s["restarted"] and s["seconds"] >= STALL_S
               for s in summary["stalls"]), summary["stalls"]  # fmt: skip
    assert any(f"service {name} stalled" in line for line in summary["said"])
    if name == "verifier-math":  # ridden out as an outage meanwhile: no reward lost
        assert summary["outage_s"]["verifiers"]["assembler"] > 0.0
        assert summary["rewards_missing"] == 0


def _stop_redis(run_dir: Path) -> str:
    """SIGSTOP the embedded Redis after a step, holding work (rollouts or prompt jobs
    pending), and leave it stopped: every connection stays open and nothing answers."""
    return _signal_redis(run_dir, signal.SIGSTOP, "stopped")


def _signal_redis(run_dir: Path, sig: signal.Signals, done: str) -> str:
    """Send ``sig`` to the embedded Redis once a step is trained and work is pending in it."""
    _wait(lambda: _steps(run_dir), "a first learner step")
    client = _client(run_dir)
    rollouts = _pending_for(run_dir, "rollouts", "assembler")
    prompts = _pending_for(run_dir, "prompts", "rollout-workers")
    evidence = _wait(lambda: rollouts(client) or prompts(client), "pending work in Redis")
    pid = _pid_of(run_dir, "redis")
    assert pid is not None
    os.kill(pid, sig)
    return f"redis pid {pid} {done} with {evidence}"


def _cont_redis(run_dir: Path) -> None:
    pid = _pid_of(run_dir, "redis")
    if pid is not None:
        os.kill(pid, signal.SIGCONT)


def test_a_hung_redis_is_restarted_by_liveness(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The embedded Redis SIGSTOPped for good holding work: ``grpo run``'s supervising loop
    (its own Redis reads bounded) sees it silent for ``supervision.stall_s``, kills it and
    restarts it from its append-only file; the run finishes, losing nothing, and names it.
    Before, the supervising loop hung in a Redis read with no timeout: the stopped server was
    never restarted and the run never ended (nor did the driver at its wall clock)."""
    monkeypatch.delenv("REDIS_URL", raising=False)
    run_dir = tmp_path / "run"
    config = _config_with(tiny_model, **{"supervision.stall_s": STALL_S})
    summary = _run(config, run_dir, _stop_redis, join_s=300, unstick=_cont_redis)
    _report(summary, "redis SIGSTOP (hung)", run_dir)
    _check(summary, run_dir, redis_restarted=True)
    assert summary["restarts"].get("redis", 0) >= 1, summary["restarts"]
    assert any(s["service"] == "redis" and s["restarted"] and s["seconds"] >= STALL_S
               for s in summary["stalls"]), summary["stalls"]  # fmt: skip
    assert any("embedded Redis stalled" in line for line in summary["said"])
    assert max(summary["outage_s"]["redis"].values()) > 0.0, summary["outage_s"]


EXTERNAL_STOP_S = 8.0


def test_a_hung_external_redis_is_an_outage_ridden_out_by_every_service(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An external Redis (``redis_url``, which ``grpo run`` cannot restart) SIGSTOPped for
    ~8 s after a step: every service's Redis client bounds its replies
    (``supervision.redis_reply_timeout_s``, 2 s here), so the stop is an outage each service
    rides out (``outage_s.redis``), named once on the console, and the run goes on when Redis
    answers, losing nothing. Before, the services' clients waited without bound (until the
    600 s loop-stall check), and nothing named Redis."""
    from grpo.services.runtime.redis_server import EmbeddedRedis

    monkeypatch.delenv("REDIS_URL", raising=False)
    run_dir = tmp_path / "run"
    with EmbeddedRedis() as server:
        pid = server.pid
        assert pid is not None

        def stop(run_dir: Path) -> str:
            _wait(lambda: _steps(run_dir), "a first learner step")
            os.kill(pid, signal.SIGSTOP)
            time.sleep(EXTERNAL_STOP_S)
            os.kill(pid, signal.SIGCONT)
            return f"external redis pid {pid} stopped {EXTERNAL_STOP_S:g} s"

        config = _config_with(tiny_model, **{"redis_url": server.url,
                                             "supervision.redis_reply_timeout_s": 2.0})  # fmt: skip
        try:
            summary = _run(config, run_dir, stop, join_s=300)
        finally:
            os.kill(pid, signal.SIGCONT)
    _report(summary, "external redis SIGSTOP 8 s", run_dir)
    assert summary["stop_reason"] == "steps", summary.get("failure")
    accounting = summary["accounting"]
    assert accounting["groups"]["identity_gap"] == 0, accounting
    assert accounting["rollouts"]["unaccounted"] == 0, accounting
    redis_outage = summary["outage_s"]["redis"]
    assert {"learner", "assembler"} <= {k for k, v in redis_outage.items() if v > 2.0}, redis_outage
    assert any("is not answering" in line and "not restarted by this run" in line
               for line in summary["said"]), summary["said"]  # fmt: skip
    assert summary["restarts"] == {} or not any(summary["restarts"].values()), summary["restarts"]


def test_a_hung_learner_ends_the_run_at_its_wall_clock_with_a_summary_naming_it(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With liveness's restart off, a learner SIGSTOPped for good answers no status poll: the
    run still ends at ``budget.wall_clock_s`` (the driver checks it whatever the polls
    return), and the summary and the console name the learner as without progress."""
    monkeypatch.delenv("REDIS_URL", raising=False)
    run_dir = tmp_path / "run"
    wall = 40.0
    config = _config_with(tiny_model, **{"supervision.stall_s": 0, "budget.steps": 10_000,
                                         "budget.wall_clock_s": wall})  # fmt: skip
    started = time.monotonic()
    summary = _run(config, run_dir, HUNG["learner"], join_s=300, unstick=_cont("learner"))
    took = time.monotonic() - started
    _report(summary, "learner SIGSTOP, wall clock", run_dir)
    assert summary["stop_reason"] == "wall_clock", summary.get("failure")
    assert summary["grpo_wall_clock_s"] < wall + 60, summary["grpo_wall_clock_s"]
    assert took < 240, took
    stalls = [s for s in summary["stalls"] if s["service"] == "learner"]
    assert stalls and not stalls[0]["restarted"] and stalls[0]["seconds"] >= 10, summary["stalls"]
    assert any("service learner has made no progress" in line for line in summary["said"])
    assert summary["accounting"]["groups"]["identity_gap"] == 0
    assert summary["accounting"]["rollouts"]["unaccounted"] == 0
    assert summary["leftover_processes"] == []
    assert _left_behind(run_dir, _redis_port(run_dir)) == []


# ---- a verifier stall within its retries (kind 2) ---------------------------------------


def test_a_verifier_stall_within_its_retries_wastes_nothing_and_counts_as_outage(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The math verifier stopped for ~5 s, longer than an attempt's 2 s deadline but within
    3 attempts (6.6 s, under the 8 s group deadline the config requires at least): the call
    succeeds on a retry, no group closes short (the sweeper pauses while a call is stalled
    and deadlines move on by the stall), and the stall counts as verifier outage."""
    monkeypatch.delenv("REDIS_URL", raising=False)
    run_dir = tmp_path / "run"
    config = _config_with(tiny_model, **{
        "assembler.group_deadline_s": 8.0, "assembler.reclaim_idle_ms": 2000,
        "assembler.verifier.max_attempts": 3,
    })  # fmt: skip

    def stall(run_dir: Path) -> str:
        _wait(lambda: _steps(run_dir), "a first learner step")
        holds = _pending_for(run_dir, "rollouts", "assembler")
        evidence = _stop_and_check(run_dir, "verifier-math", holds, patience_s=5.0)
        time.sleep(4.5)  # past 2 attempts (4.2 s), within 3 (6.6 s)
        os.killpg(_pid_of(run_dir, "verifier-math") or 0, signal.SIGCONT)
        return evidence + ", stopped ~5 s"

    summary = _run(config, run_dir, stall)
    _report(summary, "verifier SIGSTOP within its retries", run_dir)
    _check(summary, run_dir)
    assert summary["outage_s"]["verifiers"]["assembler"] >= 2.0, summary["outage_s"]
    assert summary["rewards_missing"] == 0
    assert summary["restarts"] == {}


# ---- a full disk (kind 4) -------------------------------------------------------------


def test_a_full_disk_fails_the_run_once_with_a_summary_naming_it(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The learner's groups.jsonl on a full device (``/dev/full``: every write ENOSPC): the
    learner fails at its first step, again after one restart with the same error (a
    deterministic failure: not five restarts), and the run stops with a summary that names
    the learner, ``disk full (ENOSPC)`` and its last error, read before Redis stopped."""
    monkeypatch.delenv("REDIS_URL", raising=False)
    run_dir = tmp_path / "run"

    def fill(run_dir: Path) -> str:
        _wait(lambda: (run_dir / "config.yaml").is_file(), "the run dir")
        (run_dir / "groups.jsonl").symlink_to("/dev/full")
        return "groups.jsonl -> /dev/full"

    summary = _run(_config(tiny_model), run_dir, fill, may_fail=True)
    _report(summary, "learner disk full (ENOSPC)", run_dir)
    assert isinstance(summary["error"], ServiceFailedError), summary["error"]
    assert summary["stop_reason"] == "error"
    assert summary["failed_service"] == "learner"
    assert summary["failure_cause"] == "disk full (ENOSPC)"
    assert "No space left on device" in summary["last_error"]
    assert summary["restarts"] == {"learner": 1}, summary["restarts"]
    assert [d["service"] for d in summary["deaths"]] == ["learner", "learner"]
    assert summary["accounting"]["groups"]["identity_gap"] == 0
    assert summary["accounting"]["rollouts"]["unaccounted"] == 0
    assert summary["leftover_processes"] == []
    assert _left_behind(run_dir, _redis_port(run_dir)) == []


@pytest.fixture
def small_disk(tmp_path: Path) -> Any:
    """A 64 MiB tmpfs (a disk of its own that can fill up); skipped where mounting is not
    permitted (not root, no CAP_SYS_ADMIN)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mount)],
                          capture_output=True, text=True)  # fmt: skip
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_run_dir_whose_disk_fills_up_ends_with_a_summary_naming_it(
    tiny_model: Path, small_disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole run dir on a small disk that fills up after the first step (the append-only
    file, logs, checkpoints, metrics all on it): Redis refuses writes (MISCONF), services die
    with errors their logs, on that disk, cannot hold, and the run fails with a summary.json
    that names the full disk, its accounting read from Redis. Before, the summary's own write
    failed (ENOSPC) and the run left none, nor a named cause."""
    monkeypatch.delenv("REDIS_URL", raising=False)
    run_dir = small_disk / "run"

    def fill(run_dir: Path) -> str:
        _wait(lambda: _steps(run_dir), "a first learner step")
        free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
        with contextlib.suppress(OSError), (small_disk / "filler").open("wb") as fh:
            fh.write(b"\0" * free)
        return f"disk filled after step {_steps(run_dir)[-1]} ({free} B)"

    summary = _run(_config(tiny_model), run_dir, fill, may_fail=True)
    _report(summary, "run dir disk full", run_dir)
    assert summary["error"] is not None
    assert summary["stop_reason"] == "error", summary.get("failure")
    assert summary["failure_cause"] == "disk full (ENOSPC)", summary
    assert summary["failed_service"], summary
    assert summary["accounting"]["groups"]["identity_gap"] == 0
    assert summary["leftover_processes"] == []
    assert _left_behind(run_dir, _redis_port(run_dir)) == []


# ---- damaged checkpoints (kind 5) -----------------------------------------------------


def _damage_checkpoints(run_dir: Path) -> str:
    """Once three checkpoints exist: stop the learner, truncate the newest's weights, alter
    one byte of the next one's optimizer state (same size), then kill the learner."""
    ckpts = lambda: sorted((run_dir / "checkpoints").glob("step-*"))  # noqa: E731
    _wait(lambda: len(ckpts()) >= 3 and _steps(run_dir)[-1] > _checkpoint_step(run_dir),
          "three checkpoints and a step after them")  # fmt: skip
    pid = _wait(lambda: _pid_of(run_dir, "learner"), "the learner")
    os.killpg(pid, signal.SIGSTOP)
    newest, second, kept = ckpts()[-1], ckpts()[-2], ckpts()[-3]
    weights = newest / "model" / "model.safetensors"
    with weights.open("r+b") as fh:
        fh.truncate(weights.stat().st_size // 3)
    optimizer = second / "optimizer.pt"
    raw = bytearray(optimizer.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    optimizer.write_bytes(bytes(raw))
    os.killpg(pid, signal.SIGKILL)
    return f"{newest.name} truncated, {second.name} altered, {kept.name} intact; learner killed"


def test_damaged_newest_checkpoints_are_skipped_for_the_newest_intact_one(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)
    run_dir = tmp_path / "run"
    summary = _run(_config(tiny_model), run_dir, _damage_checkpoints)
    _report(summary, "damaged newest checkpoints, learner SIGKILL", run_dir)
    _check(summary, run_dir)
    names = summary["fault"].split(", ")
    newest, second, kept = (part.split()[0] for part in names[:3])
    lines = [json.loads(x) for x in (run_dir / "logs" / "learner.log").read_text().splitlines()
             if x.startswith("{") and "is damaged and skipped" in x]  # fmt: skip
    assert [line["msg"].split()[1] for line in lines] == [newest, second], lines
    assert all(f"resuming from {kept}" in line["msg"] for line in lines)
    assert "truncated" in lines[0]["msg"] and "altered at rest" in lines[1]["msg"]
    assert sorted(p.name.split("-")[2] for p in (run_dir / "checkpoints").glob("damaged-*")) == [
        second.split("-")[1], newest.split("-")[1],
    ]  # fmt: skip
    warned = [w for w in summary["warnings"] if "was damaged and skipped" in w]
    assert len(warned) == 2, summary["warnings"]


def _damage_every_checkpoint_otherwise(run_dir: Path) -> str:
    """Once three checkpoints exist (all that are kept): stop the learner, delete the newest
    one's meta.json, delete the next one's DIGESTS.json and alter a byte of its optimizer
    state, empty the third one's DIGESTS.json and alter a byte of it too; kill the learner."""
    ckpts = lambda: sorted((run_dir / "checkpoints").glob("step-*"))  # noqa: E731
    _wait(lambda: len(ckpts()) >= 3 and _steps(run_dir)[-1] > _checkpoint_step(run_dir),
          "three checkpoints and a step after them")  # fmt: skip
    pid = _wait(lambda: _pid_of(run_dir, "learner"), "the learner")
    os.killpg(pid, signal.SIGSTOP)
    newest, second, third = ckpts()[-1], ckpts()[-2], ckpts()[-3]
    (newest / "meta.json").unlink()
    (second / "DIGESTS.json").unlink()
    for folder in (second, third):
        raw = bytearray((folder / "optimizer.pt").read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        (folder / "optimizer.pt").write_bytes(bytes(raw))
    (third / "DIGESTS.json").write_text(json.dumps({"algorithm": "sha256", "files": {}}))
    step = _steps(run_dir)[-1]
    os.killpg(pid, signal.SIGKILL)
    return (f"step {step}: {newest.name} meta.json deleted, {second.name} manifest deleted, "
            f"{third.name} manifest emptied; learner killed")  # fmt: skip


def test_every_checkpoint_damaged_otherwise_is_a_clear_refusal_not_a_fresh_start(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Damage the digests cannot see by themselves: a checkpoint without meta.json (it was
    passed over silently, and the learner crash-looped on "already exists" at that step), one
    whose DIGESTS.json was deleted (taken for one from before digests: loaded unchecked) and
    one whose DIGESTS.json was emptied (checked against nothing). Each is found (the parent's
    index vouches for every manifest) and moved aside; with none intact the learner refuses to
    start over from the initial model (which silently dropped every trained step), and the run
    fails with a summary naming it, nothing trained after the fault."""
    monkeypatch.delenv("REDIS_URL", raising=False)
    run_dir = tmp_path / "run"
    summary = _run(_config(tiny_model), run_dir, _damage_every_checkpoint_otherwise,
                   may_fail=True)  # fmt: skip
    _report(summary, "every checkpoint damaged otherwise, learner SIGKILL", run_dir)
    assert isinstance(summary["error"], ServiceFailedError), summary["error"]
    assert summary["stop_reason"] == "error" and summary["failed_service"] == "learner"
    assert "no intact checkpoint" in summary["last_error"], summary["last_error"]
    reasons = " ".join(summary["warnings"])
    for why in ("meta.json is missing", "DIGESTS.json is missing", "edited since"):
        assert why in reasons, summary["warnings"]
    assert len(list((run_dir / "checkpoints").glob("damaged-*"))) == 3
    killed_at = int(summary["fault"].split(":")[0].split()[1])
    assert _steps(run_dir) == list(range(1, killed_at + 1)), "trained again after the fault"
    assert summary["accounting"]["groups"]["identity_gap"] == 0
    assert summary["leftover_processes"] == []
    assert _left_behind(run_dir, _redis_port(run_dir)) == []


# ---- Redis memory (kind 6) ------------------------------------------------------------


def test_a_redis_that_evicts_keys_is_refused_before_anything_starts(
    tiny_model: Path, tmp_path: Path
) -> None:
    from grpo.services.runtime.redis_server import EmbeddedRedis

    run_dir = tmp_path / "run"
    config = _config_file(tmp_path, tiny_model, **{"budget.steps": 2})
    with EmbeddedRedis() as server:
        redis.Redis.from_url(server.url).config_set("maxmemory-policy", "allkeys-lru")
        run = subprocess.run([*GRPO, str(config), "--run-dir", str(run_dir), "--set",
                              f"redis_url={server.url}"], env=_env(), timeout=180,
                             capture_output=True, text=True)  # fmt: skip
    said = " ".join((run.stdout + run.stderr).split())
    assert run.returncode == 2, said
    assert "maxmemory-policy allkeys-lru" in said and "noeviction" in said, said
    assert not (run_dir / "services").exists()  # refused before any service started


def _fill_redis(run_dir: Path) -> str:
    """Cap Redis's memory at what it uses (every write refused: OOM) for 8 s, then lift it."""
    _wait(lambda: _steps(run_dir), "a first learner step")
    client = _client(run_dir)
    used = int(client.info("memory")["used_memory"])
    refused = int(client.info("errorstats").get("errorstat_OOM", {}).get("count", 0))
    client.config_set("maxmemory", used)
    time.sleep(8.0)
    client.config_set("maxmemory", 0)
    now = int(client.info("errorstats").get("errorstat_OOM", {}).get("count", 0))
    assert now > refused, "no write was refused: the fault did not land"
    return f"maxmemory {used} B for 8 s: {now - refused} writes refused (OOM)"


def test_redis_out_of_memory_is_backpressure_named_on_the_console(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis at its ``maxmemory`` (noeviction) refuses writes: every service waits and
    retries (no crash loop, no restart), the console and the summary name it, nothing is lost
    and the run finishes once memory is available again."""
    monkeypatch.delenv("REDIS_URL", raising=False)
    run_dir = tmp_path / "run"
    summary = _run(_config(tiny_model), run_dir, _fill_redis)
    _report(summary, "redis out of memory 8 s", run_dir)
    _check(summary, run_dir)
    assert summary["restarts"] == {}, summary["deaths"]
    assert any("Redis is out of memory" in w for w in summary["warnings"]), summary["warnings"]
    assert any("Redis is out of memory" in line for line in summary["said"])
    assert max(summary["outage_s"]["redis"].values()) > 0.0, summary["outage_s"]


# ---- state tied to the run (kind 7) ---------------------------------------------------

BAD_GOLDS = ("((", "x=", "\\frac{1}{", "\\sqrt{")


def test_a_jsonl_run_names_unparsable_golds_and_a_resume_on_changed_data_is_refused(
    tiny_model: Path, tmp_path: Path
) -> None:
    """A user's JSONL where some gold answers cannot be parsed: their missing rewards are
    counted under ``gold_unparsable`` in the summary. Rows appended to the file afterwards
    move the held-out split: ``--resume`` refuses (exit 2), naming the held-out set."""
    data = tmp_path / "tasks.jsonl"
    rows = [{"prompt": f"{a}+{a + 3}=", "answer": str(2 * a + 3)} for a in range(40)]
    for i, gold in enumerate(BAD_GOLDS * 2):
        rows[3 * i + 1]["answer"] = gold
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run_dir = tmp_path / "run"
    config = _config_file(tmp_path, tiny_model, **{
        "data.source": "jsonl", "data.dataset.path": str(data), "data.train_size": 0,
        "data.heldout_size": 4, "budget.steps": 4,
    })  # fmt: skip
    first = subprocess.run([*GRPO, str(config), "--run-dir", str(run_dir)], env=_env(),
                           timeout=400, capture_output=True, text=True)  # fmt: skip
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["fault"] = f"{len(BAD_GOLDS) * 2} of 40 gold answers unparsable"
    _report(summary, "jsonl with unparsable golds", run_dir)
    reasons = summary["accounting"]["rewards"]["missing_by_reason"]
    assert reasons.get("gold_unparsable", 0) > 0, reasons
    assert sum(reasons.values()) == summary["rewards_missing"]
    assert "gold unparsable" in " ".join(first.stdout.split())
    with data.open("a") as fh:  # new rows: the last 4 (held out) are others now
        fh.write("".join(json.dumps({"prompt": f"{a}+1=", "answer": str(a + 1)}) + "\n"
                         for a in range(100, 104)))  # fmt: skip
    # the run ended on its budget: a plain --resume reports it (exit 0, nothing started);
    # one that raises the budget gets to the data check, which refuses
    ended = subprocess.run([*GRPO, "--resume", str(run_dir)], env=_env(), timeout=120,
                           capture_output=True, text=True)  # fmt: skip
    said = " ".join((ended.stdout + ended.stderr).split())
    assert ended.returncode == 0 and "already ended (stop reason steps, 4 steps" in said, said
    resumed = subprocess.run([*GRPO, "--resume", str(run_dir), "--steps", "6"], env=_env(),
                             timeout=120, capture_output=True, text=True)  # fmt: skip
    said = " ".join((resumed.stdout + resumed.stderr).split())
    assert resumed.returncode == 2, said
    assert "data changed since the run started" in said and "held-out set moved" in said, said
    assert json.loads((run_dir / "summary.json").read_text()) == {
        k: v for k, v in summary.items() if k != "fault"
    }  # untouched


def test_data_changed_under_a_live_run_is_refused_when_its_driver_restarts(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 40-row JSONL (4 held out) gets 4 rows appended while the run trains, and the driver
    is killed: the restarted driver loads the file again, finds the data differing from what
    the run's first driver recorded, and is refused (twice: a deterministic failure), so the
    run fails with a summary naming it, the old held-out prompts never trained on. Before, the
    restarted driver went on feeding the new training list from the old position (the old
    held-out prompts among them) and evaluated another held-out set, exit 0."""
    monkeypatch.delenv("REDIS_URL", raising=False)
    data = tmp_path / "tasks.jsonl"
    rows = [{"prompt": f"{a}+{a + 3}=", "answer": str(2 * a + 3)} for a in range(40)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run_dir = tmp_path / "run"
    config = _config_with(tiny_model, **{
        "data.source": "jsonl", "data.dataset.path": str(data), "data.train_size": 0,
        "data.heldout_size": 4,
    })  # fmt: skip

    def change(run_dir: Path) -> str:
        _wait(lambda: len(_steps(run_dir)) >= 2, "two learner steps")
        with data.open("a") as fh:  # the last 4 rows (held out) are others now
            fh.write("".join(json.dumps({"prompt": f"{a}+1=", "answer": str(a + 1)}) + "\n"
                             for a in range(100, 104)))  # fmt: skip
        _kill_group(run_dir, "driver")
        return f"4 rows appended after step {_steps(run_dir)[-1]}, driver killed"

    summary = _run(config, run_dir, change, may_fail=True)
    _report(summary, "data changed under a live run, driver restarted", run_dir)
    assert isinstance(summary["error"], ServiceFailedError), summary["error"]
    assert summary["stop_reason"] == "error" and summary["failed_service"] == "driver"
    assert "data changed while it ran" in summary["last_error"], summary["last_error"]
    assert "held-out tasks (4 when the run started" in summary["last_error"]
    trained = {
        json.loads(x)["prompt_id"] for x in (run_dir / "groups.jsonl").read_text().splitlines()
    }
    assert not trained & {f"tasks-{i}" for i in range(37, 41)}, "old held-out prompts trained"
    assert summary["accounting"]["groups"]["identity_gap"] == 0
    assert summary["leftover_processes"] == []
    assert _left_behind(run_dir, _redis_port(run_dir)) == []
