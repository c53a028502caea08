"""The assembler checks its routes at start, as ``grpo run`` checks a run's verifiers
(``RouteCheck``, ``check_routes``): its readiness names an unreachable or misdeclared route
until the routes pass, and is None at once when they do. The chart's assembler gets its
routes from the values, so this is the check a release's assembler makes."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from grpo.services.assembler.service import SERVICE as ASSEMBLER
from grpo.services.assembler.service import RouteCheck
from grpo.services.runtime.routing import RoutingTable
from grpo.services.runtime.server import create_server
from grpo.services.runtime.verifier_client import VerifierClientConfig
from grpo.verifiers.example import SERVICE as EXACT


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def exact() -> Iterator[str]:
    """The example verifier ('exact-match': an outcome verifier of task type exact)."""
    parsed = EXACT.settings_cls.model_validate({"server": {"port": 0, "metrics_port": -1}})
    parts = EXACT.build(parsed)
    server = create_server(parts.bindings, parsed.server)
    server.start()
    yield f"127.0.0.1:{server.port}"
    server.stop(0)
    assert parts.close is not None
    parts.close()


def _assembler(redis_url: str, namespace: str, routing: dict[str, Any]) -> Any:
    settings = ASSEMBLER.settings_cls.model_validate(
        {"redis_url": redis_url, "namespace": namespace, "routing": routing,
         "server": {"port": 0, "metrics_port": -1}}
    )  # fmt: skip
    return ASSEMBLER.build(settings)


def test_the_assembler_is_not_ready_while_a_route_is_unreachable_or_misdeclared(
    redis_url: str, redis_namespace: str, exact: str
) -> None:
    dead = f"127.0.0.1:{_closed_port()}"
    declared = f"{exact} ('exact-match' 0.1.0)"
    cases = [
        ({"exact": {"outcome": [dead]}},
         f"routing.exact.outcome: verifier {dead}: Describe failed (UNAVAILABLE): nothing "
         "answers there"),
        ({"math": {"outcome": [exact]}},
         f"routing.math.outcome: {declared} cannot score task type 'math' as outcome: it "
         "declares (outcome verifier; task types: exact); it does not accept task type 'math'"),
        ({"exact": {"outcome": [exact], "process": [exact]}},
         f"routing.exact.process: {declared} cannot score task type 'exact' as process: it "
         "declares (outcome verifier; task types: exact); it is not a process verifier"),
        ({"exact": {"outcome": [exact], "rewards": [{"name": "format", "weight": 0.2,
                                                     "addresses": [dead]}]}},
         f"routing.exact.rewards.format: verifier {dead}: Describe failed"),
    ]  # fmt: skip
    for routing, reason in cases:
        parts = _assembler(redis_url, redis_namespace, routing)
        try:
            assert parts.readiness is not None
            said = parts.readiness()
            assert said is not None and said.startswith(f"verifier routes: {reason}"), said
            assert "\n" not in said
        finally:
            parts.close()
    parts = _assembler(redis_url, redis_namespace, {"exact": {"outcome": [exact]}})
    try:
        assert parts.readiness() is None  # checked before the server starts: ready at once
    finally:
        parts.close()


def test_a_failed_check_is_tried_again_and_a_changed_table_checked(exact: str) -> None:
    dead = f"127.0.0.1:{_closed_port()}"
    table = RoutingTable.from_config({"exact": {"outcome": [dead]}})
    check = RouteCheck(table, VerifierClientConfig(), recheck_s=0.05)
    assert check.check_now() is not None and "Describe failed" in (check.reason() or "")
    check.start()
    try:
        table.replace(RoutingTable.from_config({"exact": {"outcome": [exact]}}))
        assert table.wait_for_version(1, 1.0)
        for _ in range(100):  # the loop tries again: passes once the table is right
            if check.reason() is None:
                break
            check._stop.wait(0.05)
        assert check.reason() is None
        # a discovered route to a misdeclared verifier makes it unready again
        table.replace(RoutingTable.from_config({"math": {"outcome": [exact]}}))
        for _ in range(100):
            if check.reason() is not None:
                break
            check._stop.wait(0.05)
        assert "does not accept task type 'math'" in (check.reason() or "")
    finally:
        check.stop(1.0)


def test_a_relist_that_changes_nothing_is_not_checked_again() -> None:
    """Discovery bumps the table's version at every relist: only changed routes are checked
    (a verifier briefly down at a relist must not make a ready assembler unready)."""
    calls: list[dict[str, Any]] = []

    def check(routes: dict[str, Any], client: Any, *, timeout_s: float) -> dict[str, Any]:
        calls.append(routes)
        return {}

    table = RoutingTable.from_config({"exact": {"outcome": ["127.0.0.1:7"]}})
    route_check = RouteCheck(table, VerifierClientConfig(), recheck_s=0.02, check=check)
    assert route_check.check_now() is None and len(calls) == 1
    route_check.start()
    try:
        table.replace(RoutingTable.from_config({"exact": {"outcome": ["127.0.0.1:7"]}}))
        route_check._stop.wait(0.2)
        assert len(calls) == 1  # same routes, a new version: not checked
        table.replace(RoutingTable.from_config({"exact": {"outcome": ["127.0.0.1:8"]}}))
        for _ in range(100):
            if len(calls) == 2:
                break
            route_check._stop.wait(0.02)
        assert len(calls) == 2 and route_check.reason() is None
    finally:
        route_check.stop(1.0)
