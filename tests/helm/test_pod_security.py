"""The Pod Security Standards, version v1.35, applied to every pod the chart renders.

No cluster here, and no maintained Python implementation of the standard exists on PyPI, so
the controls are written out below from the published standard's field lists
(kubernetes.io/docs/concepts/security/pod-security-standards, policy version v1.35; the
reference implementation is k8s.io/pod-security-admission/policy). v1.35 is pinned because it
is the first version whose baseline admits ``procMount: Unmasked`` in a user-namespaced pod
(``hostUsers: false``), which the code verifier's bubblewrap mode needs for a fresh ``/proc``;
the same version relaxes restricted's runAsNonRoot / runAsUser for such pods. Before v1.35
(Kubernetes <= 1.34) baseline rejects Unmasked: docs/kubernetes.md says what to do there.

Every pod of the default values and of each documented mode of the code verifier must pass
baseline; restricted must hold for every pod but the code verifier's (bubblewrap: an
unmasked /proc; runtime: root with added capabilities), which is asserted too, so the day
either changes the test says so.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .test_chart import PREFIX, render

PSS_VERSION = (1, 35)

# Capabilities baseline allows adding (the container runtimes' default set).
BASELINE_CAPABILITIES = {
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
    "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
}  # fmt: skip
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem",
}  # fmt: skip
RESTRICTED_VOLUMES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
    "projected", "secret",
}  # fmt: skip
HOST_VOLUME_SOURCES = {"hostPath"}
APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"


def _containers(spec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for key in ("containers", "initContainers", "ephemeralContainers"):
        yield from spec.get(key) or []


def _userns(spec: dict[str, Any]) -> bool:
    """A user-namespaced pod (``hostUsers: false``), which v1.35 relaxes some controls for."""
    return spec.get("hostUsers") is False and PSS_VERSION >= (1, 35)


def baseline(meta: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    """Violations of the baseline policy (empty: admitted)."""
    bad: list[str] = []
    psc = spec.get("securityContext") or {}
    scs = [(c["name"], c.get("securityContext") or {}) for c in _containers(spec)]
    # HostProcess
    for where, ctx in [("pod", psc), *scs]:
        if (ctx.get("windowsOptions") or {}).get("hostProcess") is True:
            bad.append(f"{where}: windowsOptions.hostProcess")
    # Host namespaces
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(key) is True:
            bad.append(f"spec.{key}")
    # Privileged containers
    bad += [f"{n}: privileged" for n, sc in scs if sc.get("privileged") is True]
    # Capabilities
    for name, sc in scs:
        extra = set((sc.get("capabilities") or {}).get("add") or []) - BASELINE_CAPABILITIES
        if extra:
            bad.append(f"{name}: capabilities.add {sorted(extra)}")
    # HostPath volumes
    for volume in spec.get("volumes") or []:
        if HOST_VOLUME_SOURCES & set(volume):
            bad.append(f"volume {volume['name']}: hostPath")
    # Host ports
    for c in _containers(spec):
        for port in c.get("ports") or []:
            if port.get("hostPort", 0) != 0:
                bad.append(f"{c['name']}: hostPort {port['hostPort']}")
    # AppArmor (annotations and fields)
    for key, value in (meta.get("annotations") or {}).items():
        if key.startswith(APPARMOR_ANNOTATION) and not (
            value == "runtime/default" or value.startswith("localhost/")
        ):
            bad.append(f"annotation {key}={value}")
    for where, ctx in [("pod", psc), *scs]:
        kind = (ctx.get("appArmorProfile") or {}).get("type")
        if kind not in (None, "RuntimeDefault", "Localhost"):
            bad.append(f"{where}: appArmorProfile {kind}")
    # SELinux
    for where, ctx in [("pod", psc), *scs]:
        options = ctx.get("seLinuxOptions") or {}
        if options.get("type", "") not in SELINUX_TYPES:
            bad.append(f"{where}: seLinuxOptions.type {options['type']}")
        if options.get("user") or options.get("role"):
            bad.append(f"{where}: seLinuxOptions user/role")
    # /proc mount type (v1.35: anything in a user-namespaced pod)
    if not _userns(spec):
        for name, sc in scs:
            if sc.get("procMount", "Default") != "Default":
                bad.append(f"{name}: procMount {sc['procMount']}")
    # Seccomp
    for where, ctx in [("pod", psc), *scs]:
        if (ctx.get("seccompProfile") or {}).get("type") == "Unconfined":
            bad.append(f"{where}: seccompProfile Unconfined")
    # Sysctls
    for sysctl in psc.get("sysctls") or []:
        if sysctl["name"] not in SAFE_SYSCTLS:
            bad.append(f"sysctl {sysctl['name']}")
    return bad


def restricted(meta: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    """Violations of the restricted policy (baseline's included)."""
    bad = baseline(meta, spec)
    psc = spec.get("securityContext") or {}
    scs = [(c["name"], c.get("securityContext") or {}) for c in _containers(spec)]
    userns = _userns(spec)
    # Volume types
    for volume in spec.get("volumes") or []:
        sources = set(volume) - {"name"}
        if not sources <= RESTRICTED_VOLUMES:
            bad.append(f"volume {volume['name']}: {sorted(sources)}")
    # Privilege escalation
    for name, sc in scs:
        if sc.get("allowPrivilegeEscalation") is not False:
            bad.append(f"{name}: allowPrivilegeEscalation")
    # Running as non-root (v1.35: not checked in a user-namespaced pod)
    if not userns:
        pod_nonroot = psc.get("runAsNonRoot") is True
        for name, sc in scs:
            value = sc.get("runAsNonRoot")
            if value is False or (value is None and not pod_nonroot):
                bad.append(f"{name}: runAsNonRoot")
        # Running as non-root user
        for where, ctx in [("pod", psc), *scs]:
            if ctx.get("runAsUser") == 0:
                bad.append(f"{where}: runAsUser 0")
    # Seccomp: RuntimeDefault or Localhost, set on the pod or on every container
    pod_kind = (psc.get("seccompProfile") or {}).get("type")
    for name, sc in scs:
        kind = (sc.get("seccompProfile") or {}).get("type") or pod_kind
        if kind not in ("RuntimeDefault", "Localhost"):
            bad.append(f"{name}: seccompProfile {kind}")
    # Capabilities: drop ALL, add at most NET_BIND_SERVICE
    for name, sc in scs:
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            bad.append(f"{name}: capabilities.drop lacks ALL")
        extra = set(caps.get("add") or []) - {"NET_BIND_SERVICE"}
        if extra:
            bad.append(f"{name}: capabilities.add {sorted(extra)} (restricted)")
    # /proc mount type: Default, user namespace or not
    for name, sc in scs:
        if sc.get("procMount", "Default") != "Default":
            bad.append(f"{name}: procMount {sc['procMount']} (restricted)")
    return bad


def pods(objects: tuple[dict[str, Any], ...]) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """(metadata, spec) of every pod template rendered: Deployments, StatefulSets, Jobs, and
    any DaemonSet or bare Pod."""
    out = {}
    for obj in objects:
        if obj["kind"] in ("Deployment", "StatefulSet", "Job", "DaemonSet"):
            template = obj["spec"]["template"]
            out[obj["metadata"]["name"]] = (template.get("metadata") or {}, template["spec"])
        elif obj["kind"] == "Pod":
            out[obj["metadata"]["name"]] = (obj["metadata"], obj["spec"])
    return out


MODES = ["default", "code-gvisor"]  # bubblewrap (the default values), runtime (its example)
CODE = f"{PREFIX}-verifier-code"


@pytest.mark.parametrize("name", MODES)
def test_every_pod_is_admitted_by_baseline(name: str) -> None:
    found = pods(render(name)[1])
    assert CODE in found and f"{PREFIX}-redis" in found and len(found) >= 7
    assert {pod: baseline(*found[pod]) for pod in found} == {pod: [] for pod in found}


@pytest.mark.parametrize("name", MODES)
def test_restricted_holds_for_every_pod_but_the_code_verifier(name: str) -> None:
    found = pods(render(name)[1])
    others = {pod: restricted(*found[pod]) for pod in found if pod != CODE}
    assert others == {pod: [] for pod in others}
    why = restricted(*found[CODE])
    if name == "default":  # bubblewrap: a fresh /proc needs the unmasked one
        assert why == ["verifier-code: procMount Unmasked (restricted)"]
    else:  # runtime: root with the capabilities slot uids take
        assert "verifier-code: runAsNonRoot" in why and "pod: runAsUser 0" in why
        assert any("capabilities.add" in w for w in why)


def _pod(**spec: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    container = spec.pop("container", {})
    return {}, {"containers": [{"name": "c", **container}], **spec}


@pytest.mark.parametrize(
    ("pod", "level", "violation"),
    [
        (_pod(hostNetwork=True), baseline, "spec.hostNetwork"),
        (_pod(container={"securityContext": {"privileged": True}}), baseline, "c: privileged"),
        (
            _pod(container={"securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}),
            baseline,
            "c: capabilities.add ['SYS_ADMIN']",
        ),
        (_pod(volumes=[{"name": "h", "hostPath": {"path": "/"}}]), baseline, "volume h: hostPath"),
        (
            _pod(container={"ports": [{"containerPort": 1, "hostPort": 80}]}),
            baseline,
            "c: hostPort 80",
        ),
        (
            _pod(securityContext={"seccompProfile": {"type": "Unconfined"}}),
            baseline,
            "pod: seccompProfile Unconfined",
        ),
        (
            _pod(container={"securityContext": {"appArmorProfile": {"type": "Unconfined"}}}),
            baseline,
            "c: appArmorProfile Unconfined",
        ),
        (
            _pod(container={"securityContext": {"procMount": "Unmasked"}}),
            baseline,
            "c: procMount Unmasked",
        ),
        (
            _pod(securityContext={"seLinuxOptions": {"type": "spc_t"}}),
            baseline,
            "pod: seLinuxOptions.type spc_t",
        ),
        (
            _pod(securityContext={"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}),
            baseline,
            "sysctl kernel.msgmax",
        ),
        (_pod(), restricted, "c: allowPrivilegeEscalation"),
        (_pod(), restricted, "c: runAsNonRoot"),
        (_pod(), restricted, "c: seccompProfile None"),
        (_pod(), restricted, "c: capabilities.drop lacks ALL"),
        (
            _pod(volumes=[{"name": "n", "nfs": {"server": "x", "path": "/"}}]),
            restricted,
            "volume n: ['nfs']",
        ),
    ],
)
def test_each_control_catches_its_violation(pod: Any, level: Any, violation: str) -> None:
    """The checker is not vacuous: one violating pod per control."""
    assert violation in level(*pod)


def test_user_namespaced_pods_get_the_v1_35_relaxations() -> None:
    unmasked = {"securityContext": {"procMount": "Unmasked"}}
    assert baseline(*_pod(container=unmasked, hostUsers=False)) == []
    root = {"securityContext": {"runAsUser": 0, "runAsNonRoot": False}}
    assert not any("runAs" in v for v in restricted(*_pod(container=root, hostUsers=False)))
    assert "c: runAsNonRoot" in restricted(*_pod(container=root))
