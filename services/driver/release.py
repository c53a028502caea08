"""Give the GPUs back when a run completes: the driver scales the run's GPU workloads to zero.

On Kubernetes the rollout workers (a Deployment) and the learner (a StatefulSet) would keep
their GPUs after the driver's Job completes: their controllers restart them. The driver, once
``summary.json`` is written, sets ``spec.replicas`` of each workload in
``ReleaseSettings.workloads`` to 0 through the ``scale`` subresource, with its pod's service
account token; the Helm chart binds that account to a Role that may only get and patch the
``scale`` of exactly those workloads (``services.driver.releaseOnComplete``). The learner's
claims stay (``persistentVolumeClaimRetentionPolicy: Retain``), so its checkpoints and
published weights remain. Under ``grpo run`` the list is empty: its processes stop with it.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from grpo.errors import FailedPreconditionError, UnavailableError

__all__ = ["ReleaseSettings", "WorkloadRef", "release_workloads"]

log = logging.getLogger(__name__)

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
"""Where the kubelet mounts a pod's service account token, CA bundle and namespace."""


class WorkloadRef(BaseModel):
    """One workload to scale to zero."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["Deployment", "StatefulSet"] = Field(..., description="Its kind (apps/v1).")
    name: str = Field(..., min_length=1, description="Its name in the namespace.")


class ReleaseSettings(BaseModel):
    """What the driver scales to zero once the run is complete."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    workloads: list[WorkloadRef] = Field(
        default_factory=list,
        description="Workloads scaled to 0 replicas once summary.json is written ([] = none: "
        "grpo run, or a release that keeps them).",
    )
    namespace: str = Field(
        default="",
        description="Their namespace; '' = the pod's own (the service account's namespace file).",
    )
    service_account_dir: Path = Field(
        default=SERVICE_ACCOUNT_DIR,
        description="The pod's service account mount (token, ca.crt, namespace); the API "
        "server is $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT.",
    )
    attempts: int = Field(
        default=5, ge=1, description="Tries per workload (1 s, 2 s, 4 s ... apart)."
    )


def _api(settings: ReleaseSettings):  # type: ignore[no-untyped-def]
    """An ``AppsV1Api`` with the pod's in-cluster credentials (the official client's loader,
    pointed at ``service_account_dir``)."""
    from kubernetes import client
    from kubernetes.config.config_exception import ConfigException
    from kubernetes.config.incluster_config import InClusterConfigLoader

    folder = settings.service_account_dir
    configuration = client.Configuration()
    try:
        InClusterConfigLoader(
            token_filename=str(folder / "token"), cert_filename=str(folder / "ca.crt")
        ).load_and_set(configuration)
    except ConfigException as exc:
        raise FailedPreconditionError(
            f"cannot release the run's workloads: no in-cluster credentials ({exc}); the "
            "driver's pod needs its service account token (automountServiceAccountToken)"
        ) from exc
    return client.AppsV1Api(client.ApiClient(configuration))


def _namespace(settings: ReleaseSettings) -> str:
    if settings.namespace:
        return settings.namespace
    path = settings.service_account_dir / "namespace"
    try:
        return path.read_text().strip()
    except OSError:
        namespace = os.environ.get("POD_NAMESPACE", "")
        if not namespace:
            raise FailedPreconditionError(
                f"cannot release the run's workloads: no namespace ({path} is unreadable and "
                "POD_NAMESPACE is unset)"
            ) from None
        return namespace


def release_workloads(settings: ReleaseSettings, *, sleep: float = 1.0) -> list[str]:
    """Scale every workload of ``settings`` to 0 replicas (the ``scale`` subresource).

    Args:
        settings: the workloads and where the credentials are.
        sleep: the first wait between tries (seconds; doubles per try).

    Returns:
        ``Kind/name`` of each workload scaled (in order); empty when there is none.

    Raises:
        FailedPreconditionError: no credentials or namespace in the pod.
        UnavailableError: a workload could not be scaled in ``attempts`` tries (the message
            holds the API server's answer: 403 means the Role does not allow it).
    """
    if not settings.workloads:
        return []
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    api = _api(settings)
    namespace = _namespace(settings)
    body = {"spec": {"replicas": 0}}
    done = []
    try:
        for ref in settings.workloads:
            patch = (
                api.patch_namespaced_deployment_scale
                if ref.kind == "Deployment"
                else api.patch_namespaced_stateful_set_scale
            )
            wait = sleep
            for attempt in range(1, settings.attempts + 1):
                try:
                    patch(ref.name, namespace, body)
                    break
                except (ApiException, HTTPError, OSError) as exc:
                    status = getattr(exc, "status", None)
                    if attempt == settings.attempts or status in (401, 403, 404):
                        raise UnavailableError(
                            f"cannot scale {ref.kind}/{ref.name} in {namespace} to 0: {exc}"
                        ) from exc
                    log.warning("scaling %s/%s to 0 failed (try %d): %s",
                                ref.kind, ref.name, attempt, exc)  # fmt: skip
                    time.sleep(wait)
                    wait *= 2
            log.info("released", extra={"workload": f"{ref.kind}/{ref.name}", "replicas": 0})
            done.append(f"{ref.kind}/{ref.name}")
    finally:
        api.api_client.close()
    return done
