"""Each service's settings derived from the run config: the one derivation, used by ``grpo run``
and by the Helm chart's pods.

A service's settings document has three parts, merged in this order (a later one wins):

1. **what the run decides** (``run_part``): taken from the ``RunConfig`` alone, e.g. the
   learner's batch size, cadence, step budget, trainer and algorithm; the rollout worker's
   sampling, ``max_rollout_lag`` (from G and ``prompts_ahead``) and reclaim delay (from the
   assembler's group deadline); the assembler's section; the driver's whole run;
2. **the placement**: what the deployment decides and the run cannot know: the gRPC server
   block, Redis URL, model and run folders, addresses of the other services, consumer names,
   how weights travel. Its keys are listed per service in ``PLACEMENT_KEYS``;
   ``check_placement`` refuses a placement that sets a key the run decides;
3. **the run's free-form block for that service** (``generation.extra``, ``learner.extra``,
   ``assembler_extra``, ``verifiers.extra[NAME]``), then the caller's ``overrides`` (the chart:
   a workload's own ``config:`` values).

``service_settings`` computes the document. ``grpo run`` (``grpo.local.cluster``) calls it with
its loopback placement and writes the result into ``<run_dir>/services/``; a pod of the chart
runs ``grpo serve NAME --run-config run.yaml --placement placement.yaml --config config.yaml``,
which calls it through ``load_service_settings`` with the mounted run config and the chart's
placement. Neither adds a key of its own that the run decides, so every service gets the same
settings from the same run under ``grpo run`` and on Kubernetes (tests/helm/test_chart.py and
``make chart-wiring`` compare them).

Two run config fields are themselves resolved by the deployment (``resolve_run``):
``namespace`` (``grpo run``: ``run-<run dir>``; the chart: ``streamNamespace``) and
``redis_url`` (``grpo run``: the embedded server; the chart: unset, so ``$GRPO_REDIS_URL`` /
``$REDIS_URL`` from the pod's Secret apply).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from grpo.errors import InvalidArgumentError
from grpo.services.runtime.config import deep_merge, load_settings
from grpo.services.runtime.registry import load_settings_cls
from grpo.services.settings.assembler import check_reclaim_before_deadline, reclaim_idle_ms_for
from grpo.services.settings.run import RunConfig

__all__ = [
    "DRIVER_GRACE_S",
    "PIPELINE_SERVICES",
    "PLACEMENT_KEYS",
    "check_placement",
    "extra_part",
    "flatten",
    "load_service_settings",
    "resolve_run",
    "role_of",
    "run_part",
    "service_settings",
    "write_service_config",
]

PIPELINE_SERVICES = ("learner", "rollout-worker", "assembler", "driver")
"""Services with a role of their own in a run; any other service name is a verifier."""

DRIVER_GRACE_S = 900.0
"""Seconds the driver may take after SIGTERM (Ctrl-C): the final evaluation and summary."""

_COMMON_PLACEMENT = ("server", "redis_url")

PLACEMENT_KEYS: dict[str, tuple[str, ...]] = {
    "learner": (
        *_COMMON_PLACEMENT,
        "model_path",
        "run_dir",
        "assembler_address",
        "consumer",
        "world_size",
        "dist_init",
    ),
    "rollout-worker": (
        *_COMMON_PLACEMENT,
        "backend.model_path",
        "backend.device",
        "backend.torch_threads",
        "worker.consumer",
        "weights",
    ),
    "assembler": (
        *_COMMON_PLACEMENT,
        "routing",
        "group_log",
        "consumer_name",
        "discovery",
        "assembler.verifier.tls_ca_file",
        "assembler.verifier.tls_cert_file",
        "assembler.verifier.tls_key_file",
        "assembler.verifier.endpoint_tls",
    ),
    "driver": (
        "server.host",
        "server.port",
        "server.metrics_port",
        "server.max_message_bytes",
        "server.drain_delay_s",
        "server.tls_cert_file",
        "server.tls_key_file",
        "server.tls_client_ca_file",
        "out_dir",
        "learner_address",
        "assembler_address",
        "verifier_addresses",
        "initial_policy",
        "steps",
        "weights",
        "on_stop",
        "release",
    ),
    "verifier": ("server",),
}
"""Dotted keys (a key covers everything under it) a deployment may set in a service's
placement, per role (``role_of``). Everything else in a service's settings is decided by the
run (``run_part``), by the run's free-form block for the service, or left at its default. The
run also sets ``server.stall_s`` (``supervision.loop_stall_s``),
``server.redis_reply_timeout_s`` (``supervision.redis_reply_timeout_s``) and the driver's
``server.grace_s`` (``DRIVER_GRACE_S``: its final evaluation)."""


def role_of(service: str) -> str:
    """``learner``, ``rollout-worker``, ``assembler``, ``driver``, or ``verifier`` (any other
    ``grpo serve`` name or ``module:ATTRIBUTE``)."""
    return service if service in PIPELINE_SERVICES else "verifier"


def resolve_run(
    config: RunConfig, *, namespace: str | None = None, redis_url: str | None = None
) -> RunConfig:
    """The run as its services see it: the stream namespace and Redis URL the deployment chose
    written into the run config (``None`` keeps the config's own value).

    Raises:
        InvalidArgumentError: ``namespace`` is empty after resolution (every stream user must
            agree on one).
    """
    update: dict[str, Any] = {}
    if namespace is not None:
        update["namespace"] = namespace
    if redis_url is not None:
        update["redis_url"] = redis_url
    resolved = config.model_copy(update=update) if update else config
    if not resolved.namespace:
        raise InvalidArgumentError("the run's namespace is unresolved (config.namespace is '')")
    return resolved


def run_part(config: RunConfig, service: str, *, index: int = 0) -> dict[str, Any]:
    """The keys of ``service``'s settings that the run decides (part 1 of the module docstring).

    Args:
        config: the resolved run (``resolve_run``): its ``namespace`` and, when set,
            ``redis_url`` are written for every service that uses Redis.
        service: a ``grpo serve`` name (``role_of`` picks the rule).
        index: the rollout worker's index: its sampling seed is ``seed * 1000 + index + 1``
            (each job then mixes it with its group id, ``worker.derived_seed``).

    Returns:
        A partial settings document of ``service``.
    """
    role = role_of(service)
    redis: dict[str, Any] = {"redis_url": config.redis_url} if config.redis_url else {}
    # liveness of the service's loops (server.stall_s): the run's supervision policy
    # and the bound on one Redis reply (server.redis_reply_timeout_s)
    server: dict[str, Any] = {
        "stall_s": config.supervision.loop_stall_s,
        "redis_reply_timeout_s": config.supervision.redis_reply_timeout_s,
    }
    if role == "learner":
        learn = config.learner
        return {
            "server": server,
            **redis,
            "namespace": config.namespace,
            "batch_groups": learn.batch_groups,
            "publish_every": learn.publish_every,
            "checkpoint_every": learn.checkpoint_every,
            "max_steps": config.budget.steps,
            # temperature / max_response_length were derived from `generation` by RunConfig.
            "trainer": learn.trainer.model_dump(mode="json"),
            "algo": learn.algo.model_dump(mode="json"),
            "logging": config.logging.model_dump(mode="json"),  # run_name '' = the run dir's
            "lora": config.model.lora.model_dump(mode="json") if config.model.lora else None,
        }
    if role == "rollout-worker":
        gen = config.generation
        sampling: dict[str, Any] = {
            "temperature": gen.temperature,
            "top_p": gen.top_p,
            "max_new_tokens": gen.max_new_tokens,
            "seed": config.seed * 1000 + index + 1,
        }
        if gen.stop:
            sampling["stop"] = list(gen.stop)
        return {
            "server": server,
            **redis,
            "worker": {
                "namespace": config.namespace,
                "sampling": sampling,
                "max_rollout_lag": max(2 * gen.group_size * gen.prompts_ahead, 16),
                "reclaim_idle_ms": reclaim_idle_ms_for(config.assembler.group_deadline_s),
            },
        }
    if role == "assembler":
        return {
            "server": server,
            **redis,
            "namespace": config.namespace,
            "assembler": config.assembler.model_dump(mode="json"),
        }
    if role == "driver":
        return {
            "server": {**server, "grace_s": DRIVER_GRACE_S},
            "run": config.model_dump(mode="json"),
            "exit_when_done": True,
        }
    return {"server": server}


def extra_part(config: RunConfig, service: str) -> dict[str, Any]:
    """The run's free-form block for ``service`` (part 3): ``learner.extra``,
    ``generation.extra``, ``assembler_extra``, ``verifiers.extra[service]``; the driver has
    none (it gets the whole run)."""
    role = role_of(service)
    if role == "learner":
        return dict(config.learner.extra)
    if role == "rollout-worker":
        return dict(config.generation.extra)
    if role == "assembler":
        return dict(config.assembler_extra)
    if role == "verifier":
        return dict(config.verifiers.extra.get(service, {}))
    return {}


def flatten(doc: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted path -> leaf value of a nested mapping (an empty mapping is a leaf)."""
    out: dict[str, Any] = {}
    for key, value in doc.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, path + "."))
        else:
            out[path] = value
    return out


def _covered(path: str, keys: tuple[str, ...]) -> bool:
    return any(path == k or path.startswith(k + ".") for k in keys)


def check_placement(service: str, placement: Mapping[str, Any]) -> None:
    """Refuse a placement that sets a key the run decides (``PLACEMENT_KEYS``).

    Raises:
        InvalidArgumentError: names each offending dotted key and the keys allowed.
    """
    allowed = PLACEMENT_KEYS[role_of(service)]
    bad = sorted(p for p in flatten(placement) if not _covered(p, allowed))
    if bad:
        raise InvalidArgumentError(
            f"placement of {service} sets {', '.join(bad)}, which the run config decides "
            f"(a placement may set only {', '.join(allowed)}; put the value in the run config "
            "or the service's own config)"
        )


def service_settings(
    config: RunConfig,
    service: str,
    placement: Mapping[str, Any] | None = None,
    *,
    index: int = 0,
    overrides: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The settings document of ``service`` in the run ``config``: ``run_part``, then
    ``placement``, then ``extra_part``, then ``overrides`` (deep-merged; see the module
    docstring).

    Args:
        config: the resolved run (``resolve_run``).
        service: the ``grpo serve`` name.
        placement: what the deployment decides (keys of ``PLACEMENT_KEYS``).
        index: the rollout worker's index (its seed; see ``run_part``).
        overrides: merged last (the chart: a workload's own ``config:``).

    Returns:
        The document, not yet validated against the service's model (``load_settings`` /
        ``write_service_config`` do that).

    Raises:
        InvalidArgumentError: the placement sets a key the run decides; or, for a rollout
            worker, a reclaim delay that races the assembler's group deadline.
    """
    placement = placement or {}
    check_placement(service, placement)
    doc = deep_merge(run_part(config, service, index=index), placement)
    doc = deep_merge(doc, extra_part(config, service))
    doc = deep_merge(doc, overrides or {})
    if role_of(service) == "rollout-worker":
        try:
            check_reclaim_before_deadline(
                int(doc["worker"]["reclaim_idle_ms"]),
                config.assembler.group_deadline_s,
                "the rollout worker's worker.reclaim_idle_ms",
            )
        except ValueError as exc:
            raise InvalidArgumentError(str(exc)) from exc
    return doc


def _read_mapping(path: Path, what: str) -> dict[str, Any]:
    from grpo.errors import NotFoundError

    if not path.is_file():
        raise NotFoundError(f"{what} {path} does not exist")
    try:
        loaded = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise InvalidArgumentError(f"{what} {path} is not valid YAML: {exc}") from exc
    if not isinstance(loaded, dict):
        raise InvalidArgumentError(
            f"{what} {path} must hold a mapping, got {type(loaded).__name__}"
        )
    return loaded


def load_service_settings(
    service: str,
    settings_cls: type[BaseModel],
    run_config: Path,
    *,
    placement: Path | None = None,
    config_files: list[Path] | None = None,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> BaseModel:
    """A service's settings as a pod derives them (``grpo serve NAME --run-config``).

    The run config file is read as written (no ``GRPO_RUN_*`` variables: every pod of a
    release derives from the same file), ``service_settings`` builds the document with the
    placement file and the config files (merged in order, as ``overrides``), then
    ``load_settings`` applies the ``GRPO_*`` environment and ``overrides`` (CLI flags) and
    validates.

    Args:
        service: the ``grpo serve`` name; settings_cls: its settings model.
        run_config: YAML of a ``RunConfig`` (its ``namespace`` must be set).
        placement: YAML of the placement (``PLACEMENT_KEYS``); None = empty.
        config_files: YAML files merged last (the workload's own settings).
        overrides: dotted keys, highest precedence (CLI flags).
        environ: the environment (default ``os.environ``).

    Raises:
        NotFoundError: a file is missing. InvalidArgumentError: bad YAML, an invalid run
        config, a placement key the run decides, or invalid settings (each field named).
    """
    run = load_settings(RunConfig, run_config, environ={})
    run = resolve_run(run)
    where = _read_mapping(placement, "placement file") if placement is not None else {}
    own: dict[str, Any] = {}
    for path in config_files or []:
        own = deep_merge(own, _read_mapping(path, "config file"))
    doc = service_settings(run, service, where, overrides=own)
    return load_settings(settings_cls, None, overrides, environ=environ, base=doc)


def write_service_config(service: str, settings: Mapping[str, Any], path: Path) -> Path:
    """Validate ``settings`` against ``service``'s settings model, then write them as YAML.
    The model comes from ``registry.load_settings_cls``: the learner's without torch.

    Raises:
        InvalidArgumentError: the settings do not validate (the message names the fields).
        NotFoundError / ImportError: unknown service or its module cannot be imported.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(dict(settings), sort_keys=False))
    load_settings(load_settings_cls(service), path, environ={})
    return path
