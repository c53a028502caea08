"""The routing table: task type -> the gRPC addresses of its outcome and process verifiers.

A route may combine several outcome rewards with weights (TRL's ``reward_funcs`` +
``reward_weights``): the primary reward (``outcome``, named ``name``, weighted ``weight``) and
further ``rewards`` terms, each a named, weighted list of addresses. The assembler scores every
term and trains on the combined reward ``sum(weight * reward)`` (docs/learner-math.md,
"Several rewards"); held-out accuracy and the correct/incorrect counts read the primary one.

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

import math
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from grpo.errors import InvalidArgumentError, NotFoundError

__all__ = [
    "PRIMARY_NAME",
    "RewardTerm",
    "RewardTermConfig",
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


PRIMARY_NAME = "outcome"
"""Name of a route's primary reward when the configuration gives none."""


def _weight(value: Any, what: str) -> float:
    try:
        weight = float(value)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"{what}: weight {value!r} is not a number") from None
    if not math.isfinite(weight):
        raise InvalidArgumentError(f"{what}: weight {value!r} is not finite")
    return weight


@dataclass(frozen=True)
class RewardTerm:
    """One weighted outcome reward of a route.

    Attributes:
        name: the component's name (unique within its route), e.g. ``"format"``.
        weight: its weight in the combined reward (negative = a penalty); finite.
        addresses: the verifier addresses that score it (calls are balanced over them).

    Raises:
        InvalidArgumentError: an empty name, a weight that is not a finite number, no address
            or a malformed one.
    """

    name: str
    weight: float
    addresses: tuple[str, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise InvalidArgumentError("a reward term needs a non-empty name")
        object.__setattr__(self, "weight", _weight(self.weight, f"reward {self.name!r}"))
        addresses = _addresses(self.addresses, f"reward {self.name!r}")
        if not addresses:
            raise InvalidArgumentError(f"reward {self.name!r} has no verifier address")
        object.__setattr__(self, "addresses", addresses)


@dataclass(frozen=True)
class Route:
    """Where one task type is scored.

    Attributes:
        outcome: addresses of the primary outcome verifier (one reward per response); the
            assembler balances calls over them. Empty only when the task type has process
            verifiers (and then no ``rewards``).
        process: addresses of process verifiers (one reward per step); may be empty.
        name: the primary reward's component name (default ``"outcome"``).
        weight: the primary reward's weight in the combined reward (default 1).
        rewards: further weighted outcome rewards, combined with the primary one.

    Lists given to the constructor are stored as tuples (the value is immutable);
    duplicate addresses are dropped, order kept.

    Raises:
        InvalidArgumentError: an address is malformed, both lists are empty, ``rewards``
            without a primary outcome, two terms of one name, or a weight that is not finite.
    """

    outcome: tuple[str, ...] = ()
    process: tuple[str, ...] = ()
    name: str = PRIMARY_NAME
    weight: float = 1.0
    rewards: tuple[RewardTerm, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "outcome", _addresses(self.outcome, "outcome"))
        object.__setattr__(self, "process", _addresses(self.process, "process"))
        object.__setattr__(self, "weight", _weight(self.weight, f"reward {self.name!r}"))
        object.__setattr__(self, "rewards", tuple(self.rewards))
        if not self.outcome and not self.process:
            raise InvalidArgumentError(
                "a route needs at least one outcome or process verifier address"
            )
        if self.rewards and not self.outcome:
            raise InvalidArgumentError(
                "a route's further rewards need a primary outcome verifier (outcome: [...])"
            )
        names = [self.name, *(t.name for t in self.rewards)]
        for term in self.rewards:
            if not isinstance(term, RewardTerm):
                raise InvalidArgumentError(f"rewards must be RewardTerm values, got {term!r}")
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise InvalidArgumentError(
                f"reward names must be unique within a route; repeated: {repeated} "
                "(give each reward its own name)"
            )

    @property
    def terms(self) -> tuple[RewardTerm, ...]:
        """Every outcome reward of the route, the primary one first (empty without one)."""
        if not self.outcome:
            return ()
        return (RewardTerm(self.name, self.weight, self.outcome), *self.rewards)

    @property
    def addresses(self) -> tuple[str, ...]:
        """Every address of the route (primary outcome, further rewards, process), without
        duplicates."""
        out: list[str] = []
        for address in (
            *self.outcome,
            *(a for t in self.rewards for a in t.addresses),
            *self.process,
        ):
            if address not in out:
                out.append(address)
        return tuple(out)

    def to_config(self) -> dict[str, Any]:
        """The route in the ``RoutingTable.from_config`` mapping form (defaults left out)."""
        out: dict[str, Any] = {"outcome": list(self.outcome), "process": list(self.process)}
        if self.name != PRIMARY_NAME:
            out["name"] = self.name
        if self.weight != 1.0:
            out["weight"] = self.weight
        if self.rewards:
            out["rewards"] = [
                {"name": t.name, "weight": t.weight, "addresses": list(t.addresses)}
                for t in self.rewards
            ]
        return out


class RewardTermConfig(BaseModel):
    """One further weighted outcome reward of a route (an item of ``rewards`` in YAML)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(..., min_length=1, description="Component name, unique in its route.")
    weight: float = Field(
        default=1.0,
        allow_inf_nan=False,
        description="Weight in the combined reward (negative = a penalty).",
    )
    addresses: list[str] = Field(
        ..., min_length=1, description="gRPC addresses of the verifier scoring this reward."
    )

    @field_validator("addresses")
    @classmethod
    def _check_addresses(cls, value: list[str]) -> list[str]:
        for address in value:
            validate_address(address)
        return value


class RouteConfig(BaseModel):
    """Configuration of one task type's route (a value of the ``routing`` mapping in YAML)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    outcome: list[str] = Field(
        default_factory=list,
        description="gRPC addresses ('host:port') of the primary outcome verifier for this "
        "task type (calls are balanced over them).",
    )
    process: list[str] = Field(
        default_factory=list,
        description="gRPC addresses of the process (per-step) verifiers; empty for none.",
    )
    name: str = Field(
        default=PRIMARY_NAME, min_length=1, description="Component name of the primary reward."
    )
    weight: float = Field(
        default=1.0,
        allow_inf_nan=False,
        description="Weight of the primary reward in the combined reward.",
    )
    rewards: list[RewardTermConfig] = Field(
        default_factory=list,
        description="Further weighted outcome rewards ({name, weight, addresses}); the "
        "combined reward sum(weight * reward) trains (docs/learner-math.md).",
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
            InvalidArgumentError: both address lists are empty, repeated reward names.
        """
        return Route(
            outcome=tuple(self.outcome),
            process=tuple(self.process),
            name=self.name,
            weight=self.weight,
            rewards=tuple(RewardTerm(t.name, t.weight, tuple(t.addresses)) for t in self.rewards),
        )


_ROUTE_KEYS = ("outcome", "process", "name", "weight", "rewards")
_TERM_KEYS = ("name", "weight", "addresses")


def _listed(value: Any) -> tuple[str, ...]:
    if not value:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


def _route_from_mapping(value: Mapping[str, Any]) -> Route:
    unknown = set(value) - set(_ROUTE_KEYS)
    if unknown:
        raise InvalidArgumentError(
            f"unknown key(s) {sorted(unknown)}; a route has {', '.join(map(repr, _ROUTE_KEYS))}"
        )
    terms = []
    for i, item in enumerate(value.get("rewards") or ()):
        if isinstance(item, RewardTerm):
            terms.append(item)
            continue
        if not isinstance(item, Mapping):
            raise InvalidArgumentError(
                f"rewards[{i}] must be a mapping {{name, weight, addresses}}"
            )
        bad = set(item) - set(_TERM_KEYS)
        if bad:
            raise InvalidArgumentError(
                f"rewards[{i}]: unknown key(s) {sorted(bad)}; a reward has "
                f"{', '.join(map(repr, _TERM_KEYS))}"
            )
        terms.append(
            RewardTerm(
                str(item.get("name", "")), item.get("weight", 1.0), _listed(item.get("addresses"))
            )
        )
    return Route(
        outcome=_listed(value.get("outcome")),
        process=_listed(value.get("process")),
        name=str(value.get("name") or PRIMARY_NAME),
        weight=value.get("weight", 1.0),
        rewards=tuple(terms),
    )


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
            return _route_from_mapping(value)
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
    the base's list of the same kind; an empty one keeps the base's. The base's reward names,
    weights and further rewards are kept (discovery knows addresses, not weights). Task types
    only in one side are kept as they are. Used by discovery: discovered Services override the
    static table for what they serve, and the static table remains the default for the rest.

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
            outcome=extra.outcome or old.outcome,
            process=extra.process or old.process,
            name=old.name,
            weight=old.weight,
            rewards=old.rewards,
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
        (the YAML / Helm form, optionally with ``name``, ``weight`` and ``rewards``: further
        ``{name, weight, addresses}`` outcome rewards), a :class:`RouteConfig`, a
        :class:`Route`, a single address string or a list of addresses (both meaning outcome
        verifiers only). Example::

            {"math": {"outcome": ["verifier-math:50051"], "process": ["verifier-steps:50051"],
                      "name": "correctness",
                      "rewards": [{"name": "format", "weight": 0.2,
                                   "addresses": ["verifier-format:50051"]}]},
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

    def to_config(self) -> dict[str, dict[str, Any]]:
        """The routes in the ``from_config`` mapping form (for logs and resolved configs)."""
        return {
            task_type: route.to_config() for task_type, route in sorted(self.snapshot().items())
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
