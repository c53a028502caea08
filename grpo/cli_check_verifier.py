"""``grpo check-verifier``: score one item on a running verifier and say whether it answered
with a verdict (and the reward expected): the Helm chart's ``helm test`` runs it once per
verifier of the release (docs/kubernetes.md, "Test a release")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

__all__ = ["check_verifier"]

_OPTION_OF_FIELD = {
    "task.gold_answer": "--gold",
    "task.prompt": "--prompt",
    "task.code_tests": "--test-code and --entry-point",
    "task.type": "--task-type",
}
"""The option that sets each ``Task`` field a verifier may name when it refuses an item."""


def _hint(text: str) -> str:
    """``; give --gold`` when ``text`` (a verifier's INVALID_ARGUMENT detail) names a task
    field that an option sets, else ``""``."""
    for field_name, option in _OPTION_OF_FIELD.items():
        if f"{field_name} is required" in text:
            return f"; give {option}"
    return ""


def check_verifier(
    address: Annotated[str, typer.Option(help="host:port (or dns:///host:port) of the verifier.")],
    task_type: Annotated[str, typer.Option(help="Task type of the item, e.g. math.")],
    response: Annotated[str, typer.Option(help="The response to score.")],
    prompt: Annotated[str, typer.Option(help="The task's prompt.")] = "",
    gold: Annotated[str, typer.Option(help="The gold answer (outcome math tasks).")] = "",
    test_code: Annotated[
        str, typer.Option(help="HumanEval-style check(candidate) source (code tasks).")
    ] = "",
    entry_point: Annotated[str, typer.Option(help="Function under test (code tasks).")] = "",
    expect_reward: Annotated[
        float | None,
        typer.Option(help="Fail unless the reward equals this (within 1e-6); unset: any verdict."),
    ] = None,
    timeout_s: Annotated[float, typer.Option(help="Deadline of the call (seconds).")] = 60.0,
    tls_ca: Annotated[Path | None, typer.Option(help="PEM CA of the verifier's TLS.")] = None,
    tls_cert: Annotated[Path | None, typer.Option(help="PEM client certificate (mTLS).")] = None,
    tls_key: Annotated[Path | None, typer.Option(help="PEM key of --tls-cert.")] = None,
    tls_server_name: Annotated[
        str, typer.Option(help="Name the verifier's certificate carries ('' = the host).")
    ] = "",
) -> None:
    """Score one item with the verifier's ScoreBatch RPC and print the score as one JSON
    line: address, then the keys of a grpo score output line (status, reward, extracted,
    detail, latency_s, verifier, steps or tests); reward is always there, null when the
    status is no verdict.

    First the verifier's Describe (bounded, as every command checks an address before any
    work): no answer, or a verifier that does not accept --task-type, prints one line naming
    the address and exits 2. A verifier that refuses the item (INVALID_ARGUMENT: a missing
    --gold, --test-code, ...) is a usage error too: one line, exit 2. Then exit 0 when the
    status is a verdict (ok, no_answer, parse_error, timeout, runtime_error) and, with
    --expect-reward, the reward matches; 1 otherwise (undecided, internal, a wrong reward, or
    the ScoreBatch call failed: the reason is printed).
    """
    import grpc

    from grpo.cli_console import fail
    from grpo.errors import EndpointCheckError
    from grpo.services.evaluation.scorers import check_verifier as check_serves
    from grpo.services.evaluation.scoring import score_fields
    from grpo.services.runtime.channels import CHECK_TIMEOUT_S, describe_endpoint
    from grpo.services.runtime.routing import validate_address
    from grpo.services.runtime.rpc_retry import rpc_status
    from grpo.services.runtime.score_status import is_verdict
    from grpo.services.runtime.verifier_client import VerifierClientConfig, verifier_channel
    from grpo.v1 import common_pb2, verifier_pb2, verifier_pb2_grpc

    config = VerifierClientConfig.model_validate(
        {
            k: v
            for k, v in {
                "tls_ca_file": tls_ca,
                "tls_cert_file": tls_cert,
                "tls_key_file": tls_key,
            }.items()
            if v is not None
        }
    )
    options = [("grpc.ssl_target_name_override", tls_server_name)] if tls_server_name else []
    task = common_pb2.Task(id="helm-test", type=task_type, prompt=prompt, gold_answer=gold)
    if test_code:
        task.code_tests.test_code = test_code
        task.code_tests.entry_point = entry_point
    request = verifier_pb2.ScoreBatchRequest(
        items=[verifier_pb2.ScoreRequest(task=task, response=response)]
    )
    validate_address(address)
    channel = verifier_channel(address, config, options)
    stub = verifier_pb2_grpc.VerifierStub(channel)
    try:
        info = describe_endpoint(
            "verifier", address,
            lambda t: stub.Describe(verifier_pb2.VerifierDescribeRequest(), timeout=t),
            timeout_s=min(timeout_s, CHECK_TIMEOUT_S), service="grpo.v1.Verifier",
        )  # fmt: skip
        check_serves(info, task_type=task_type, kind=None, where=address)
        reply = stub.ScoreBatch(request, timeout=timeout_s)
    except EndpointCheckError as exc:
        fail(str(exc))
    except grpc.RpcError as exc:
        code, text = rpc_status(exc)
        if code == grpc.StatusCode.INVALID_ARGUMENT:  # the item this command line gave
            fail(f"verifier {address} refused the item (INVALID_ARGUMENT): {text}{_hint(text)}")
        fail(f"verifier {address}: ScoreBatch failed ({code.name}): {text}", 1)
    finally:
        channel.close()
    (score,) = reply.scores
    # grpo score's row keys, from the one function that builds them (reward always there)
    printed = {"address": address, **score_fields(score)}
    typer.echo(json.dumps(printed, sort_keys=True))
    if not is_verdict(score):
        name = common_pb2.ScoreStatus.Name(score.status)
        typer.echo(f"{address}: no verdict ({name}): {score.detail}", err=True)
        raise typer.Exit(1)
    if expect_reward is not None and abs(score.reward - expect_reward) > 1e-6:
        typer.echo(f"{address}: reward {score.reward} where {expect_reward} was expected", err=True)
        raise typer.Exit(1)
