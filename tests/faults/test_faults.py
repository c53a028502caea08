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

``make faults`` runs this file (a few minutes on 2 cores; CI runs it after ``make test``).
"""

from __future__ import annotations

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

from grpo.local.run import run_local
from grpo.services.runtime.streams import StreamNames
from grpo.services.settings.run import RunConfig, load_run_config

pytestmark = [pytest.mark.slow, pytest.mark.faults]

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


def _run(config: RunConfig, run_dir: Path, inject: Callable[[Path], str]) -> dict[str, Any]:
    """``run_local`` in a thread, ``inject(run_dir)`` here; returns the summary plus the fault."""
    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["summary"] = run_local(config, run_dir, log_fn=print)
        except BaseException as exc:  # re-raised below
            result["error"] = exc

    thread = threading.Thread(target=target, name="grpo-run")
    thread.start()
    try:
        result["fault"] = inject(run_dir)
    finally:
        thread.join(400)
    assert not thread.is_alive(), "the run did not finish"
    if "error" in result:
        raise result["error"]
    return {**result["summary"].as_dict(), "fault": result["fault"]}


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
    _wait(lambda: _steps(run_dir), "a first learner step")
    client = _client(run_dir)
    rollouts = _pending_for(run_dir, "rollouts", "assembler")
    prompts = _pending_for(run_dir, "prompts", "rollout-workers")
    evidence = _wait(lambda: rollouts(client) or prompts(client), "pending work in Redis")
    pid = _pid_of(run_dir, "redis")
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    return f"redis pid {pid} killed with {evidence}"


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


def test_grpo_run_sigkill_then_resume(tiny_model: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    run_dir = tmp_path / "run"
    config = tmp_path / "run.yaml"
    base = yaml.safe_load((REPO / "configs" / "e2e-tiny.yaml").read_text())
    for dotted, value in _overrides(tiny_model).items():
        node = base
        *parents, leaf = dotted.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    config.write_text(yaml.safe_dump(base))
    cmd = [sys.executable, "-m", "grpo.cli", "run"]
    first = subprocess.Popen([*cmd, str(config), "--run-dir", str(run_dir)], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        _wait(lambda: _steps(run_dir) and _steps(run_dir)[-1] > _checkpoint_step(run_dir) >= 2,
              "a step after the first checkpoint")  # fmt: skip
        first.send_signal(signal.SIGKILL)  # no shutdown at all
        first.wait(30)
        port = _redis_port(run_dir)
        _wait(
            lambda: not _left_behind(run_dir, port),
            "every service and the embedded Redis to die with grpo run",
            timeout_s=30,
        )
        assert not (run_dir / "summary.json").exists()
        second = subprocess.run([*cmd, "--resume", str(run_dir)], env=env, timeout=400,
                                capture_output=True, text=True)  # fmt: skip
        assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    finally:
        if first.poll() is None:
            first.kill()
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["fault"] = "grpo run SIGKILLed after a step past its checkpoint"
    _report(summary, "grpo run SIGKILL then --resume", run_dir)
    _check(summary, run_dir)
    assert summary["resumed"] is True
