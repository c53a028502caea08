"""The run's verifiers: the ``verifiers`` section of a RunConfig, resolved and checked.

Every verifier of a run is named by one string, in one of three forms:

- a **built-in** verifier service name (``verifier-math``, ``verifier-steps``,
  ``verifier-code``, ``verifier-format``, ``verifier-length``): ``grpo run`` starts it;
- a **``module:SERVICE``** of the verifier SDK (``grpo.verifiers.example:SERVICE``, or a
  package of the user's): ``grpo run`` starts it the same way (``grpo serve module:SERVICE``);
- an **endpoint**: a verifier already running anywhere, in any language, reached at
  ``host:port``, ``[v6]:port`` or a gRPC target such as ``dns:///name:port``, optionally over
  TLS (``tls``). ``grpo run`` starts nothing for it.

The shortest form is ``verifiers.outcome: 127.0.0.1:50070``. The long form gives each task type
a route with several weighted outcome rewards and a process verifier::

    verifiers:
      outcome:                                   # every task type, unless routes says otherwise
        - {verifier: verifier-math, name: correctness}              # weight 1, the primary
        - {verifier: verifier-format, name: format, weight: 0.2}
        - {verifier: verifier-length, name: length, weight: -0.1}
      process: verifier-steps
      routes:
        exact: {outcome: "verifier.example.org:443", process: null}
      extra:
        verifier-math: {verifier: {pool: {workers: 1}}}

:func:`check_verifiers_config` runs at load time (``RunConfig`` validation): it classifies
every string, imports every built-in and SDK service, checks each ``extra`` block against that
service's own settings model (unknown keys are named with the valid ones) and refuses an
``extra`` block naming no verifier the run starts. :func:`plan_verifiers` turns the section into
a :class:`VerifierPlan` for the run's task type (the services to start, the routing table, the
TLS of each endpoint, the primary verifier of the held-out evaluation), and
:func:`check_verifier_plan` checks it before any work: each endpoint's ``Describe`` is called
(bounded by ``check_timeout_s``, all at once), and every verifier's kind and task types
(declared by a built-in or SDK service's class, answered by an endpoint) must cover the routes
given to it, else the run refuses with one line naming the route and what the verifier declares.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_serializer,
    field_validator,
)

from grpo.errors import (
    EndpointCheckError,
    FailedPreconditionError,
    GrpoError,
    InvalidArgumentError,
)
from grpo.services.runtime.channels import CHECK_TIMEOUT_S
from grpo.services.runtime.config import deep_merge, error_text
from grpo.services.runtime.registry import SERVICES, VerifierDeclaration, load_spec
from grpo.services.runtime.routing import Route, validate_address
from grpo.services.runtime.verifier_client import (
    EndpointTLS,
    VerifierClientConfig,
    describe_verifier,
)

__all__ = [
    "PlannedComponent",
    "PlannedRoute",
    "PlannedVerifier",
    "RewardRef",
    "RouteSpec",
    "VerifierPlan",
    "VerifierRef",
    "VerifiersConfig",
    "builtin_verifiers",
    "check_routes",
    "check_verifier_plan",
    "check_verifiers_config",
    "classify_verifier",
    "plan_verifiers",
]

log = logging.getLogger(__name__)

_FROZEN = ConfigDict(frozen=True, extra="forbid")
_SDK = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")

VerifierForm = Literal["builtin", "sdk", "endpoint"]


def builtin_verifiers() -> list[str]:
    """The built-in verifier service names (``verifier-*`` of the service registry), sorted."""
    return sorted(n for n in SERVICES if n.startswith("verifier-"))


class VerifierRef(BaseModel):
    """One verifier: a built-in service name, a ``module:SERVICE`` of the SDK, or an endpoint."""

    model_config = _FROZEN

    verifier: str = Field(
        ...,
        min_length=1,
        description="A built-in verifier service (verifier-math, ...), a module:SERVICE of "
        "the SDK, or the endpoint of a running verifier (host:port, dns:///name:port).",
    )
    name: str = Field(
        default="",
        description="Name of this reward in the run's records and metrics; '' = the service "
        "name (built-in, SDK) or the address (endpoint).",
    )
    tls: EndpointTLS | None = Field(
        default=None,
        description="TLS to an endpoint (ca_file, cert_file, key_file, server_name; enabled: "
        "false = plaintext); None = plaintext, or the run's assembler.verifier.tls_* files.",
    )


class RewardRef(VerifierRef):
    """One weighted outcome reward of a route."""

    weight: float = Field(
        default=1.0,
        allow_inf_nan=False,
        description="Weight in the combined reward sum(weight * reward); negative = a penalty.",
    )


def _refs(value: Any) -> Any:
    """A string or a mapping as a one-item list; strings inside a list as ``{verifier: s}``."""
    if isinstance(value, (str, Mapping, BaseModel)):
        value = [value]
    if isinstance(value, (list, tuple)):
        return [{"verifier": v} if isinstance(v, str) else v for v in value]
    return value


def _ref(value: Any) -> Any:
    return {"verifier": value} if isinstance(value, str) else value


def _short_ref(ref: VerifierRef | None) -> Any:
    """A reference with only its verifier set, as that string (how a config writes it)."""
    if ref is None:
        return None
    dumped = ref.model_dump(mode="json", exclude_defaults=True)
    return ref.verifier if set(dumped) == {"verifier"} else dumped


def _short_refs(refs: list[RewardRef]) -> Any:
    """``[plain reference]`` as its string; otherwise each reference in its shortest form."""
    out = [_short_ref(r) for r in refs]
    return out[0] if len(out) == 1 and isinstance(out[0], str) else out


_OUTCOME_INPUT = str | RewardRef | list[str | RewardRef]
"""What ``outcome`` accepts: one verifier string, one mapping, or a list of either."""
_PROCESS_INPUT = str | VerifierRef | None
"""What ``process`` accepts: a verifier string, a mapping, or null."""


class RouteSpec(BaseModel):
    """The verifiers of one task type: weighted outcome rewards and an optional process one."""

    model_config = _FROZEN

    outcome: list[RewardRef] = Field(
        ...,
        min_length=1,
        description="Outcome rewards, the primary (first) one trains correctness and scores "
        "held-out accuracy; a string is one reward of weight 1.",
    )
    process: VerifierRef | None = Field(
        default=None, description="Process (per-step) verifier; None = outcome only."
    )

    @field_validator("outcome", mode="before", json_schema_input_type=_OUTCOME_INPUT)
    @classmethod
    def _outcome_refs(cls, value: Any) -> Any:
        return _refs(value)

    @field_validator("process", mode="before", json_schema_input_type=_PROCESS_INPUT)
    @classmethod
    def _process_ref(cls, value: Any) -> Any:
        return _ref(value)

    @field_serializer("outcome")
    def _outcome_short(self, value: list[RewardRef]) -> Any:
        return _short_refs(value)

    @field_serializer("process")
    def _process_short(self, value: VerifierRef | None) -> Any:
        return _short_ref(value)


class VerifiersConfig(BaseModel):
    """Which verifiers score the run: by service name, ``module:SERVICE`` or endpoint."""

    model_config = _FROZEN

    outcome: list[RewardRef] = Field(
        default_factory=lambda: [RewardRef(verifier="verifier-math")],
        min_length=1,
        description="Outcome rewards of every task type without its own route: one verifier "
        "(verifier-math, module:SERVICE, 127.0.0.1:50070) or a list of {verifier, name, weight, "
        "tls}; the first is the primary reward (held-out accuracy, correct counts).",
    )
    process: VerifierRef | None = Field(
        default=None,
        description="Process (per-step) verifier of every task type without its own route; "
        "None = outcome only.",
    )
    routes: dict[str, RouteSpec] = Field(
        default_factory=dict,
        description="Task type -> {outcome, process}: the verifiers of that task type, "
        "instead of outcome/process above.",
    )
    extra: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Verifier the run starts (built-in name or module:SERVICE, as written "
        "above) -> settings merged into its YAML (server, scoring, verifier blocks).",
    )
    check_timeout_s: float = Field(
        default=1.5,
        gt=0,
        le=30,
        description="How long each endpoint's Describe may take when the run checks its "
        "verifiers before any work (seconds).",
    )

    @field_validator("outcome", mode="before", json_schema_input_type=_OUTCOME_INPUT)
    @classmethod
    def _outcome_refs(cls, value: Any) -> Any:
        return _refs(value)

    @field_validator("process", mode="before", json_schema_input_type=_PROCESS_INPUT)
    @classmethod
    def _process_ref(cls, value: Any) -> Any:
        return _ref(value)

    @field_serializer("outcome")
    def _outcome_short(self, value: list[RewardRef]) -> Any:
        return _short_refs(value)

    @field_serializer("process")
    def _process_short(self, value: VerifierRef | None) -> Any:
        return _short_ref(value)

    def refs(self) -> list[tuple[str, VerifierRef]]:
        """Every verifier named in the section with its config path, in order."""
        out: list[tuple[str, VerifierRef]] = [
            (f"verifiers.outcome[{i}]", r) for i, r in enumerate(self.outcome)
        ]
        if self.process is not None:
            out.append(("verifiers.process", self.process))
        for task_type, route in self.routes.items():
            base = f"verifiers.routes.{task_type}"
            out += [(f"{base}.outcome[{i}]", r) for i, r in enumerate(route.outcome)]
            if route.process is not None:
                out.append((f"{base}.process", route.process))
        return out


# ---------------------------------------------------------------------------- classification
@dataclass(frozen=True)
class PlannedVerifier:
    """One verifier of the run, classified.

    Attributes:
        text: the string as the config wrote it.
        form: ``builtin``, ``sdk`` or ``endpoint``.
        service: the name ``grpo run`` starts it under (the spec's name; '' for an endpoint).
        address: the endpoint's gRPC target ('' for a service the run starts).
        tls: the endpoint's own TLS (None: the run's default).
        declared: kind and task types of a built-in or SDK service's class (None for an
            endpoint: its ``Describe`` answers).
    """

    text: str
    form: VerifierForm
    service: str = ""
    address: str = ""
    tls: EndpointTLS | None = None
    declared: VerifierDeclaration | None = None


def classify_verifier(text: str, where: str, tls: EndpointTLS | None = None) -> PlannedVerifier:
    """Classify one verifier string (built-in name, ``module:SERVICE``, endpoint).

    Args:
        text: the string; where: its config path (for messages); tls: the endpoint's TLS.

    Raises:
        InvalidArgumentError: none of the three forms, an SDK module that cannot be imported
            or holds no verifier ``ServiceSpec``, a service that is not a verifier, or TLS
            options on a service the run starts; the message names ``where`` and the forms.
    """
    text = text.strip()
    if text in SERVICES or _SDK.match(text):
        if text in SERVICES and not text.startswith("verifier-"):
            raise InvalidArgumentError(
                f"{where}: {text!r} is a pipeline service, not a verifier; built-in verifiers: "
                f"{', '.join(builtin_verifiers())}"
            )
        try:
            spec = load_spec(text)
        except ImportError as exc:
            raise InvalidArgumentError(
                f"{where}: cannot import the verifier service {text!r}: {exc}"
            ) from None
        except GrpoError as exc:
            raise InvalidArgumentError(f"{where}: {text!r}: {exc}") from None
        if spec.verifier is None:
            raise InvalidArgumentError(
                f"{where}: {text!r} is the service {spec.name!r}, not a verifier (a verifier "
                "module exposes SERVICE = verifier_service_spec(...))"
            )
        if tls is not None:
            raise InvalidArgumentError(
                f"{where}: tls applies to an endpoint; {text!r} is a service grpo run starts "
                "(its TLS goes in verifiers.extra)"
            )
        form: VerifierForm = "builtin" if text in SERVICES else "sdk"
        return PlannedVerifier(text, form, service=spec.name, declared=spec.verifier)
    try:
        address = validate_address(text)
    except InvalidArgumentError:
        raise InvalidArgumentError(
            f"{where}: {text!r} is neither a built-in verifier "
            f"({', '.join(builtin_verifiers())}), a module:SERVICE of the verifier SDK, nor an "
            "endpoint (host:port, [v6]:port, dns:///name:port)"
        ) from None
    return PlannedVerifier(text, "endpoint", address=address, tls=tls)


def _check_extra(name: str, block: Any, verifier: PlannedVerifier) -> None:
    """Validate one ``verifiers.extra`` block against its service's settings model."""
    where = f"verifiers.extra.{name}"
    if not isinstance(block, Mapping):
        raise InvalidArgumentError(f"{where} must be a mapping of settings")
    cls = load_spec(verifier.text).settings_cls
    try:
        cls.model_validate(deep_merge({}, block))
    except ValidationError as exc:
        problems = "; ".join(f"{where}.{error_text(cls, e)}" for e in exc.errors())
        raise InvalidArgumentError(problems) from None


def check_verifiers_config(config: VerifiersConfig) -> dict[str, PlannedVerifier]:
    """Validate the ``verifiers`` section at load time (see the module docstring).

    Returns:
        Each verifier string -> its :class:`PlannedVerifier`.

    Raises:
        InvalidArgumentError: a string of no known form, two names for one service, two
            rewards of one name in a route, an ``extra`` block naming no verifier the run
            starts (the message lists those it starts) or holding a setting its service does
            not have (the message lists the valid keys).
    """
    found: dict[str, PlannedVerifier] = {}
    for where, ref in config.refs():
        classified = classify_verifier(ref.verifier, where, ref.tls)
        key = classified.text
        if key in found and found[key].tls != classified.tls:
            raise InvalidArgumentError(f"{where}: {key!r} is given two different tls blocks")
        found[key] = classified
    services: dict[str, str] = {}
    for v in found.values():
        if v.service and services.setdefault(v.service, v.text) != v.text:
            raise InvalidArgumentError(
                f"verifiers: {services[v.service]!r} and {v.text!r} are both the service "
                f"{v.service!r}; name it one way"
            )
    _route_names(config, found)
    started = sorted(v.text for v in found.values() if v.form != "endpoint")
    for name, block in config.extra.items():
        verifier: PlannedVerifier | None = found.get(name)
        if verifier is None and name in builtin_verifiers():
            # Settings kept for a built-in this run does not start (its outcome was replaced,
            # e.g. by an endpoint): still checked, then unused.
            log.info("verifiers.extra.%s: the run does not start %s; block unused", name, name)
            verifier = classify_verifier(name, f"verifiers.extra.{name}")
        elif verifier is None or verifier.form == "endpoint":
            what = "is an endpoint (its settings are its own)" if verifier else "names no verifier"
            raise InvalidArgumentError(
                f"verifiers.extra.{name}: {name!r} {what}; extra takes a built-in verifier "
                f"({', '.join(builtin_verifiers())}) or a module:SERVICE the run starts"
                + (f" ({', '.join(started)})" if started else "")
            )
        _check_extra(name, block, verifier)
    return found


def _component_name(ref: VerifierRef, verifier: PlannedVerifier) -> str:
    return ref.name or verifier.service or verifier.address


def _route_names(config: VerifiersConfig, found: Mapping[str, PlannedVerifier]) -> None:
    """Refuse two outcome rewards of one name within a route."""
    routes = {"verifiers.outcome": config.outcome}
    routes.update({f"verifiers.routes.{t}.outcome": r.outcome for t, r in config.routes.items()})
    for where, refs in routes.items():
        names = [_component_name(r, found[r.verifier.strip()]) for r in refs]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise InvalidArgumentError(
                f"{where}: two rewards named {repeated[0]!r}; give each its own name: "
                "{verifier: ..., name: ..., weight: ...}"
            )


# ---------------------------------------------------------------------------- the plan
@dataclass(frozen=True)
class PlannedComponent:
    """One weighted outcome reward of a route: its name, weight, verifier and config path."""

    name: str
    weight: float
    verifier: PlannedVerifier
    where: str


@dataclass(frozen=True)
class PlannedRoute:
    """The verifiers of one task type: outcome rewards (primary first) and a process one."""

    task_type: str
    outcome: tuple[PlannedComponent, ...]
    process: PlannedVerifier | None
    process_where: str = ""


@dataclass(frozen=True)
class VerifierPlan:
    """The run's verifiers resolved for its task types (:func:`plan_verifiers`).

    Attributes:
        routes: task type -> its route.
        check_timeout_s: the bound of each endpoint's ``Describe`` in the pre-run check.
    """

    routes: Mapping[str, PlannedRoute]
    check_timeout_s: float = 1.5

    def verifiers(self) -> list[PlannedVerifier]:
        """Every distinct verifier of the plan, in route order."""
        out: dict[str, PlannedVerifier] = {}
        for route in self.routes.values():
            for c in route.outcome:
                out.setdefault(c.verifier.text, c.verifier)
            if route.process is not None:
                out.setdefault(route.process.text, route.process)
        return list(out.values())

    def services(self) -> dict[str, PlannedVerifier]:
        """The verifier services the run starts: service name -> verifier."""
        return {v.service: v for v in self.verifiers() if v.form != "endpoint"}

    def endpoint_tls(self) -> dict[str, EndpointTLS]:
        """Address -> TLS of the endpoints that have their own (``endpoint_tls``)."""
        return {v.address: v.tls for v in self.verifiers() if v.tls is not None}

    def primary(self, task_type: str) -> PlannedVerifier:
        """The primary outcome verifier of ``task_type`` (held-out accuracy reads it).

        Raises:
            FailedPreconditionError: the plan has no route for ``task_type``.
        """
        route = self.routes.get(task_type)
        if route is None:
            raise FailedPreconditionError(
                f"no verifier route for task type {task_type!r}; routed: {sorted(self.routes)}"
            )
        return route.outcome[0].verifier

    def routing(self, address_of: Callable[[str], str]) -> dict[str, dict[str, Any]]:
        """The assembler's ``routing`` settings (``RoutingTable.from_config`` form).

        Args:
            address_of: service name -> the ``host:port`` it listens on (a service the run
                started); endpoints keep their address.
        """

        def where(v: PlannedVerifier) -> str:
            return v.address if v.form == "endpoint" else address_of(v.service)

        out: dict[str, dict[str, Any]] = {}
        for task_type, route in self.routes.items():
            primary, *rest = route.outcome
            entry: dict[str, Any] = {
                "outcome": [where(primary.verifier)],
                "name": primary.name,
                "weight": primary.weight,
            }
            if rest:
                entry["rewards"] = [
                    {"name": c.name, "weight": c.weight, "addresses": [where(c.verifier)]}
                    for c in rest
                ]
            if route.process is not None:
                entry["process"] = [where(route.process)]
            out[task_type] = entry
        return out


def plan_verifiers(config: VerifiersConfig, task_types: Sequence[str]) -> VerifierPlan:
    """Resolve the ``verifiers`` section for the run's task types.

    A task type with an entry in ``routes`` takes it; the others take ``outcome``/``process``.

    Raises:
        InvalidArgumentError: what :func:`check_verifiers_config` refuses, or a ``routes`` key
            that is none of ``task_types`` (the message names the run's task types).
    """
    found = check_verifiers_config(config)
    stray = sorted(set(config.routes) - set(task_types))
    if stray:
        raise InvalidArgumentError(
            f"verifiers.routes.{stray[0]}: the run has no task of type {stray[0]!r}; its task "
            f"types: {', '.join(task_types)}"
        )
    routes: dict[str, PlannedRoute] = {}
    for task_type in task_types:
        spec = config.routes.get(task_type)
        base = f"verifiers.routes.{task_type}" if spec is not None else "verifiers"
        outcome = spec.outcome if spec is not None else config.outcome
        process = spec.process if spec is not None else config.process
        components = tuple(
            PlannedComponent(
                name=_component_name(ref, found[ref.verifier.strip()]),
                weight=ref.weight,
                verifier=found[ref.verifier.strip()],
                where=f"{base}.outcome" + (f"[{i}]" if len(outcome) > 1 else ""),
            )
            for i, ref in enumerate(outcome)
        )
        routes[task_type] = PlannedRoute(
            task_type=task_type,
            outcome=components,
            process=found[process.verifier.strip()] if process is not None else None,
            process_where=f"{base}.process",
        )
    return VerifierPlan(routes=routes, check_timeout_s=config.check_timeout_s)


# ---------------------------------------------------------------------------- the check
def _declared_text(kind: str, task_types: Sequence[str]) -> str:
    types = ", ".join(task_types) if task_types else "any"
    return f"{kind} verifier; task types: {types}"


def _mismatch(
    where: str,
    verifier: PlannedVerifier,
    task_type: str,
    want: str,
    kind: str,
    types: Sequence[str],
) -> str | None:
    problems = []
    if types and task_type not in types:
        problems.append(f"it does not accept task type {task_type!r}")
    if kind != want:
        problems.append(f"it is not {'an' if want == 'outcome' else 'a'} {want} verifier")
    if not problems:
        return None
    return (
        f"{where}: {verifier.text} cannot score task type {task_type!r} as {want}: it declares "
        f"({_declared_text(kind, types)}); {' and '.join(problems)}"
    )


def _kind_name(kind: int) -> str:
    from grpo.v1 import verifier_pb2

    names: dict[int, str] = {
        verifier_pb2.VERIFIER_KIND_OUTCOME: "outcome",
        verifier_pb2.VERIFIER_KIND_PROCESS: "process",
    }
    return names.get(kind, "unspecified-kind")


def check_verifier_plan(
    plan: VerifierPlan,
    client: VerifierClientConfig | None = None,
    *,
    describe: Callable[[str, VerifierClientConfig, float], Any] | None = None,
) -> dict[str, Any]:
    """Check every route of ``plan`` before any work (see the module docstring).

    Each endpoint's ``Describe`` is called once, all endpoints at once, each bounded by
    ``plan.check_timeout_s``; built-in and SDK services are checked against what their class
    declares (they are not started).

    Args:
        plan: the run's verifiers; client: TLS and message limits of the calls (the run's
            ``assembler.verifier``, its ``endpoint_tls`` completed from the plan);
        describe: ``describe_verifier`` (injectable for tests).

    Returns:
        Endpoint address -> its ``VerifierDescribeResponse``.

    Raises:
        EndpointCheckError: one line: an endpoint that does not answer (named with its
            config path), or a route given to a verifier whose kind or task types do not cover
            it (naming the route and what the verifier declares).
    """
    base = client or VerifierClientConfig()
    cfg = base.model_copy(update={"endpoint_tls": {**base.endpoint_tls, **plan.endpoint_tls()}})
    endpoints = sorted({v.address for v in plan.verifiers() if v.form == "endpoint"})
    answers = _describe_all(
        endpoints, cfg, plan.check_timeout_s, describe, lambda a: _uses(plan, a)
    )
    for task_type, route in plan.routes.items():
        checks = [(c.where, c.verifier, "outcome") for c in route.outcome]
        if route.process is not None:
            checks.append((route.process_where, route.process, "process"))
        for where, verifier, want in checks:
            if verifier.form == "endpoint":
                info = answers[verifier.address]
                kind, types = _kind_name(info.kind), tuple(info.task_types)
                label = f"{info.name!r} {info.version}".strip()
                verifier = PlannedVerifier(
                    f"{verifier.address} ({label})", "endpoint", address=verifier.address
                )
            else:
                assert verifier.declared is not None
                kind, types = verifier.declared.kind, verifier.declared.task_types
            problem = _mismatch(where, verifier, task_type, want, kind, types)
            if problem:
                raise EndpointCheckError(problem, address=verifier.address)
    return answers


def _describe_all(
    addresses: Sequence[str],
    cfg: VerifierClientConfig,
    timeout_s: float,
    describe: Callable[[str, VerifierClientConfig, float], Any] | None,
    uses: Callable[[str], str],
) -> dict[str, Any]:
    """Each address's ``Describe`` (``describe_verifier``, or ``describe``), all at once,
    each bounded by ``timeout_s``; the first that fails (in order) raises, prefixed with
    ``uses(address)`` (the config paths that name it).

    Raises:
        EndpointCheckError: an address did not answer (one line).
    """
    call = describe or (lambda a, c, t: describe_verifier(a, c, timeout_s=t))
    answers: dict[str, Any] = {}
    if not addresses:
        return answers
    with ThreadPoolExecutor(max_workers=min(16, len(addresses))) as pool:
        futures = {a: pool.submit(call, a, cfg, timeout_s) for a in addresses}
    for address, future in futures.items():
        try:
            answers[address] = future.result()
        except GrpoError as exc:
            raise EndpointCheckError(f"{uses(address)}: {exc}", address=address) from None
    return answers


def check_routes(
    routes: Mapping[str, Route],
    client: VerifierClientConfig | None = None,
    *,
    timeout_s: float = CHECK_TIMEOUT_S,
    describe: Callable[[str, VerifierClientConfig, float], Any] | None = None,
) -> dict[str, Any]:
    """Check a routing table as :func:`check_verifier_plan` checks a run's plan: the
    assembler's routes at its start (``grpo serve assembler``, on Kubernetes too, where the
    table comes from the chart's values).

    Every address of every route (primary outcome, further rewards, process) is called
    once, all at once, each bounded by ``timeout_s``; each must declare the kind and accept
    the task type of every route given to it.

    Args:
        routes: task type -> ``Route`` (``RoutingTable.snapshot()``).
        client: TLS and message limits of the calls (the assembler's ``verifier`` settings,
            ``endpoint_tls`` included).
        timeout_s: the bound of each ``Describe`` (seconds).
        describe: ``describe_verifier`` (injectable for tests).

    Returns:
        Address -> its ``VerifierDescribeResponse``.

    Raises:
        EndpointCheckError: one line: an address that does not answer, named with its
            routes (``routing.math.outcome``, ``routing.math.rewards.format``,
            ``routing.math.process``), or one that declares another kind or does not accept
            the route's task type (naming the route and what it declares).
    """
    cfg = client or VerifierClientConfig()
    uses: dict[str, list[str]] = {}
    checks: list[tuple[str, str, str, str]] = []  # (where, address, task type, kind wanted)
    for task_type, route in sorted(routes.items()):
        named = [(f"routing.{task_type}.outcome", route.outcome, "outcome")]
        named += [(f"routing.{task_type}.rewards.{t.name}", t.addresses, "outcome")
                  for t in route.rewards]  # fmt: skip
        named.append((f"routing.{task_type}.process", route.process, "process"))
        for where, addresses, want in named:
            for address in addresses:
                uses.setdefault(address, []).append(where)
                checks.append((where, address, task_type, want))
    answers = _describe_all(list(uses), cfg, timeout_s, describe, lambda a: ", ".join(uses[a]))
    for where, address, task_type, want in checks:
        info = answers[address]
        label = f"{info.name!r} {info.version}".strip()
        verifier = PlannedVerifier(f"{address} ({label})", "endpoint", address=address)
        types = tuple(info.task_types)
        problem = _mismatch(where, verifier, task_type, want, _kind_name(info.kind), types)
        if problem:
            raise EndpointCheckError(problem, address=address)
    return answers


def _uses(plan: VerifierPlan, address: str) -> str:
    """The config paths that name the endpoint ``address``."""
    paths = []
    for route in plan.routes.values():
        paths += [c.where for c in route.outcome if c.verifier.address == address]
        if route.process is not None and route.process.address == address:
            paths.append(route.process_where)
    return ", ".join(dict.fromkeys(paths)) or address
