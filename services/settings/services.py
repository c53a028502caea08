"""Per-service settings documents derived from a RunConfig (written as YAML into the run dir).

One function per service turns the run's sections into that service's settings mapping; each
mapping is validated against the service's own settings model before any process starts (a
typo fails fast with the service's field path), then written to ``<run_dir>/services/``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from grpo.errors import InvalidArgumentError
from grpo.services.runtime.config import deep_merge, load_settings
from grpo.services.runtime.registry import load_settings_cls
from grpo.services.settings.assembler import check_reclaim_before_deadline, reclaim_idle_ms_for
from grpo.services.settings.run import RunConfig

__all__ = [
    "DRIVER_GRACE_S",
    "assembler_settings",
    "driver_settings",
    "learner_settings",
    "rollout_worker_settings",
    "verifier_settings",
    "write_service_config",
]

_SERVER = {"host": "127.0.0.1", "metrics_port": -1, "grace_s": 5.0}


def _server(config: RunConfig) -> dict[str, Any]:
    """The ``server`` block of a local service: loopback, no metrics port, a short grace,
    and ``stall_s`` = ``supervision.loop_stall_s`` (liveness of its loops)."""
    return {**_SERVER, "stall_s": config.supervision.loop_stall_s}


def verifier_settings(config: RunConfig, service: str) -> dict[str, Any]:
    """Settings of a verifier service the run starts (``verifiers.extra[service]`` merged in;
    ``service`` as the config names it: a built-in name or ``module:SERVICE``)."""
    return deep_merge({"server": _server(config)}, config.verifiers.extra.get(service, {}))


def assembler_settings(
    config: RunConfig,
    *,
    redis_url: str,
    namespace: str,
    routing: Mapping[str, Mapping[str, Any]],
    group_log: Path,
    endpoint_tls: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Settings of the assembler: Redis, routing table (``VerifierPlan.routing``), assembly
    config, per-group log, and the TLS of the endpoints that have their own
    (``assembler.verifier.endpoint_tls``; ``VerifierPlan.endpoint_tls``)."""
    assembly = config.assembler.model_dump(mode="json")
    if endpoint_tls:
        assembly["verifier"]["endpoint_tls"] = {
            **assembly["verifier"].get("endpoint_tls", {}),
            **{
                address: tls if isinstance(tls, dict) else tls.model_dump(mode="json")
                for address, tls in endpoint_tls.items()
            },
        }
    base = {
        "server": _server(config),
        "redis_url": redis_url,
        "namespace": namespace,
        "routing": {k: dict(v) for k, v in routing.items()},
        "assembler": assembly,
        "group_log": str(group_log),
    }
    return deep_merge(base, config.assembler_extra)


def rollout_worker_settings(
    config: RunConfig, *, redis_url: str, namespace: str, model_path: Path | str, index: int
) -> dict[str, Any]:
    """Settings of rollout worker ``index``: backend on the warm-started model, sampling.

    Its reclaim delay (jobs a dead worker left pending) is derived from the assembler's group
    deadline (``reclaim_idle_ms_for``) unless ``generation.extra`` sets one.

    Raises:
        InvalidArgumentError: a reclaim delay that races the group deadline.
    """
    gen = config.generation
    sampling: dict[str, Any] = {
        "temperature": gen.temperature,
        "top_p": gen.top_p,
        "max_new_tokens": gen.max_new_tokens,
        "seed": config.seed * 1000 + index + 1,
    }
    if gen.stop:
        sampling["stop"] = list(gen.stop)
    base = {
        "server": _server(config),
        "redis_url": redis_url,
        "backend": {"model_path": str(model_path), "torch_threads": 1},
        "worker": {
            "namespace": namespace,
            "consumer": f"worker-{index}",
            "sampling": sampling,
            "max_rollout_lag": max(2 * gen.group_size * gen.prompts_ahead, 16),
            "reclaim_idle_ms": reclaim_idle_ms_for(config.assembler.group_deadline_s),
        },
    }
    out = deep_merge(base, gen.extra)
    try:
        check_reclaim_before_deadline(
            int(out["worker"]["reclaim_idle_ms"]),
            config.assembler.group_deadline_s,
            "generation.extra.worker.reclaim_idle_ms",
        )
    except ValueError as exc:
        raise InvalidArgumentError(str(exc)) from exc
    return out


def learner_settings(
    config: RunConfig, *, redis_url: str, namespace: str, model_path: Path | str, run_dir: Path
) -> dict[str, Any]:
    """Settings of the learner: model, run dir, batch/publish/checkpoint cadence, algorithm."""
    learn = config.learner
    base = {
        "server": _server(config),
        "redis_url": redis_url,
        "namespace": namespace,
        "model_path": str(model_path),
        "run_dir": str(run_dir),
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
    return deep_merge(base, learn.extra)


DRIVER_GRACE_S = 900.0
"""Seconds the driver may take after SIGTERM (Ctrl-C): the final evaluation and summary."""


def driver_settings(
    config: RunConfig,
    *,
    redis_url: str,
    namespace: str,
    out_dir: Path,
    learner_address: str,
    assembler_address: str,
    verifier_addresses: Mapping[str, str],
    initial_policy: Path | str,
    steps: int | None = None,
) -> dict[str, Any]:
    """Settings of the run driver (``grpo serve driver``): the run itself (with its Redis and
    namespace resolved), the services' addresses and the output folder."""
    run = config.model_dump(mode="json")
    run["redis_url"], run["namespace"] = redis_url, namespace
    return {
        "server": {**_server(config), "grace_s": DRIVER_GRACE_S},
        "run": run,
        "out_dir": str(out_dir),
        "learner_address": learner_address,
        "assembler_address": assembler_address,
        "verifier_addresses": dict(verifier_addresses),
        "initial_policy": str(initial_policy),
        "steps": steps or 0,
        "exit_when_done": True,
    }


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
