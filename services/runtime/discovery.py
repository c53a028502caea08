"""Kubernetes discovery of verifiers: labelled Services become routes in a RoutingTable.

A verifier is discoverable when its Service carries

* the label ``grpo.dev/verifier: "true"`` (the default label selector),
* the annotation ``grpo.dev/task-types: "math,arith"`` (comma-separated task types),
* the annotation ``grpo.dev/verifier-kind: outcome`` or ``process`` (default ``outcome``),
* a port named ``grpc`` (the Service port number is dialled, not the targetPort).

Its address is the Service's cluster DNS name, ``<name>.<namespace>.svc:<port>`` (with
``.<clusterDomain>`` appended when one is configured). For a ClusterIP Service gRPC resolves it
to the cluster IP and kube-proxy balances *connections* over ready pods; for a headless Service
(``clusterIP: None``) the address is ``dns:///<name>.<namespace>.svc:<port>``, which the
verifier client dials with round_robin over every pod address the name resolves to, so load
is spread *per call* and added replicas take load
(``grpo.services.runtime.verifier_client``).

The label-to-route logic (:func:`verifier_from_service`, :func:`routes_from_services`) is pure
and works on the official client's model objects (``V1Service``), so it is tested without a
cluster. :class:`KubernetesDiscovery` runs it in a background thread: it lists the matching
Services, overlays the routes on the static table from configuration (:func:`merge_routes`:
discovered verifiers win for the task types and kinds they serve, the static table stays the
default for the rest), then watches for changes and re-lists whenever the watch expires or the
API answers 410 Gone. A verifier deployed with the right label and annotations is therefore
routed without restarting the assembler. Outside Kubernetes discovery is disabled
(``DiscoverySettings.enabled = False``) and the static routing table is used as is.

RBAC: the assembler's ServiceAccount needs ``get``, ``list`` and ``watch`` on ``services`` in
its namespace (the Helm chart's Role grants exactly that when ``discovery.enabled``).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from grpo.errors import FailedPreconditionError, InvalidArgumentError
from grpo.services.runtime.routing import Route, RoutingTable, merge_routes, validate_task_type

__all__ = [
    "KIND_ANNOTATION",
    "TASK_TYPES_ANNOTATION",
    "VERIFIER_LABEL",
    "DiscoveredRoutes",
    "DiscoveredVerifier",
    "DiscoverySettings",
    "KubernetesDiscovery",
    "discovery_worker",
    "routes_from_services",
    "verifier_from_service",
]

log = logging.getLogger(__name__)

VERIFIER_LABEL = "grpo.dev/verifier"
TASK_TYPES_ANNOTATION = "grpo.dev/task-types"
KIND_ANNOTATION = "grpo.dev/verifier-kind"
_SA_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class DiscoverySettings(BaseModel):
    """Settings of Kubernetes verifier discovery (the assembler's ``discovery`` section)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = Field(
        default=False,
        description="Watch labelled Kubernetes Services and route to them; off outside k8s.",
    )
    namespace: str = Field(
        default="",
        description="Namespace to watch; '' = the pod's own (service-account file, then "
        "$POD_NAMESPACE, then 'default').",
    )
    label_selector: str = Field(
        default=f"{VERIFIER_LABEL}=true",
        min_length=1,
        description="Label selector of verifier Services.",
    )
    port_name: str = Field(
        default="grpc", min_length=1, description="Name of the Service port that serves gRPC."
    )
    cluster_domain: str = Field(
        default="",
        description="Cluster DNS domain appended to '<svc>.<ns>.svc' (e.g. 'cluster.local'); "
        "'' relies on the pod's DNS search path.",
    )
    watch_timeout_s: int = Field(
        default=300,
        ge=1,
        le=3600,
        description="Server-side watch timeout in seconds; the Services are re-listed after it.",
    )
    retry_backoff_s: float = Field(
        default=2.0,
        gt=0,
        le=300,
        description="Seconds to wait before re-listing after an API error (doubles up to 30 s).",
    )

    def resolved_namespace(self) -> str:
        """The namespace to watch: the configured one, else the pod's own, else 'default'."""
        if self.namespace:
            return self.namespace
        try:
            return _SA_NAMESPACE_FILE.read_text().strip() or "default"
        except OSError:
            return os.environ.get("POD_NAMESPACE", "") or "default"


@dataclass(frozen=True)
class DiscoveredVerifier:
    """One verifier Service turned into routing facts.

    Attributes:
        service: ``namespace/name`` of the Service.
        address: gRPC target ``<name>.<namespace>.svc[.<domain>]:<port>``, prefixed with
            ``dns:///`` for a headless Service (per-call round-robin over its pods).
        kind: ``"outcome"`` or ``"process"``.
        task_types: task types it scores, in annotation order, without duplicates.
    """

    service: str
    address: str
    kind: Literal["outcome", "process"]
    task_types: tuple[str, ...]


@dataclass(frozen=True)
class DiscoveredRoutes:
    """Result of :func:`routes_from_services`.

    Attributes:
        routes: task type -> Route built from the usable Services.
        verifiers: the usable Services, sorted by ``service``.
        skipped: ``namespace/name`` -> why the Service was ignored (bad annotation, no port).
    """

    routes: dict[str, Route] = field(default_factory=dict)
    verifiers: tuple[DiscoveredVerifier, ...] = ()
    skipped: dict[str, str] = field(default_factory=dict)


def verifier_from_service(
    service: Any, *, port_name: str = "grpc", cluster_domain: str = ""
) -> DiscoveredVerifier:
    """Read one Service's labels, annotations and ports into a :class:`DiscoveredVerifier`.

    Args:
        service: a ``kubernetes.client.V1Service`` (or any object with the same attributes).
        port_name: the name of the port that serves gRPC.
        cluster_domain: appended to ``<name>.<namespace>.svc`` when not empty.

    Raises:
        InvalidArgumentError: the message names what is missing or malformed: metadata name,
            the ``grpo.dev/task-types`` annotation (missing, empty or a bad task type), the
            ``grpo.dev/verifier-kind`` annotation (not outcome/process), or the named port.
    """
    meta = getattr(service, "metadata", None)
    name = getattr(meta, "name", None)
    if not name:
        raise InvalidArgumentError("Service has no metadata.name")
    namespace = getattr(meta, "namespace", None) or "default"
    ident = f"{namespace}/{name}"
    annotations = getattr(meta, "annotations", None) or {}

    raw_types = annotations.get(TASK_TYPES_ANNOTATION, "")
    task_types: list[str] = []
    for part in raw_types.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            validate_task_type(part)
        except InvalidArgumentError as exc:
            raise InvalidArgumentError(
                f"Service {ident}: annotation {TASK_TYPES_ANNOTATION}: {exc}"
            ) from exc
        if part not in task_types:
            task_types.append(part)
    if not task_types:
        raise InvalidArgumentError(
            f"Service {ident}: annotation {TASK_TYPES_ANNOTATION} is missing or empty "
            "(set it to comma-separated task types, e.g. 'math,arith')"
        )

    kind = annotations.get(KIND_ANNOTATION, "outcome").strip().lower() or "outcome"
    if kind not in ("outcome", "process"):
        raise InvalidArgumentError(
            f"Service {ident}: annotation {KIND_ANNOTATION}={kind!r}; use 'outcome' or 'process'"
        )

    ports = getattr(getattr(service, "spec", None), "ports", None) or []
    port = next((p.port for p in ports if getattr(p, "name", None) == port_name), None)
    if port is None:
        names = [getattr(p, "name", None) for p in ports]
        raise InvalidArgumentError(f"Service {ident}: no port named {port_name!r} (ports: {names})")

    host = f"{name}.{namespace}.svc" + (f".{cluster_domain}" if cluster_domain else "")
    headless = getattr(getattr(service, "spec", None), "cluster_ip", None) == "None"
    return DiscoveredVerifier(
        service=ident,
        address=f"{'dns:///' if headless else ''}{host}:{int(port)}",
        kind="process" if kind == "process" else "outcome",
        task_types=tuple(task_types),
    )


def routes_from_services(
    services: Iterable[Any], *, port_name: str = "grpc", cluster_domain: str = ""
) -> DiscoveredRoutes:
    """Turn verifier Services into routes.

    Each usable Service adds its address to the ``outcome`` or ``process`` list of every task
    type it announces; several Services for one task type are all kept (sorted by Service
    identity, so the result does not depend on list order). Unusable Services are reported in
    ``skipped`` rather than raised, so one mislabelled Service cannot stop routing the rest.

    Args:
        services: ``V1Service`` objects (e.g. ``CoreV1Api.list_namespaced_service(...).items``).
        port_name: name of the gRPC port.
        cluster_domain: see :func:`verifier_from_service`.

    Returns:
        :class:`DiscoveredRoutes` with routes, the verifiers found and the skipped Services.
    """
    verifiers: list[DiscoveredVerifier] = []
    skipped: dict[str, str] = {}
    for service in services:
        try:
            verifiers.append(
                verifier_from_service(service, port_name=port_name, cluster_domain=cluster_domain)
            )
        except InvalidArgumentError as exc:
            meta = getattr(service, "metadata", None)
            ident = f"{getattr(meta, 'namespace', None) or 'default'}/{getattr(meta, 'name', '?')}"
            skipped[ident] = str(exc)
    verifiers.sort(key=lambda v: v.service)
    outcome: dict[str, list[str]] = {}
    process: dict[str, list[str]] = {}
    for verifier in verifiers:
        target = outcome if verifier.kind == "outcome" else process
        for task_type in verifier.task_types:
            target.setdefault(task_type, []).append(verifier.address)
    routes = {
        task_type: Route(
            outcome=tuple(outcome.get(task_type, ())), process=tuple(process.get(task_type, ()))
        )
        for task_type in sorted(set(outcome) | set(process))
    }
    return DiscoveredRoutes(routes=routes, verifiers=tuple(verifiers), skipped=skipped)


def _core_api() -> Any:
    """A CoreV1Api from the in-cluster service account, else from ~/.kube/config.

    Raises:
        FailedPreconditionError: the ``kubernetes`` package is missing or no configuration
            is found.
    """
    try:
        from kubernetes import client, config
    except ImportError as exc:  # pragma: no cover - the k8s extra is not installed
        raise FailedPreconditionError(
            "discovery needs the 'kubernetes' package: pip install 'grpo-pipeline[k8s]'"
        ) from exc
    try:
        config.load_incluster_config()
    except config.ConfigException:
        try:
            config.load_kube_config()
        except Exception as exc:
            raise FailedPreconditionError(
                "discovery is enabled but neither an in-cluster service account nor a kube "
                "config was found; set discovery.enabled=false outside Kubernetes"
            ) from exc
    return client.CoreV1Api()


class KubernetesDiscovery:
    """Background worker keeping a RoutingTable in step with labelled verifier Services.

    Implements the registry's BackgroundWorker protocol (``start()``, ``stop(timeout_s)``).
    The table receives ``merge_routes(static_routes, discovered)`` after the first list and
    after every change. ``lists`` counts list calls (one per watch expiry or error) and
    ``last_result`` holds the latest :class:`DiscoveredRoutes` (with skipped Services).
    """

    def __init__(
        self,
        table: RoutingTable,
        settings: DiscoverySettings,
        static_routes: Mapping[str, Route] | None = None,
        *,
        api: Any = None,
    ) -> None:
        """Prepare the worker; nothing is contacted until ``start()``.

        Args:
            table: the table to update (the assembler's).
            settings: discovery settings.
            static_routes: routes from configuration; defaults to ``table.snapshot()``.
            api: a ``kubernetes.client.CoreV1Api``; built from the in-cluster config if None.
        """
        self.table = table
        self.settings = settings
        self.static_routes = dict(table.snapshot() if static_routes is None else static_routes)
        self.namespace = settings.resolved_namespace()
        self.lists = 0
        self.last_result = DiscoveredRoutes()
        self._api = api
        self._services: dict[str, Any] = {}
        self._applied: dict[str, Route] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._watch: Any = None

    def start(self) -> None:
        """Start the list+watch thread.

        Raises:
            FailedPreconditionError: no Kubernetes configuration (see :func:`_core_api`).
        """
        if self._thread is not None:
            return
        if self._api is None:
            self._api = _core_api()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="k8s-discovery", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float) -> None:
        """Stop watching and join the thread for at most ``timeout_s`` seconds."""
        self._stop.set()
        watch = self._watch
        if watch is not None:
            watch.stop()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None

    def is_alive(self) -> bool:
        """True while the loop thread runs (``grpo serve`` restarts the process otherwise)."""
        return self._thread is not None and self._thread.is_alive()

    def sync_once(self) -> str | None:
        """List the matching Services, apply the routes; returns the list's resourceVersion."""
        result = self._api.list_namespaced_service(
            self.namespace, label_selector=self.settings.label_selector
        )
        self.lists += 1
        self._services = {
            f"{s.metadata.namespace or self.namespace}/{s.metadata.name}": s
            for s in (result.items or [])
        }
        self._apply(force=self._applied is None)
        version = getattr(result.metadata, "resource_version", None)
        return str(version) if version else None

    def _apply(self, *, force: bool = False) -> None:
        result = routes_from_services(
            self._services.values(),
            port_name=self.settings.port_name,
            cluster_domain=self.settings.cluster_domain,
        )
        for ident, reason in result.skipped.items():
            if ident not in self.last_result.skipped:
                log.warning("discovery: ignoring Service %s: %s", ident, reason)
        self.last_result = result
        routes = merge_routes(self.static_routes, result.routes)
        if force or routes != self._applied:
            self._applied = routes
            version = self.table.replace(routes)
            log.info("discovery: routing table v%d: %s", version, routes)

    def _handle_event(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        obj = event.get("object")
        if kind not in ("ADDED", "MODIFIED", "DELETED") or obj is None:
            return
        meta = obj.metadata
        key = f"{meta.namespace or self.namespace}/{meta.name}"
        if kind == "DELETED":
            self._services.pop(key, None)
        else:
            self._services[key] = obj
        self._apply()

    def _run(self) -> None:
        from kubernetes import watch
        from kubernetes.client.rest import ApiException

        backoff = self.settings.retry_backoff_s
        while not self._stop.is_set():
            try:
                resource_version = self.sync_once()
                self._watch = watch.Watch()
                for event in self._watch.stream(
                    self._api.list_namespaced_service,
                    self.namespace,
                    label_selector=self.settings.label_selector,
                    resource_version=resource_version,
                    timeout_seconds=self.settings.watch_timeout_s,
                    allow_watch_bookmarks=True,
                ):
                    if self._stop.is_set():
                        break
                    self._handle_event(event)
                backoff = self.settings.retry_backoff_s  # watch expired normally: re-list
            except ApiException as exc:
                if exc.status == 410:  # resourceVersion too old: re-list at once
                    continue
                log.warning("discovery: Kubernetes API error %s; retrying in %.1fs", exc, backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 30.0)
            except Exception:
                if self._stop.is_set():
                    break
                log.exception("discovery: watch failed; retrying in %.1fs", backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 30.0)
            finally:
                self._watch = None


def discovery_worker(
    table: RoutingTable, settings: DiscoverySettings, *, api: Any = None
) -> KubernetesDiscovery | None:
    """The discovery worker for a service's ``ServiceParts.workers``, or None when disabled.

    Usage in a service's ``build``::

        worker = discovery_worker(routing_table, settings.discovery)
        workers = [w for w in (consumer, worker) if w is not None]

    The static routes are the table's content at this call.

    Raises:
        FailedPreconditionError: enabled, but no Kubernetes configuration is found (raised
            here, at build time, so a misconfigured pod fails fast instead of routing nothing).
    """
    if not settings.enabled:
        return None
    return KubernetesDiscovery(table, settings, api=_core_api() if api is None else api)
