"""Verifiers by address in the run config, checked before any work (issue 29).

The three forms of a verifier (built-in name, ``module:SERVICE``, endpoint) in the ``verifiers``
section, load-time validation of every key (``extra`` blocks included) with the valid names in
the message, the plan the local cluster and the held-out evaluation use, and the pre-run check:
each endpoint's ``Describe`` on a real gRPC server, each service's declared task types. Then
``grpo run`` itself, as a user starts it: an unreachable endpoint, a route to a verifier that
does not declare the task type and a typo in a block each end the command with exit code 2 and
one line, before the run dir is written or a model set up.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest

from grpo.errors import FailedPreconditionError, InvalidArgumentError
from grpo.local.cluster import local_placement
from grpo.services.settings.run import RunConfig, load_run_config
from grpo.services.settings.services import resolve_run, service_settings, write_service_config
from grpo.services.settings.verifiers import check_verifier_plan, plan_verifiers
from grpo.v1 import verifier_pb2, verifier_pb2_grpc

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "e2e-tiny.yaml"


class _Declares(verifier_pb2_grpc.VerifierServicer):
    """Answers Describe only: a verifier of ``task_types`` and ``kind`` (another language's)."""

    def __init__(self, task_types: list[str], kind: int) -> None:
        self.task_types, self.kind = task_types, kind

    def Describe(self, request: Any, context: Any) -> verifier_pb2.VerifierDescribeResponse:
        return verifier_pb2.VerifierDescribeResponse(
            name="declared", version="2.0", task_types=self.task_types, kind=self.kind
        )


def _serve(task_types: list[str], kind: int = verifier_pb2.VERIFIER_KIND_OUTCOME) -> Any:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    verifier_pb2_grpc.add_VerifierServicer_to_server(_Declares(task_types, kind), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, f"127.0.0.1:{port}"


@pytest.fixture
def endpoints() -> Iterator[dict[str, str]]:
    """arith (outcome), exact-only (outcome), arith (process) verifiers on loopback."""
    made = {
        "arith": _serve(["arith"]),
        "exact": _serve(["exact"]),
        "steps": _serve(["arith"], verifier_pb2.VERIFIER_KIND_PROCESS),
        "any": _serve([]),
    }
    yield {name: address for name, (_, address) in made.items()}
    for server, _ in made.values():
        server.stop(0)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config(overrides: dict[str, Any]) -> RunConfig:
    return load_run_config(TINY, overrides, environ={})


def test_the_shortest_form_is_an_endpoint_routed_with_the_runs_process_verifier(
    endpoints: dict[str, str],
) -> None:
    cfg = _config({"verifiers.outcome": endpoints["arith"]})
    plan = plan_verifiers(cfg.verifiers, ["arith"])
    assert sorted(plan.services()) == ["verifier-steps"]  # the endpoint is not started
    answers = check_verifier_plan(plan)
    assert answers[endpoints["arith"]].name == "declared"
    routing = plan.routing(lambda service: f"127.0.0.1:{len(service)}")
    assert routing == {
        "arith": {
            "outcome": [endpoints["arith"]],
            "name": endpoints["arith"],
            "weight": 1.0,
            "process": ["127.0.0.1:14"],
        }
    }
    assert plan.primary("arith").address == endpoints["arith"]
    # What grpo run writes to config.yaml reads back as the same config (the short form).
    dumped = cfg.model_dump(mode="json")
    assert dumped["verifiers"]["outcome"] == endpoints["arith"]
    assert RunConfig.model_validate(dumped) == cfg


def test_weighted_rewards_and_per_task_routes_reach_the_assemblers_settings(
    endpoints: dict[str, str], tmp_path: Path
) -> None:
    cfg = _config(
        {
            "verifiers.process": None,
            "verifiers.routes": {
                "arith": {
                    "outcome": [
                        {"verifier": "verifier-math", "name": "correct"},
                        {"verifier": "verifier-format", "name": "format", "weight": 0.2},
                        {
                            "verifier": endpoints["any"],
                            "name": "length",
                            "weight": -0.1,
                            "tls": {"enabled": False},
                        },
                    ],
                    "process": endpoints["steps"],
                }
            },
        }
    )
    plan = plan_verifiers(cfg.verifiers, ["arith"])
    check_verifier_plan(plan)
    assert sorted(plan.services()) == ["verifier-format", "verifier-math"]
    placement = local_placement(
        "assembler",
        run_dir=tmp_path,
        model=tmp_path / "model",
        addresses={},
        routing=plan.routing(
            lambda service: {"verifier-math": "127.0.0.1:1"}.get(service, "127.0.0.1:2")
        ),
        endpoint_tls={a: t.model_dump(mode="json") for a, t in plan.endpoint_tls().items()},
    )
    run = resolve_run(cfg, namespace="t", redis_url="redis://127.0.0.1:1")
    settings = service_settings(run, "assembler", placement)
    route = settings["routing"]["arith"]
    assert route["name"] == "correct" and route["process"] == [endpoints["steps"]]
    assert [(r["name"], r["weight"]) for r in route["rewards"]] == [
        ("format", 0.2),
        ("length", -0.1),
    ]
    assert settings["assembler"]["verifier"]["endpoint_tls"][endpoints["any"]]["enabled"] is False
    write_service_config("assembler", settings, tmp_path / "assembler.yaml")  # validates


def test_an_unreachable_endpoint_is_refused_naming_its_config_path() -> None:
    address = f"127.0.0.1:{_closed_port()}"
    plan = plan_verifiers(_config({"verifiers.outcome": address}).verifiers, ["arith"])
    with pytest.raises(FailedPreconditionError) as info:
        check_verifier_plan(plan)
    assert str(info.value).startswith(f"verifiers.outcome: verifier {address}: Describe failed")
    assert "UNAVAILABLE" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"verifiers.outcome": "EXACT"},
         r"verifiers.outcome: .* \('declared' 2.0\) cannot score task type 'arith' as outcome: "
         r"it declares \(outcome verifier; task types: exact\)"),
        ({"verifiers.outcome": "grpo.verifiers.example:SERVICE"},
         r"grpo.verifiers.example:SERVICE cannot score task type 'arith' as outcome: it "
         r"declares \(outcome verifier; task types: exact\)"),
        ({"verifiers.outcome": "verifier-steps", "verifiers.process": None,
          "verifiers.extra": {}},
         r"verifier-steps cannot score task type 'arith' as outcome: .* it is not an outcome"),
        ({"verifiers.process": "STEPS_AS_OUTCOME"}, r"verifiers.process: .* not a process"),
    ],
)  # fmt: skip
def test_a_route_the_verifier_does_not_declare_is_refused(
    endpoints: dict[str, str], overrides: dict[str, Any], message: str
) -> None:
    swap = {"EXACT": endpoints["exact"], "STEPS_AS_OUTCOME": endpoints["arith"]}
    overrides = {k: swap.get(v, v) if isinstance(v, str) else v for k, v in overrides.items()}
    plan = plan_verifiers(_config(overrides).verifiers, ["arith"])
    with pytest.raises(FailedPreconditionError, match=message):
        check_verifier_plan(plan)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"verifiers.extra.verifier-mth": {}},
         r"verifiers.extra.verifier-mth: 'verifier-mth' names no verifier; extra takes a "
         r"built-in verifier \(verifier-code, verifier-format, verifier-length, verifier-math"),
        ({"verifiers.extra.verifier-math.verifier.pool.worker": 1},
         r"verifiers.extra.verifier-math.verifier.pool.worker: unknown key 'worker' \(valid: "
         r"workers, timeout_s, memory_mb"),
        ({"verifiers.extra.verifier-math.scoring.concurrency": "many"},
         r"verifiers.extra.verifier-math.scoring.concurrency: Input should be a valid integer"),
        ({"verifiers.routes": {"arith": {"outcom": "verifier-math"}}},
         r"verifiers.routes.arith.outcom: unknown key 'outcom' \(valid: outcome, process\)"),
        ({"verifiers.outcome": [{"verifier": "verifier-math", "wieght": 2}]},
         r"verifiers.outcome.0.wieght: unknown key 'wieght' \(valid: verifier, name, tls, "
         r"weight\)"),
        ({"verifiers.outcome": "verifer-math"},
         r"verifiers.outcome\[0\]: 'verifer-math' is neither a built-in verifier"),
        ({"verifiers.outcome": ["verifier-math", "verifier-math"]},
         r"two rewards named 'verifier-math'; give each its own name"),
        ({"verifiers.outcome": "verifier-math", "verifiers.process": "127.0.0.1:1",
          "verifiers.extra": {"127.0.0.1:1": {}}}, r"'127.0.0.1:1' is an endpoint"),
        ({"verifiers.outcome": {"verifier": "verifier-math", "tls": {}}},
         r"tls applies to an endpoint"),
        ({"generation.extra.worker.prompts_per_cal": 2},
         r"generation.extra.worker.prompts_per_cal: unknown key 'prompts_per_cal' \(valid: "),
        ({"learner.extra.trainr": {}}, r"learner.extra.trainr: unknown key 'trainr'"),
        ({"assembler_extra.routng": {}}, r"assembler_extra.routng: unknown key 'routng'"),
        ({"assembler.verifier.endpoint_tls": {"a:1": {"ca_fil": "x"}}},
         r"assembler.verifier.endpoint_tls.a:1.ca_fil: unknown key 'ca_fil' \(valid: enabled, "
         r"ca_file"),
    ],
)  # fmt: skip
def test_a_typo_in_any_block_is_refused_at_load_with_the_valid_names(
    overrides: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        _config(overrides)


def test_a_route_for_a_task_type_the_run_does_not_have_is_refused() -> None:
    cfg = _config({"verifiers.routes": {"arith": {"outcome": "verifier-math"},
                                        "aritm": {"outcome": "verifier-math"}}})  # fmt: skip
    with pytest.raises(InvalidArgumentError, match=r"verifiers.routes.aritm: the run has no task "
                       r"of type 'aritm'; its task types: arith"):  # fmt: skip
        plan_verifiers(cfg.verifiers, ["arith"])


def _grpo_run(tmp_path: Path, *sets: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env.update(OMP_NUM_THREADS="1", COLUMNS="400")
    cmd = [sys.executable, "-m", "grpo.cli", "run", str(TINY), "--run-dir", str(tmp_path / "run")]
    for item in sets:
        cmd += ["--set", item]
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("sets", "line"),
    [
        ((f"verifiers.outcome=127.0.0.1:{_closed_port()}",),
         "error: verifiers.outcome: verifier 127.0.0.1:"),
        (("verifiers.outcome=grpo.verifiers.example:SERVICE",),
         "error: verifiers.outcome: grpo.verifiers.example:SERVICE cannot score task type "
         "'arith' as outcome: it declares (outcome verifier; task types: exact)"),
        (("verifiers.extra.verifier-steps.verifier.pool.workrs=1",),
         "verifiers.extra.verifier-steps.verifier.pool.workrs: unknown key 'workrs' (valid: "
         "workers"),
    ],
)  # fmt: skip
def test_grpo_run_refuses_before_any_work_with_one_line(
    tmp_path: Path, sets: tuple[str, ...], line: str
) -> None:
    done = _grpo_run(tmp_path, *sets)
    lines = [x for x in (done.stdout + done.stderr).splitlines() if x.strip()]
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(lines) == 1 and line in lines[0], lines
    assert not (tmp_path / "run").exists()  # no run dir, no model, no SFT


def _doc_blocks() -> list[dict[str, Any]]:
    import re

    import yaml

    text = (REPO / "docs" / "add-a-verifier.md").read_text()
    return [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", text, re.S)]


def test_the_docs_examples_use_only_documented_keys() -> None:
    """Every YAML example of docs/add-a-verifier.md loads into what it configures: a run
    config's ``verifiers`` section, an assembler's settings, or the chart's values."""
    from grpo.services.assembler.service import AssemblerSettings

    blocks = _doc_blocks()
    kinds = []
    for block in blocks:
        if "routing" in block:
            AssemblerSettings.model_validate(block)
            kinds.append("assembler")
        elif any("taskTypes" in v for v in block["verifiers"].values() if isinstance(v, dict)):
            kinds.append("chart")  # validated by tests/helm (docs/kubernetes.md carries it too)
        else:
            cfg = _config({"verifiers": block["verifiers"]})
            assert cfg.verifiers.outcome
            kinds.append("run")
    assert kinds.count("run") >= 3 and "assembler" in kinds and "chart" in kinds
