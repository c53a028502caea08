"""A verifier written in Node.js trains a ``grpo run`` and scores its held-out evaluation
(issue 29), following docs/add-a-verifier.md: ``make node-verifier`` installs its packages
(npm), ``node server.js --port 0`` serves ``grpo.v1.Verifier`` from the repository's protos
(no health service), and ``grpo run configs/e2e-tiny.yaml --set verifiers.outcome=HOST:PORT``
(the shortest form) trains two steps of the tiny model against it (SFT off: what is checked
is the path of the calls, not what the model learns).

Checked: the run ends by its step budget; each of its calls arrived (the Node verifier's own
log of the items it scored = the items the assembler sent, from summary.json's
``verifier_endpoints``, + one per held-out sample of the two evaluations); the assembler's
calls all answered OK; the held-out evaluations were scored by it (its name on every sample).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import wait_until

REPO = Path(__file__).resolve().parents[2]
NODE_DIR = REPO / "examples" / "verifier-node"
HELDOUT = 8


@pytest.fixture(scope="module")
def node_verifier(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """(address, log file) of the example Node.js verifier, installed with make node-verifier."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("Node.js (node and npm) is not installed")
    if not (NODE_DIR / "node_modules" / "@grpc" / "grpc-js").is_dir():
        subprocess.run(["make", "node-verifier"], cwd=REPO, check=True, timeout=600)
    log = tmp_path_factory.mktemp("node") / "verifier.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            ["node", "server.js", "--port", "0"], cwd=NODE_DIR, stdout=out, stderr=subprocess.STDOUT
        )
    try:

        def listening() -> str | None:
            assert proc.poll() is None, log.read_text()
            lines = log.read_text().splitlines()
            return json.loads(lines[0])["listening"] if lines else None

        address = wait_until(listening, timeout_s=60, what="the Node.js verifier to listen")
        yield str(address), log
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _calls(log: Path) -> list[dict[str, object]]:
    return [json.loads(x) for x in log.read_text().splitlines()[1:] if x.startswith("{")]


def test_a_node_verifier_trains_a_run_and_scores_its_heldout_evaluation(
    tmp_path: Path, node_verifier: tuple[str, Path]
) -> None:
    address, log = node_verifier
    run_dir = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}  # embedded Redis
    env.update(OMP_NUM_THREADS="1", COLUMNS="200")
    cmd = [
        sys.executable, "-m", "grpo.cli", "run", str(REPO / "configs" / "e2e-tiny.yaml"),
        "--run-dir", str(run_dir), "--steps", "2",
        "--set", f"verifiers.outcome={address}",
        "--set", f"data.heldout_size={HELDOUT}", "--set", "model.sft.enabled=false",
    ]  # fmt: skip
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"] == "steps" and summary["steps"] >= 2, summary
    endpoint = summary["verifier_endpoints"][address]
    assert endpoint["failed_calls"] == 0 and endpoint["calls"] >= 1, endpoint
    assert sum(endpoint["statuses"].values()) == endpoint["items"] >= summary["rollouts"]
    samples = [
        json.loads(line)
        for label in ("sft", "final")
        for line in (run_dir / "eval" / label / "samples.jsonl").read_text().splitlines()
    ]
    assert len(samples) == 2 * HELDOUT
    assert {s["verifier"] for s in samples} == {"node-last-integer"}
    calls = _calls(log)
    scored = sum(int(c["items"]) for c in calls if c["rpc"] in ("Score", "ScoreBatch"))
    assert scored == endpoint["items"] + len(samples)  # every call arrived, nothing else
    assert any(c["rpc"] == "Describe" for c in calls)  # checked before any work
    assert f"verifier {address}: " in done.stdout  # the run's closing lines name it
