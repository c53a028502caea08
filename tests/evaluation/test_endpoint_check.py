"""Every command given an address checks it before any work, the same way
(``grpo.services.runtime.channels.describe_endpoint``): nothing listening there is one plain
line naming the address and what was tried (``Describe``), exit 2, within seconds, with
nothing written. ``grpo run``'s own check is tests/local/test_verifier_routes.py."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _grpo(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """``grpo ARGS`` as a user runs it (the console script's ``main``), and its seconds."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "80"}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", "from grpo.cli import main; main()", *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return done, time.monotonic() - started


@pytest.mark.parametrize(
    ("command", "what"),
    [
        ("score", "verifier"),
        ("check-verifier", "verifier"),
        ("eval-verifier", "verifier"),
        ("eval-generation", "generation service"),
    ],
)
def test_an_unreachable_address_is_one_line_exit_2_within_seconds(
    tmp_path: Path, command: str, what: str
) -> None:
    address = f"127.0.0.1:{_closed_port()}"
    src = tmp_path / "in.jsonl"
    src.write_text('{"id": "a", "response": "\\\\boxed{4}", "gold": "4"}\n')
    out = tmp_path / "out"
    args = {
        "score": ["score", "math", "-i", str(src), "-o", str(out), "--endpoint", address],
        "check-verifier": ["check-verifier", "--address", address, "--task-type", "math",
                           "--response", "4"],
        "eval-verifier": ["eval", "--model", str(tmp_path / "no-model"), "--dataset", "arith",
                          "--limit", "2", "--verifier-endpoint", address, "-o", str(out),
                          "--chat-template", "none"],
        "eval-generation": ["eval", "--generation", address, "--dataset", "arith", "--limit",
                            "2", "-o", str(out)],
    }[command]  # fmt: skip
    done, seconds = _grpo(*args)
    said = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert done.returncode == 2, said
    assert said == [
        f"error: {what} {address}: Describe failed (UNAVAILABLE): nothing answers there (is "
        f"the {what} running, and is the address right?)"
    ]
    # imports included (grpo eval imports torch: seconds on a loaded machine); the retried
    # Describe of grpo score took 8.2-8.8 s, grpo eval loaded the model first (16-22 s)
    assert seconds < (15.0 if command.startswith("eval") else 6.0), seconds
    assert not out.exists()  # nothing written


def test_a_verifier_of_another_task_type_is_refused_like_an_unreachable_one(
    tmp_path: Path,
) -> None:
    """The check's other refusal (an answer that cannot do the work) takes the same path."""
    from typer.testing import CliRunner

    from grpo.cli import app
    from grpo.services.runtime.server import create_server
    from grpo.verifiers.example import SERVICE

    parsed = SERVICE.settings_cls.model_validate({"server": {"port": 0, "metrics_port": -1}})
    parts = SERVICE.build(parsed)
    server = create_server(parts.bindings, parsed.server)
    server.start()
    try:
        address = f"127.0.0.1:{server.port}"
        result = CliRunner().invoke(
            app, ["check-verifier", "--address", address, "--task-type", "math", "--response", "4"]
        )
    finally:
        server.stop(0)
        parts.close()
    said = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2, said
    assert len(said) == 1 and said[0].startswith(f"error: the verifier at {address} is 'exact")
    assert "does not accept task type 'math'" in said[0]


def test_grpo_run_and_eval_run_config_check_their_addresses_the_same_way(tmp_path: Path) -> None:
    """A run config's verifier endpoint (``grpo eval --run-config`` runs grpo run's own check)
    and the Redis a run names (``redis_url``; PING, the password masked) take the same path."""
    import yaml

    dead = f"127.0.0.1:{_closed_port()}"
    config = yaml.safe_load((REPO / "configs" / "e2e-tiny.yaml").read_text())
    config["verifiers"]["outcome"] = dead
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    out = tmp_path / "out"
    done, seconds = _grpo("eval", "--run-config", str(path), "--model", str(tmp_path), "-o",
                          str(out))  # fmt: skip
    said = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert done.returncode == 2, said
    assert said == [
        f"error: verifiers.outcome: verifier {dead}: Describe failed (UNAVAILABLE): nothing "
        "answers there (is the verifier running, and is the address right?)"
    ]
    assert seconds < 15.0 and not out.exists()  # torch's import included
    redis = f"127.0.0.1:{_closed_port()}"
    done, seconds = _grpo("run", str(REPO / "configs" / "e2e-tiny.yaml"), "--run-dir", str(out),
                          "--set", f"redis_url=redis://:s3cret@{redis}/0")  # fmt: skip
    said = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert done.returncode == 2, said
    assert said == [
        f"error: Redis redis://:***@{redis}/0: PING failed (ConnectionError): nothing answers "
        "there (is Redis running, and is the URL right?)"
    ]  # was: SFT, then 'run failed' (exit 1) after ~12 s with a folder left
    assert seconds < 6.0 and not out.exists()
