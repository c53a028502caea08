"""RoutingTable: config parsing, lookup errors, atomic replace under concurrency, merging."""

from __future__ import annotations

import threading

import pytest

from grpo.errors import InvalidArgumentError, NotFoundError
from grpo.services.runtime.routing import (
    Route,
    RouteConfig,
    RoutingTable,
    merge_routes,
    validate_address,
)


def test_from_config_accepts_every_documented_form() -> None:
    table = RoutingTable.from_config(
        {
            "math": {"outcome": ["verifier-math:50051"], "process": ["verifier-steps:50051"]},
            "code": "verifier-code:50051",
            "arith": ["a:1", "b:2", "a:1"],
            "gsm8k": RouteConfig(outcome=["dns:///verifier-math.grpo.svc:50051"]),
            "humaneval": Route(outcome=("unix:/tmp/code.sock",)),
        }
    )
    assert table.lookup("math") == Route(
        outcome=("verifier-math:50051",), process=("verifier-steps:50051",)
    )
    assert table.lookup("code").outcome == ("verifier-code:50051",)
    assert table.lookup("code").process == ()
    assert table.lookup("arith").outcome == ("a:1", "b:2")  # duplicates dropped, order kept
    assert table.lookup("gsm8k").outcome == ("dns:///verifier-math.grpo.svc:50051",)
    assert table.task_types() == ("arith", "code", "gsm8k", "humaneval", "math")
    assert table.version == 0
    assert table.to_config()["math"] == {
        "outcome": ["verifier-math:50051"],
        "process": ["verifier-steps:50051"],
    }


def test_lookup_unknown_type_lists_known_types() -> None:
    table = RoutingTable.from_config({"math": "m:1", "code": "c:2"})
    with pytest.raises(NotFoundError, match=r"'poetry'.*known task types: code, math"):
        table.lookup("poetry")
    with pytest.raises(NotFoundError, match=r"\(none configured\)"):
        RoutingTable().lookup("math")


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        ({"math": "verifier-math"}, r"routing\['math'\].*not 'host:port'"),
        ({"math": "host:70000"}, r"port 70000 not in 1\.\.65535"),
        ({"math": "bad host:1"}, "whitespace"),
        ({"math": {}}, r"routing\['math'\].*at least one outcome or process"),
        ({"math": {"outcomes": ["a:1"]}}, r"unknown key\(s\) \['outcomes'\]"),
        ({"ma th": "a:1"}, r"task type 'ma th' is invalid"),
        ({"math": 3}, r"routing\['math'\]: expected an address"),
    ],
)
def test_bad_config_names_what_is_wrong(mapping: dict, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        RoutingTable.from_config(mapping)


def test_route_config_model_rejects_bad_addresses_and_extra_keys() -> None:
    with pytest.raises(ValueError, match="not 'host:port'"):
        RouteConfig(outcome=["nohost"])
    with pytest.raises(ValueError, match="Extra inputs"):
        RouteConfig.model_validate({"outcome": ["a:1"], "weights": 2})
    assert validate_address("[::1]:50051") == "[::1]:50051"


def test_replace_bumps_version_and_wakes_waiters() -> None:
    table = RoutingTable.from_config({"math": "old:1"})
    woke: list[bool] = []
    waiter = threading.Thread(target=lambda: woke.append(table.wait_for_version(1, 10.0)))
    waiter.start()
    assert table.replace({"math": Route(outcome=("new:1",))}) == 1
    waiter.join(10.0)
    assert woke == [True]
    assert table.lookup("math").outcome == ("new:1",)
    assert table.replace(RoutingTable.from_config({"code": "c:1"})) == 2
    with pytest.raises(NotFoundError):
        table.lookup("math")
    assert table.wait_for_version(3, 0.01) is False
    with pytest.raises(InvalidArgumentError, match="must be a Route"):
        table.replace({"math": "x:1"})  # type: ignore[dict-item]
    assert table.version == 2  # a rejected replacement leaves the table unchanged


def test_readers_never_see_a_mixed_table() -> None:
    """Each replacement routes both task types to the same generation; readers check that."""
    table = RoutingTable.from_config({"math": "g0:1", "code": "g0:1"})
    stop = threading.Event()
    mixed: list[tuple[str, str]] = []

    def read() -> None:
        while not stop.is_set():
            snap = table.snapshot()
            if snap["math"].outcome != snap["code"].outcome:
                mixed.append((snap["math"].outcome[0], snap["code"].outcome[0]))

    readers = [threading.Thread(target=read) for _ in range(3)]
    for reader in readers:
        reader.start()
    for gen in range(1, 2001):
        addr = (f"g{gen}:1",)
        table.replace({"math": Route(outcome=addr), "code": Route(outcome=addr)})
    stop.set()
    for reader in readers:
        reader.join()
    assert mixed == []
    assert table.version == 2000
    assert table.lookup("math").outcome == ("g2000:1",)


def test_merge_routes_overlays_per_kind() -> None:
    static = {
        "math": Route(outcome=("static-math:1",), process=("static-steps:1",)),
        "code": Route(outcome=("static-code:1",)),
    }
    discovered = {
        "math": Route(outcome=("found-math:1",)),  # process kind not discovered: keep static
        "poetry": Route(outcome=("found-poetry:1",)),
    }
    merged = merge_routes(static, discovered)
    assert merged["math"] == Route(outcome=("found-math:1",), process=("static-steps:1",))
    assert merged["code"] == static["code"]
    assert merged["poetry"] == discovered["poetry"]
    assert static["math"].outcome == ("static-math:1",)  # inputs untouched
    assert Route(outcome=("a:1",), process=("a:1", "b:1")).addresses == ("a:1", "b:1")
