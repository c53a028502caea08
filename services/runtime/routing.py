"""The routing table: task type -> the gRPC addresses of its outcome and process verifiers.

The assembler asks the table where to score a rollout (``lookup(task.task_type)``). The table
is filled from configuration (``RoutingTable.from_config``: YAML, Helm values' ConfigMap) and,
in Kubernetes, may be refreshed at run time by :mod:`grpo.services.runtime.discovery`, which swaps
in a whole new set of routes with ``replace``. Every replacement bumps ``version`` so callers that
cache channels per address can notice a change cheaply.

Concurrency: routes are immutable values; the table holds one immutable mapping behind a lock
and swaps it atomically, so a reader sees either the old or the new set, never a mix.

Address syntax is a gRPC target: ``host:port`` (``[v6]:port`` for IPv6), or a target with a
resolver scheme (``dns:///host:port``, ``ipv4:...``, ``unix:/path``, ``unix-abstract:...``).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from grpo.errors import InvalidArgumentError, NotFoundError

__all__ = [
    "Route",
    "RouteConfig",
    "RoutingTable",
    "merge_routes",
    "validate_address",
    "validate_task_type",
]

_TASK_TYPE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-/]*$")
_SCHEMES = ("dns:", "ipv4:", "ipv6:", "unix:", "unix-abstract:", "xds:", "vsock:")
_HOST_PORT = re.compile(r"^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.\-]+):(\d{1,5})$")


def validate_task_type(task_type: str) -> str:
    """Return ``task_type`` if it is a usable routing key.

    A task type starts with a letter or digit and contains only letters, digits and
    ``_ . - /`` (so it survives a comma-separated Kubernetes annotation and a YAML key).

    Raises:
        InvalidArgumentError: empty, or containing whitespace, commas or other characters.
    """
    if not isinstance(task_type, str) or not _TASK_TYPE.match(task_type):
        raise InvalidArgumentError(
            f"task type {task_type!r} is invalid: use letters, digits and '_.-/' "
            "(e.g. 'math', 'arith', 'code')"
        )
    return task_type


def validate_address(address: str) -> str:
    """Return ``address`` if it is a gRPC target this project can dial.

    Accepted: ``host:port`` or ``[ipv6]:port`` with 1 <= port <= 65535, or a target with a
    gRPC resolver scheme (``dns:``, ``ipv4:``, ``ipv6:``, ``unix:``, ``unix-abstract:``,
    ``xds:``, ``vsock:``), passed through unchanged.

    Raises:
        InvalidArgumentError: empty, containing whitespace, without a port, or a port out of
            range; the message quotes the address.
    """
    if not isinstance(address, str) or not address or any(c.isspace() for c in address):
        raise InvalidArgumentError(f"verifier address {address!r} is empty or has whitespace")
    if address.startswith(_SCHEMES):
        return address
    match = _HOST_PORT.match(address)
    if match is None:
        raise InvalidArgumentError(
            f"verifier address {address!r} is not 'host:port' (e.g. 'verifier-math:50051') "
            f"nor a gRPC target with a scheme ({', '.join(_SCHEMES)})"
        )
    port = int(match.group(1))
    if not 1 <= port <= 65535:
        raise InvalidArgumentError(f"verifier address {address!r}: port {port} not in 1..65535")
    return address


def _addresses(values: Iterable[str], what: str) -> tuple[str, ...]:
    if isinstance(values, str):
        raise InvalidArgumentError(f"{what} addresses must be a list, got the string {values!r}")
    out: list[str] = []
    for value in values:
        validate_address(value)
        if value not in out:  # keep first-seen order, drop duplicates
            out.append(value)
    return tuple(out)


@dataclass(frozen=True)
class Route:
    """Where one task type is scored.

    Attributes:
        outcome: addresses of outcome verifiers (one reward per response); the assembler
            balances calls over them. Empty only when the task type has process verifiers.
        process: addresses of process verifiers (one reward per step); may be empty.

    Lists given to the constructor are stored as tuples (the value is immutable);
    duplicate addresses are dropped, order kept.

    Raises:
        InvalidArgumentError: an address is malformed, or both lists are empty.
    """

    outcome: tuple[str, ...] = ()
    process: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "outcome", _addresses(self.outcome, "outcome"))
        object.__setattr__(self, "process", _addresses(self.process, "process"))
        if not self.outcome and not self.process:
            raise InvalidArgumentError(
                "a route needs at least one outcome or process verifier address"
            )

    @property
    def addresses(self) -> tuple[str, ...]:
        """Every address of the route, outcome first, without duplicates."""
        return self.outcome + tuple(a for a in self.process if a not in self.outcome)


class RouteConfig(BaseModel):
    """Configuration of one task type's route (a value of the ``routing`` mapping in YAML)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    outcome: list[str] = Field(
        default_factory=list,
        description="gRPC addresses ('host:port') of the outcome verifiers for this task type.",
    )
    process: list[str] = Field(
        default_factory=list,
        description="gRPC addresses of the process (per-step) verifiers; empty for none.",
    )

    @field_validator("outcome", "process")
    @classmethod
    def _check_addresses(cls, value: list[str]) -> list[str]:
        for address in value:
            validate_address(address)
        return value

    def to_route(self) -> Route:
        """The immutable :class:`Route`.

        Raises:
            InvalidArgumentError: both address lists are empty.
        """
        return Route(outcome=tuple(self.outcome), process=tuple(self.process))


def _route_from_value(task_type: str, value: Any) -> Route:
    """Build a Route from a config value: Route, RouteConfig, mapping, address or list."""
    try:
        if isinstance(value, Route):
            return value
        if isinstance(value, RouteConfig):
            return value.to_route()
        if isinstance(value, str):
            return Route(outcome=(value,))
        if isinstance(value, Mapping):
            unknown = set(value) - {"outcome", "process"}
            if unknown:
                raise InvalidArgumentError(
                    f"unknown key(s) {sorted(unknown)}; a route has 'outcome' and 'process'"
                )
            outcome = value.get("outcome") or ()
            process = value.get("process") or ()
            if isinstance(outcome, str):
                outcome = (outcome,)
            if isinstance(process, str):
                process = (process,)
            return Route(outcome=tuple(outcome), process=tuple(process))
        if isinstance(value, Sequence):
            return Route(outcome=tuple(value))
    except InvalidArgumentError as exc:
        raise InvalidArgumentError(f"routing[{task_type!r}]: {exc}") from exc
    raise InvalidArgumentError(
        f"routing[{task_type!r}]: expected an address, a list of addresses or a mapping with "
        f"'outcome'/'process' lists, got {type(value).__name__}"
    )


def merge_routes(base: Mapping[str, Route], overlay: Mapping[str, Route]) -> dict[str, Route]:
    """Overlay routes on a base set, per task type and per verifier kind.

    For each task type in ``overlay``, a non-empty ``outcome`` (or ``process``) list replaces
    the base's list of the same kind; an empty one keeps the base's. Task types only in one
    side are kept as they are. Used by discovery: discovered Services override the static
    table for what they serve, and the static table remains the default for the rest.

    Returns:
        A new dict task type -> Route; the inputs are not modified.
    """
    merged = dict(base)
    for task_type, extra in overlay.items():
        old = merged.get(task_type)
        if old is None:
            merged[task_type] = extra
            continue
        merged[task_type] = Route(
            outcome=extra.outcome or old.outcome, process=extra.process or old.process
        )
    return merged


class RoutingTable:
    """Thread-safe map task type -> :class:`Route`, swapped atomically by ``replace``.

    ``version`` starts at 0 and grows by one at every ``replace`` (whether or not the routes
    changed, so a watcher's refresh is observable); readers never block each other for long.
    """

    def __init__(self, routes: Mapping[str, Route] | None = None) -> None:
        """Create a table from ready routes.

        Raises:
            InvalidArgumentError: a task type is malformed or a value is not a Route.
        """
        self._cond = threading.Condition(threading.Lock())
        self._routes: Mapping[str, Route] = self._checked(routes or {})
        self._version = 0

    @staticmethod
    def _checked(routes: Mapping[str, Route]) -> dict[str, Route]:
        checked: dict[str, Route] = {}
        for task_type, route in routes.items():
            validate_task_type(task_type)
            if not isinstance(route, Route):
                raise InvalidArgumentError(
                    f"routing[{task_type!r}] must be a Route, got {type(route).__name__}"
                )
            checked[task_type] = route
        return checked

    @classmethod
    def from_config(cls, mapping: Mapping[str, Any] | None) -> RoutingTable:
        """Build a table from configuration.

        ``mapping`` is task type -> one of: ``{"outcome": [addr, ...], "process": [...]}``
        (the YAML / Helm form), a :class:`RouteConfig`, a :class:`Route`, a single address
        string or a list of addresses (both meaning outcome verifiers only). Example::

            {"math": {"outcome": ["verifier-math:50051"], "process": ["verifier-steps:50051"]},
             "code": "verifier-code:50051"}

        Raises:
            InvalidArgumentError: the message names the task type and what is wrong (bad
                address, unknown key, no address at all).
        """
        if mapping is None:
            return cls()
        if not isinstance(mapping, Mapping):
            raise InvalidArgumentError(
                f"routing must be a mapping task type -> route, got {type(mapping).__name__}"
            )
        routes = {
            validate_task_type(str(task_type)): _route_from_value(str(task_type), value)
            for task_type, value in mapping.items()
        }
        return cls(routes)

    @property
    def version(self) -> int:
        """How many times ``replace`` has been called (0 for a fresh table)."""
        with self._cond:
            return self._version

    def lookup(self, task_type: str) -> Route:
        """The route for ``task_type``.

        Raises:
            NotFoundError: no route for the task type; the message lists the known types.
        """
        with self._cond:
            route = self._routes.get(task_type)
            known = sorted(self._routes) if route is None else []
        if route is None:
            raise NotFoundError(
                f"no verifier route for task type {task_type!r}; known task types: "
                f"{', '.join(known) if known else '(none configured)'}"
            )
        return route

    def task_types(self) -> tuple[str, ...]:
        """The routed task types, sorted."""
        with self._cond:
            return tuple(sorted(self._routes))

    def snapshot(self) -> dict[str, Route]:
        """A copy of the current routes (task type -> Route)."""
        with self._cond:
            return dict(self._routes)

    def to_config(self) -> dict[str, dict[str, list[str]]]:
        """The routes in the ``from_config`` mapping form (for logs and resolved configs)."""
        return {
            task_type: {"outcome": list(route.outcome), "process": list(route.process)}
            for task_type, route in sorted(self.snapshot().items())
        }

    def replace(self, new_routes: RoutingTable | Mapping[str, Route]) -> int:
        """Atomically swap in a new set of routes; returns the new version.

        Raises:
            InvalidArgumentError: a task type is malformed or a value is not a Route (the
                table is left unchanged).
        """
        routes = new_routes.snapshot() if isinstance(new_routes, RoutingTable) else new_routes
        checked = self._checked(routes)
        with self._cond:
            self._routes = checked
            self._version += 1
            self._cond.notify_all()
            return self._version

    def wait_for_version(self, version: int, timeout_s: float) -> bool:
        """Block until ``self.version >= version`` or ``timeout_s`` seconds pass.

        Returns:
            True when the version was reached, False on timeout.
        """
        with self._cond:
            return self._cond.wait_for(lambda: self._version >= version, timeout=timeout_s)

    def __repr__(self) -> str:
        return f"RoutingTable(version={self.version}, task_types={list(self.task_types())})"
