"""The Helm chart, rendered offline with helm-python-sdk's Helm engine (no helm binary, no
cluster): lint, strict Kubernetes OpenAPI validation, schema rejections and the invariants of
the rendered objects, for the default values and several value sets."""

from __future__ import annotations

import base64
import copy
import functools
import json
import re
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
import yaml
from kubernetes.client import V1ObjectMeta, V1Service, V1ServicePort, V1ServiceSpec

from grpo.errors import InvalidArgumentError
from grpo.services.runtime.config import load_settings
from grpo.services.runtime.discovery import verifier_from_service
from grpo.services.runtime.registry import load_spec
from grpo.services.runtime.routing import RoutingTable
from grpo.services.runtime.server import ServerSettings
from grpo.services.settings.services import load_service_settings

CHART = Path(__file__).resolve().parents[2] / "helm" / "grpo-pipeline"
KUBE_LATEST = kubernetes_validate.utils.latest_version()  # newest schemas shipped (1.37 here)
KUBE_OLDEST = "1.30.0"  # Chart.yaml kubeVersion floor
RELEASE, NAMESPACE = "rl", "ml"
PREFIX = f"{RELEASE}-grpo-pipeline"
# no OpenAPI schema in kubernetes-validate (CRDs: Prometheus Operator, Security Profiles Operator)
CRD_KINDS = {"ServiceMonitor", "SeccompProfile"}

PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
JUDGE = {
    "serve": "",
    "image": {"repository": "ghcr.io/acme/judge-verifier", "tag": "1.2.0"},
    "args": ["--port", "50051"],
    "taskTypes": ["poetry", "math"],
    "replicas": 3,
    "resources": {
        "requests": {"cpu": "500m", "memory": "512Mi"},
        "limits": {"cpu": "1", "memory": "1Gi"},
    },
}
EVAL_PEER = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "eval"}}}
# A verifier running elsewhere (another language, another team's release): only routed to.
EXTERNAL = {
    "external": {"address": "verifier-js.judges.svc:50070", "egressTo": [EVAL_PEER]},
    "taskTypes": ["exact"],
}
# What an install must give: the run and the bundled Redis' password (or an existing Secret).
REQUIRED: dict[str, Any] = {
    "run": {"name": "chart-test", "data": {"train_size": 1000}},
    "redis": {"auth": {"password": "test-password-1"}},
}


def with_required(values: dict[str, Any] | None) -> dict[str, Any]:
    """``values`` over REQUIRED (nested mappings merged)."""
    from grpo.services.runtime.config import deep_merge

    return deep_merge(REQUIRED, values or {})


VALUE_SETS: dict[str, dict[str, Any] | None] = {
    "default": None,
    "external-redis": {
        "redis": {"external": {"url": "rediss://:s3cret@redis.example.com:6380/0", "port": 6380}}
    },
    "extra-verifier": {"verifiers": {"judge": JUDGE}},
    "external-verifier": {"verifiers": {"js": EXTERNAL}},
    "gpu-off": {
        "gpu": {"enabled": False},
        # a disabled verifier leaves no Deployment, Service or route behind
        "verifiers": {"code": {"autoscaling": {"enabled": False}}, "steps": {"enabled": False}},
    },
    "tls-on": {
        "tls": {"enabled": True, "cert": PEM, "key": PEM, "ca": PEM, "requireClientCert": True}
    },
    "shared-volume": {
        "weights": {"transfer": "sharedVolume", "sharedVolume": {"storageClassName": "nfs"}}
    },
    "data-parallel": {
        "services": {"learner": {"replicas": 3, "dataParallel": {"enabled": True}}},
        "networkPolicy": {"verifierFrom": [EVAL_PEER]},
        "verifierRouting": {"headless": False},
    },
    # the code verifier's isolation runtime (docs/sandbox.md): its documented values file
    "code-gvisor": yaml.safe_load((CHART / "examples" / "code-verifier-gvisor.yaml").read_text()),
    # every escape hatch at once (issue 33): scheduling, labels, volumes, identity, NCCL, Redis
    "escape-hatches": {
        "serviceAccount": {"annotations": {"iam.gke.io/gcp-service-account": "rl@p.iam"}},
        "redis": {
            "metrics": {"enabled": True},
            "nodeSelector": {"pool": "cpu"},
            "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
            "affinity": {"podAntiAffinity": {}},
            "priorityClassName": "rl-critical",
            "podLabels": {"team": "rl"},
        },
        "metrics": {"serviceMonitor": {"enabled": True}},
        "services": {
            "learner": {
                "priorityClassName": "rl-training",
                "schedulerName": "volcano",
                "podLabels": {"kueue.x-k8s.io/queue-name": "gpu-queue"},
                "nccl": {"socketIfname": "eth1", "ibHca": "mlx5", "debug": "WARN"},
                "extraVolumes": [
                    {"name": "models", "persistentVolumeClaim": {"claimName": "models"}}
                ],
                "extraVolumeMounts": [{"name": "models", "mountPath": "/models", "readOnly": True}],
                "tmpSizeLimit": "8Gi",
                "terminationGracePeriodSeconds": 900,
            },
            "driver": {
                "shmSizeLimit": "",
                "extraVolumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
                "extraVolumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
            },
        },
        "verifiers": {"math": {"tmpSizeLimit": "2Gi", "terminationGracePeriodSeconds": 45}},
    },
    # the initial policy from a model hub (token from a Secret), with a data-parallel learner
    "model-from-hub": {
        "initialModel": {
            "source": "hub",
            "hub": {"id": "Qwen/Qwen2.5-0.5B", "revision": "7ae5", "tokenSecret": {"name": "hf"}},
        },
        "services": {"learner": {"replicas": 2, "dataParallel": {"enabled": True}}},
    },
    "model-from-object-storage": {
        "initialModel": {
            "source": "objectStorage",
            "objectStorage": {
                "url": "s3://models/qwen-0.5b",
                "endpoint": "https://minio.storage.svc:9000",
                "credentialsSecret": {"name": "minio"},
            },
            "egressTo": [{"ipBlock": {"cidr": "10.30.0.0/16"}}],
            "egressPorts": [9000],
        },
    },
    "discovery-monitoring-gvisor": {
        "discovery": {"enabled": True},
        "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}}},
        "verifiers": {
            "code": {"runtimeClassName": "gvisor", "hostUsers": False, "procMount": "Unmasked"}
        },
        "redis": {"persistence": {"enabled": False}},
    },
}


def values_key(component: str) -> str:
    """The ``services`` key of a rendered component (``rollout-worker`` -> ``rolloutWorker``)."""
    return re.sub(r"-([a-z])", lambda m: m.group(1).upper(), component)


@functools.cache
def chart() -> helm.Chart:
    return helm.Chart.load(CHART)


@functools.cache
def render(name: str) -> tuple[dict[str, Any], tuple[dict[str, Any], ...]]:
    """(merged values, rendered objects) for a value set; cached across tests."""
    values = with_required(copy.deepcopy(VALUE_SETS[name]))
    merged = chart().merge_values(values)
    files = chart().render(values=values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    return merged, manifests(files)


def manifests(files: dict[str, str]) -> tuple[dict[str, Any], ...]:
    """The Kubernetes objects of rendered template files (NOTES.txt is not one)."""
    return tuple(
        doc
        for path, text in files.items()
        if path.endswith(".yaml")
        for doc in yaml.safe_load_all(text)
        if doc is not None
    )


def of_kind(objects: tuple[dict[str, Any], ...], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def workloads(objects: tuple[dict[str, Any], ...]) -> dict[str, dict[str, Any]]:
    """The pipeline's workloads: every Deployment, the learner's StatefulSet (not Redis) and
    the driver's Job."""
    out = of_kind(objects, "Deployment")
    sets = of_kind(objects, "StatefulSet")
    out.update((name, o) for name, o in sets.items() if name != f"{PREFIX}-redis")
    out.update(of_kind(objects, "Job"))
    return out


def config_files(objects: tuple[dict[str, Any], ...]) -> dict[str, dict[str, Any]]:
    cm = of_kind(objects, "ConfigMap")[f"{PREFIX}-config"]
    return {key: yaml.safe_load(text) for key, text in cm["data"].items()}


def enabled_verifiers(values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The verifiers the release deploys (enabled, not ``external``)."""
    return {n: v for n, v in enabled_routes(values).items() if not v.get("external")}


def enabled_routes(values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in values["verifiers"].items() if v.get("enabled", True)}


@pytest.mark.parametrize("name", list(VALUE_SETS))
def test_lint_is_clean(name: str) -> None:
    report = helm.lint(
        CHART, with_required(VALUE_SETS[name]), strict=True, kube_version=f"v{KUBE_LATEST}"
    )
    problems = [m for m in report["messages"] if m["severity"] >= 2] + report["errors"]
    assert problems == [], problems
    assert report["total_charts_linted"] == 1


@pytest.fixture(scope="module", autouse=True)
def _cached_openapi_schemas() -> Any:
    """kubernetes-validate re-reads its 1.8 MB definitions file on every call; memoise the
    reads (the parsed schemas are never modified) to keep the suite within its time budget."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(
            kubernetes_validate.utils,
            "schema_contents",
            functools.cache(kubernetes_validate.utils.schema_contents),
        )
        yield


@functools.cache
def openapi_errors(manifest_json: str, version: str) -> str | None:
    """Strict validation of one manifest (as JSON, so identical objects are checked once)."""
    obj = json.loads(manifest_json)
    try:
        kubernetes_validate.validate(obj, version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        where = ".".join(str(p) for p in exc.path)
        return f"{obj['kind']}/{obj['metadata']['name']} {where}: {exc.message}"
    return None


@pytest.mark.parametrize("name", list(VALUE_SETS))
def test_every_manifest_validates_strictly(name: str) -> None:
    _, objects = render(name)
    versions = [KUBE_LATEST, KUBE_OLDEST] if name == "default" else [KUBE_LATEST]
    errors = []
    for obj in objects:
        if obj["kind"] in CRD_KINDS:
            continue
        for version in versions:
            error = openapi_errors(json.dumps(obj, sort_keys=True), version)
            if error is not None:
                errors.append(error)
    assert errors == []
    kinds = {o["kind"] for o in objects}
    assert {"Deployment", "Service", "ConfigMap", "Secret", "NetworkPolicy", "ServiceAccount"} <= (
        kinds
    )


def test_install_notes_list_workloads_and_routes() -> None:
    files = chart().render(values=with_required(None), name=RELEASE, namespace=NAMESPACE)
    notes = files["grpo-pipeline/templates/NOTES.txt"]
    assert "- rollout-worker (grpo serve rollout-worker), Deployment" in notes
    assert "- learner (grpo serve learner), StatefulSet of 1" in notes
    code = f"dns:///{PREFIX}-verifier-code.{NAMESPACE}.svc.cluster.local:50051"
    assert f"- code: outcome [{code}]" in notes
    assert f"rollout-worker pulls every published version from {PREFIX}-learner-0." in notes
    assert f"bundled StatefulSet {PREFIX}-redis" in notes


def test_default_release_has_every_kind() -> None:
    _, objects = render("default")
    counts: dict[str, int] = {}
    for obj in objects:
        counts[obj["kind"]] = counts.get(obj["kind"], 0) + 1
    # 3 services + the driver + 3 verifiers; the learner and Redis are StatefulSets with their
    # own claims (volumeClaimTemplates): no shared PersistentVolumeClaim by default; the driver
    # is a Job (no Service, no PDB); the code verifier's seccomp profile is a SeccompProfile;
    # the driver's own ServiceAccount, Role and RoleBinding scale the GPU workloads to zero.
    assert counts == {
        "Pod": 1,  # `helm test`: one item on each verifier
        "Role": 1,
        "RoleBinding": 1,
        "ConfigMap": 1,
        "SeccompProfile": 1,
        "Deployment": 5,
        "HorizontalPodAutoscaler": 3,
        "Job": 1,
        "NetworkPolicy": 8,
        "PodDisruptionBudget": 5,
        "Secret": 1,
        "Service": 7,
        "ServiceAccount": 2,
        "StatefulSet": 2,
    }


@pytest.mark.parametrize("name", list(VALUE_SETS))
def test_deployments_have_probes_resources_and_hardened_security(name: str) -> None:
    values, objects = render(name)
    deployments = workloads(objects)
    assert deployments
    for dep_name, dep in deployments.items():
        pod = dep["spec"]["template"]["spec"]
        # the code verifier with isolation runtime runs candidates as slot uids: root in a
        # gVisor pod with the capabilities that takes (examples/code-verifier-gvisor.yaml)
        runtime = dep_name.endswith("-verifier-code") and name == "code-gvisor"
        assert pod["securityContext"]["runAsNonRoot"] is not runtime, dep_name
        # the API token only where the API is used: discovery, the driver's release
        assert pod["automountServiceAccountToken"] is (
            (dep_name.endswith("-assembler") and values["discovery"]["enabled"])
            or (
                dep["kind"] == "Job"
                and values["services"]["driver"]["releaseOnComplete"]["enabled"]
            )
        )
        (container,) = pod["containers"]
        sc = container["securityContext"]
        assert sc["runAsNonRoot"] is not runtime, dep_name
        assert sc["readOnlyRootFilesystem"] is True, dep_name
        assert sc["allowPrivilegeEscalation"] is False, dep_name
        caps = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETGID", "SETPCAP", "SETUID"]
        want = {"drop": ["ALL"], "add": caps} if runtime else {"drop": ["ALL"]}
        assert sc["capabilities"] == want, dep_name
        for kind in ("requests", "limits"):
            assert {"cpu", "memory"} <= set(container["resources"][kind]), (dep_name, kind)
        probes = {k: container[k] for k in ("startupProbe", "readinessProbe", "livenessProbe")}
        component = dep["metadata"]["labels"]["app.kubernetes.io/component"]
        is_verifier = component.startswith("verifier-")
        block = {} if is_verifier else values["services"][values_key(component)]
        service = "grpo.v1.Verifier" if is_verifier else block["grpcService"]
        if block.get("dataParallel", {}).get("enabled"):
            service = ""  # ranks > 0 of a data-parallel learner serve only health
        if not values["tls"]["enabled"]:
            # native gRPC probes on grpc.health.v1; liveness checks the whole server ("").
            assert probes["startupProbe"]["grpc"] == {"port": 50051, "service": service}
            assert probes["readinessProbe"]["grpc"] == {"port": 50051, "service": service}
            assert probes["livenessProbe"]["grpc"] == {"port": 50051, "service": ""}
        elif container.get("command", [None])[0] == "grpo":
            # kubelet gRPC probes cannot speak TLS: an exec health check over TLS instead.
            argv = probes["readinessProbe"]["exec"]["command"]
            assert argv[:2] == ["python", "-c"] and "grpc_health" in argv[2]
            assert argv[3:] == [
                "127.0.0.1:50051",
                service,
                f"{PREFIX}-{component}.{NAMESPACE}.svc",
                "/etc/grpo/tls",
            ]
        else:
            assert probes["readinessProbe"]["tcpSocket"] == {"port": 50051}


@pytest.mark.parametrize("name", list(VALUE_SETS))
def test_every_verifier_is_routed_and_discoverable(name: str) -> None:
    values, objects = render(name)
    files = config_files(objects)
    routing = files["routing.yaml"]
    assert files["assembler.placement.yaml"]["routing"] == routing
    table = RoutingTable.from_config(routing)  # the assembler's own parser accepts it
    services = of_kind(objects, "Service")
    verifiers = enabled_verifiers(values)
    assert verifiers
    headless = values["verifierRouting"]["headless"]
    for vname, spec in verifiers.items():
        svc_name = f"{PREFIX}-verifier-{vname}"
        address = f"{svc_name}.{NAMESPACE}.svc:50051"
        target = f"dns:///{svc_name}.{NAMESPACE}.svc.cluster.local:50051" if headless else address
        kind = spec.get("kind", "outcome")
        for task_type in spec["taskTypes"]:
            route = table.lookup(task_type)
            routed_as = (
                route.process
                if kind == "process"
                else [a for t in route.terms for a in t.addresses]
            )
            assert target in routed_as, (vname, task_type)
        discovered = tuple(
            t for t in spec["taskTypes"]
            if kind == "process" or target in table.lookup(t).outcome
        )  # a further (non-primary) reward is routed by the static table only  # fmt: skip
        # Headless: DNS answers with every pod, so the assembler balances calls over them.
        svc = services[svc_name]
        assert (svc["spec"].get("clusterIP") == "None") is headless
        # The Service carries the labels/annotations discovery reads, giving the same Service.
        if not discovered:
            assert "grpo.dev/verifier" not in svc["metadata"]["labels"]
            continue
        assert svc["metadata"]["labels"]["grpo.dev/verifier"] == "true"
        found = verifier_from_service(
            V1Service(
                metadata=V1ObjectMeta(
                    name=svc_name,
                    namespace=NAMESPACE,
                    annotations=svc["metadata"]["annotations"],
                ),
                spec=V1ServiceSpec(
                    ports=[
                        V1ServicePort(name=p["name"], port=p["port"]) for p in svc["spec"]["ports"]
                    ]
                ),
            )
        )
        assert (found.address, found.kind, found.task_types) == (address, kind, discovered)
    routed = {a for t in table.task_types() for a in table.lookup(t).addresses}
    if headless:
        fqdn = f"{NAMESPACE}.svc.cluster.local:50051"
        expected = {f"dns:///{PREFIX}-verifier-{v}.{fqdn}" for v in verifiers}
    else:
        expected = {f"{PREFIX}-verifier-{v}.{NAMESPACE}.svc:50051" for v in verifiers}
    expected |= {v["external"]["address"] for v in enabled_routes(values).values()
                 if v.get("external")}  # fmt: skip
    assert routed == expected


@functools.cache
def settings_class(serve: str) -> Any:
    return load_spec(serve).settings_cls


@pytest.mark.parametrize("name", list(VALUE_SETS))
def test_config_files_load_into_each_services_settings(name: str, tmp_path: Path) -> None:
    """Every rendered config file, with the environment the pod gets, is accepted by the
    settings model of the service its container runs (`grpo serve <name> --config ...`)."""
    values, objects = render(name)
    check_config_files(values, objects, tmp_path)


def pod_env(container: dict[str, Any]) -> dict[str, str]:
    """A container's environment as the kubelet gives it (Secret values stand in; the Redis
    URL expanded)."""
    env = {e["name"]: e.get("value", "from-a-secret") for e in container["env"]}
    if "REDIS_URL" in env:  # Kubernetes expands $(REDIS_PASSWORD) / $(REDIS_URL)
        env["REDIS_URL"] = "redis://:pw@redis:6379/0"
        if "GRPO_REDIS_URL" in env:
            env["GRPO_REDIS_URL"] = env["REDIS_URL"]
    return env


def effective_settings(
    objects: tuple[dict[str, Any], ...], workload: dict[str, Any], tmp_path: Path
) -> tuple[str, Any]:
    """(serve name, settings) of a workload's pod: its mounted ConfigMap files at the paths of
    its rendered command, loaded as `grpo serve` loads them, with the pod's environment."""
    files = config_files(objects)
    pod = workload["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    argv = container["command"]
    assert argv[:2] == ["grpo", "serve"], argv
    (volume,) = [v for v in pod["volumes"] if v["name"] == "config"]
    keys = {item["path"]: item["key"] for item in volume["configMap"]["items"]}
    mounts = {
        m["mountPath"]: keys[m["subPath"]]
        for m in container["volumeMounts"]
        if m["name"] == "config"
    }
    folder = tmp_path / workload["metadata"]["name"]
    folder.mkdir(parents=True, exist_ok=True)
    local: dict[str, Path] = {}
    for mount_path, key in mounts.items():
        local[mount_path] = folder / key
        local[mount_path].write_text(yaml.safe_dump(files[key]))
    opts = dict(zip(argv[3::2], argv[4::2], strict=True))
    serve = argv[2]
    settings = load_service_settings(
        serve,
        settings_class(serve),
        local[opts["--run-config"]],
        placement=local[opts["--placement"]],
        config_files=[local[opts["--config"]]],
        environ=pod_env(container),
    )
    return serve, settings


def check_config_files(
    values: dict[str, Any], objects: tuple[dict[str, Any], ...], tmp_path: Path
) -> None:
    deployments = workloads(objects)
    namespaces = set()
    checked = 0
    for dep in deployments.values():
        (container,) = dep["spec"]["template"]["spec"]["containers"]
        if container.get("command", [""])[0] != "grpo":
            continue  # a verifier with its own entrypoint reads its own config format
        _, settings = effective_settings(objects, dep, tmp_path)
        assert settings.server.port == 50051
        if hasattr(settings, "redis_url"):
            assert settings.redis_url == "redis://:pw@redis:6379/0"
        for holder in (settings, getattr(settings, "worker", None), getattr(settings, "run", None)):
            if holder is not None and hasattr(holder, "namespace"):
                namespaces.add(holder.namespace)
        checked += 1
    assert checked == sum(
        1
        for d in deployments.values()
        if d["spec"]["template"]["spec"]["containers"][0].get("command")
    )
    assert namespaces == {values["streamNamespace"]}  # every stream user agrees


def docs_yaml_blocks() -> list[dict[str, Any]]:
    text = (CHART.parents[1] / "docs" / "kubernetes.md").read_text()
    return [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", text, re.S)]


def test_docs_examples_are_valid_values(tmp_path: Path) -> None:
    """The values examples in docs/kubernetes.md pass the schema, and the install example
    renders configs every service accepts."""
    blocks = docs_yaml_blocks()
    assert len(blocks) >= 3
    for block in blocks:
        chart().validate_schema(block)
    install_example = blocks[0]
    merged = chart().merge_values(copy.deepcopy(install_example))
    files = chart().render(values=install_example, name=RELEASE, namespace=NAMESPACE)
    objects = manifests(files)
    errors = [
        openapi_errors(json.dumps(o, sort_keys=True), KUBE_LATEST)
        for o in objects
        if o["kind"] not in CRD_KINDS
    ]
    assert [e for e in errors if e is not None] == []
    check_config_files(merged, objects, tmp_path)
    worker = workloads(objects)[f"{PREFIX}-rollout-worker"]
    _, generation = effective_settings(objects, worker, tmp_path)
    assert generation.worker.namespace == "grpo"  # chart wiring kept beside user config
    assert generation.worker.sampling.max_new_tokens == 256
    assert generation.backend.dtype == "bfloat16"  # the workload's own config


@pytest.mark.parametrize("name", list(VALUE_SETS))
def test_server_config_is_valid_for_the_runtime(name: str) -> None:
    values, objects = render(name)
    files = config_files(objects)
    placements = {k: v for k, v in files.items() if k.endswith(".placement.yaml")}
    serving = [
        w
        for w in workloads(objects).values()
        if w["spec"]["template"]["spec"]["containers"][0].get("command", [""])[0] == "grpo"
    ]
    assert len(placements) == len(serving)  # a verifier with its own entrypoint has none
    for cfg in placements.values():
        server = ServerSettings.model_validate(cfg["server"])
        assert (server.host, server.port, server.metrics_port) == ("0.0.0.0", 50051, 9090)
        assert (server.tls_cert_file is not None) is values["tls"]["enabled"]


def test_network_policies() -> None:
    values, objects = render("default")
    policies = of_kind(objects, "NetworkPolicy")
    assembler_peer = {
        "podSelector": {
            "matchLabels": {
                "app.kubernetes.io/name": "grpo-pipeline",
                "app.kubernetes.io/instance": RELEASE,
                "grpo.dev/role": "assembler",
            }
        }
    }
    driver_peer = copy.deepcopy(assembler_peer)
    driver_peer["podSelector"]["matchLabels"]["grpo.dev/role"] = "driver"
    for vname in enabled_verifiers(values):
        spec = policies[f"{PREFIX}-verifier-{vname}"]["spec"]
        assert spec["policyTypes"] == ["Ingress", "Egress"]
        assert spec["egress"] == []  # verifiers are stateless: no egress at all by default
        grpc_rules = [
            r for r in spec["ingress"] if {"port": "grpc", "protocol": "TCP"} in r["ports"]
        ]
        # only the assembler calls, the driver (held-out code tasks) and `helm test`
        test_peer = copy.deepcopy(assembler_peer)
        test_peer["podSelector"]["matchLabels"]["grpo.dev/role"] = "helm-test"
        assert [r["from"] for r in grpc_rules] == [[assembler_peer, driver_peer, test_peer]]
        other = [r for r in spec["ingress"] if r not in grpc_rules]
        assert all(r["ports"] == [{"port": "metrics", "protocol": "TCP"}] for r in other)

    code = policies[f"{PREFIX}-verifier-code"]["spec"]
    assert "Egress" in code["policyTypes"] and code["egress"] == []

    redis = policies[f"{PREFIX}-redis"]["spec"]
    assert redis["egress"] == []
    (rule,) = redis["ingress"]
    assert rule["from"][0]["podSelector"]["matchLabels"]["grpo.dev/redis-client"] == "true"
    # exactly the pipeline services carry the Redis client label; verifiers never do
    clients = {
        d["metadata"]["labels"]["app.kubernetes.io/component"]
        for d in workloads(objects).values()
        if d["spec"]["template"]["metadata"]["labels"].get("grpo.dev/redis-client") == "true"
    }
    assert clients == {"rollout-worker", "assembler", "learner", "driver"}

    # the assembler may reach verifiers; generation may not
    def egress_roles(component: str) -> set[str]:
        rules = policies[f"{PREFIX}-{component}"]["spec"]["egress"]
        return {
            peer.get("podSelector", {}).get("matchLabels", {}).get("grpo.dev/role", "")
            for r in rules
            for peer in r.get("to", [])
        }

    assert "verifier" in egress_roles("assembler")
    assert "verifier" in egress_roles("driver")
    assert "verifier" not in egress_roles("rollout-worker")


def test_extra_verifier_is_one_values_entry() -> None:
    base_values, base = render("default")
    values, objects = render("extra-verifier")
    name = f"{PREFIX}-verifier-judge"
    added = {(o["kind"], o["metadata"]["name"]) for o in objects} - {
        (o["kind"], o["metadata"]["name"]) for o in base
    }
    # no autoscaling/pdb given: Deployment, Service and NetworkPolicy come from shared templates
    assert added == {("Deployment", name), ("Service", name), ("NetworkPolicy", name)}
    dep = of_kind(objects, "Deployment")[name]
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    assert dep["spec"]["replicas"] == 3
    assert container["image"] == "ghcr.io/acme/judge-verifier:1.2.0"
    assert "command" not in container and container["args"] == ["--port", "50051"]
    assert container["resources"] == JUDGE["resources"]
    assert not any(e["name"] == "REDIS_URL" for e in container["env"])  # never touches Redis
    table = RoutingTable.from_config(config_files(objects)["routing.yaml"])
    judge = f"dns:///{name}.{NAMESPACE}.svc.cluster.local:50051"
    assert table.lookup("poetry").outcome == (judge,)
    # a second outcome verifier of a task type is a weighted reward beside the primary (the
    # math verifier, primary: true), never balanced with it
    math = f"dns:///{PREFIX}-verifier-math.{NAMESPACE}.svc.cluster.local:50051"
    route = table.lookup("math")
    assert route.outcome == (math,) and route.name == "outcome" and route.weight == 1.0
    assert [(t.name, t.weight, t.addresses) for t in route.rewards] == [("judge", 1.0, (judge,))]
    assert base_values["verifiers"].keys() < values["verifiers"].keys()


def test_reward_weights_of_the_verifier_values_reach_the_assemblers_settings(
    tmp_path: Path,
) -> None:
    """``weight``, ``rewardName`` and ``primary`` of the verifier values, rendered into the
    assembler's placement and derived by ``grpo serve assembler --run-config ... --placement
    ...`` (the one derivation): the routing table the assembler scores with."""
    values = with_required({
        "verifiers": {
            "math": {"weight": 0.8, "rewardName": "correct"},
            "judge": {**JUDGE, "taskTypes": ["math", "gsm8k"], "weight": -0.25,
                      "rewardName": "style"},
            "fmt": {"external": {"address": "fmt.judges.svc:50070"}, "taskTypes": ["math"],
                    "weight": 0.2},
        },
    })  # fmt: skip
    objects = manifests(chart().render(values=values, name=RELEASE, namespace=NAMESPACE,
                                       is_install=True))  # fmt: skip
    assembler = workloads(objects)[f"{PREFIX}-assembler"]
    serve, settings = effective_settings(objects, assembler, tmp_path)
    assert serve == "assembler"
    table = RoutingTable.from_config({k: v.model_dump() for k, v in settings.routing.items()})
    host = f"{NAMESPACE}.svc.cluster.local:50051"
    math, judge = (f"dns:///{PREFIX}-verifier-{v}.{host}" for v in ("math", "judge"))
    for task_type, terms in {
        "math": [("correct", 0.8, (math,)), ("fmt", 0.2, ("fmt.judges.svc:50070",)),
                 ("style", -0.25, (judge,))],
        "gsm8k": [("correct", 0.8, (math,)), ("style", -0.25, (judge,))],
        "arith": [("correct", 0.8, (math,))],
    }.items():  # fmt: skip
        assert [(t.name, t.weight, t.addresses) for t in table.lookup(task_type).terms] == terms
    # the judge is a further reward of each of its task types: not labelled for discovery
    service = of_kind(objects, "Service")[f"{PREFIX}-verifier-judge"]
    assert "grpo.dev/verifier" not in service["metadata"]["labels"]
    # two outcome verifiers of a task type need one marked primary; weights are outcome-only
    for bad, message in [
        ({"math": {"primary": False}, "judge": {**JUDGE, "taskTypes": ["math"]}},
         "task type math has 2 outcome verifiers (judge, math) and 0 marked primary"),
        ({"steps": {"weight": 0.5}}, "verifiers.steps: weight, primary and rewardName apply to "
         "outcome verifiers"),
        ({"math": {"weight": "high"}}, "'/verifiers/math/weight'"),
    ]:  # fmt: skip
        refused = (helm.HelmValuesError, helm.HelmRenderError)  # schema; the template's fail
        with pytest.raises(refused, match=re.escape(message)):
            chart().render(values=with_required({"verifiers": bad}), name=RELEASE,
                           namespace=NAMESPACE, is_install=True)  # fmt: skip


def test_an_external_verifier_is_only_routed_and_reached() -> None:
    """``external: {address}``: no Deployment, Service or policy of its own; its routing
    entry, the assembler's and the driver's egress to its port (toward ``egressTo``), and
    plaintext to it even when the release's TLS would apply (its own ``tls`` otherwise)."""
    _, base = render("default")
    _, objects = render("external-verifier")
    assert {(o["kind"], o["metadata"]["name"]) for o in objects} == {
        (o["kind"], o["metadata"]["name"]) for o in base
    }
    files = config_files(objects)
    address = EXTERNAL["external"]["address"]
    assert RoutingTable.from_config(files["routing.yaml"]).lookup("exact").outcome == (address,)
    assert files["assembler.placement.yaml"]["assembler"]["verifier"]["endpoint_tls"] == {
        address: {"enabled": False}
    }
    policies = of_kind(objects, "NetworkPolicy")
    for component in ("assembler", "driver"):
        rules = policies[f"{PREFIX}-{component}"]["spec"]["egress"]
        assert {"ports": [{"port": 50070, "protocol": "TCP"}], "to": [EVAL_PEER]} in rules
    assert not any(
        r.get("ports") == [{"port": 50070, "protocol": "TCP"}]
        for r in policies[f"{PREFIX}-rollout-worker"]["spec"]["egress"]
    )
    with pytest.raises(helm.HelmValuesError, match="address"):
        chart().render(values={"verifiers": {"js": {"external": {}, "taskTypes": ["exact"]}}},
                       name=RELEASE, namespace=NAMESPACE, is_install=True)  # fmt: skip


def test_gpu_switch() -> None:
    _, on = render("default")
    _, off = render("gpu-off")
    assert f"{PREFIX}-verifier-steps" not in of_kind(off, "Service")
    assert RoutingTable.from_config(config_files(off)["routing.yaml"]).lookup("math").process == ()
    code = of_kind(off, "Deployment")[f"{PREFIX}-verifier-code"]
    assert code["spec"]["replicas"] == 2 and f"{PREFIX}-verifier-code" not in of_kind(
        off, "HorizontalPodAutoscaler"
    )
    assert config_files(off)["rollout-worker.placement.yaml"]["backend"]["device"] == "cpu"
    for objects, gpus in ((on, 1), (off, None)):
        for dep_name, dep in workloads(objects).items():
            pod = dep["spec"]["template"]["spec"]
            limit = pod["containers"][0]["resources"]["limits"].get("nvidia.com/gpu")
            wants_gpu = dep_name.endswith(("-rollout-worker", "-learner"))
            assert limit == (gpus if wants_gpu else None), dep_name
            assert ("tolerations" in pod) is (wants_gpu and gpus is not None), dep_name


def volumes_of(workload: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(volume name -> volume, volume name -> mount) of a workload's single container."""
    pod = workload["spec"]["template"]["spec"]
    mounts = {m["name"]: m for m in pod["containers"][0]["volumeMounts"]}
    return {v["name"]: v for v in pod["volumes"]}, mounts


@pytest.mark.parametrize("name", list(VALUE_SETS))
def test_no_read_write_many_unless_the_shared_volume_is_chosen(name: str) -> None:
    values, objects = render(name)

    def access_modes(node: Any) -> list[str]:  # every accessModes entry, at any depth
        if isinstance(node, dict):
            own = list(node.get("accessModes", []))
            return own + [m for v in node.values() for m in access_modes(v)]
        if isinstance(node, list):
            return [m for v in node for m in access_modes(v)]
        return []

    modes = access_modes(list(objects))
    assert "ReadWriteOnce" in modes  # the learner's (and Redis') claims
    shared = values["weights"]["transfer"] == "sharedVolume"
    assert ("ReadWriteMany" in modes) is shared, modes


def test_weights_travel_over_grpc_by_default() -> None:
    _, objects = render("default")
    learner = of_kind(objects, "StatefulSet")[f"{PREFIX}-learner"]
    assert learner["spec"]["serviceName"] == f"{PREFIX}-learner"
    assert learner["spec"]["podManagementPolicy"] == "Parallel"
    (claim,) = learner["spec"]["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "weights"
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert claim["spec"]["resources"]["requests"] == {"storage": "50Gi"}
    volumes, mounts = volumes_of(learner)
    assert "weights" not in volumes  # the claim template provides it, one claim per pod
    assert mounts["weights"] == {"name": "weights", "mountPath": "/var/lib/grpo", "readOnly": False}
    generation = of_kind(objects, "Deployment")[f"{PREFIX}-rollout-worker"]
    volumes, mounts = volumes_of(generation)
    assert "weights" not in volumes and "weights" not in mounts  # no shared volume at all
    assert volumes["weights-cache"] == {"name": "weights-cache", "emptyDir": {"sizeLimit": "40Gi"}}
    assert mounts["weights-cache"]["mountPath"] == "/var/cache/grpo-weights"
    # generation pulls from learner rank 0 through the learner's headless Service
    service = of_kind(objects, "Service")[f"{PREFIX}-learner"]["spec"]
    assert service["clusterIP"] == "None" and service["publishNotReadyAddresses"] is True
    pull = config_files(objects)["rollout-worker.placement.yaml"]["weights"]
    host = f"{PREFIX}-learner-0.{PREFIX}-learner.{NAMESPACE}.svc.cluster.local"
    cache = "/var/cache/grpo-weights"
    assert pull == {"mode": "grpc", "address": f"{host}:50051", "cache_dir": cache}
    _, tls = render("tls-on")
    pull = config_files(tls)["rollout-worker.placement.yaml"]["weights"]
    assert pull["tls_ca_file"] == "/etc/grpo/tls/ca.crt" and pull["tls_cert_file"]


def test_shared_volume_mode_mounts_one_claim() -> None:
    _, objects = render("shared-volume")
    claim = f"{PREFIX}-weights"
    pvc = of_kind(objects, "PersistentVolumeClaim")[claim]["spec"]
    assert pvc["accessModes"] == ["ReadWriteMany"] and pvc["storageClassName"] == "nfs"
    learner = of_kind(objects, "StatefulSet")[f"{PREFIX}-learner"]
    assert "volumeClaimTemplates" not in learner["spec"]
    generation = workloads(objects)[f"{PREFIX}-rollout-worker"]
    for workload, read_only in ((learner, False), (generation, True)):
        volumes, mounts = volumes_of(workload)
        assert volumes["weights"]["persistentVolumeClaim"] == {
            "claimName": claim,
            "readOnly": read_only,
        }
        assert mounts["weights"]["readOnly"] is read_only
    # shared_volume default
    assert "weights" not in config_files(objects)["rollout-worker.placement.yaml"]


def test_data_parallel_learner_spans_pods() -> None:
    _, objects = render("data-parallel")
    learner = of_kind(objects, "StatefulSet")[f"{PREFIX}-learner"]
    assert learner["spec"]["replicas"] == 3
    assert len(learner["spec"]["volumeClaimTemplates"]) == 1
    env = {e["name"]: e for e in learner["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["RANK"]["valueFrom"]["fieldRef"]["fieldPath"] == (
        "metadata.labels['apps.kubernetes.io/pod-index']"
    )
    assert env["WORLD_SIZE"]["value"] == "3" and env["MASTER_PORT"]["value"] == "29500"
    host = f"{PREFIX}-learner-0.{PREFIX}-learner.{NAMESPACE}.svc.cluster.local"
    assert env["MASTER_ADDR"]["value"] == host
    cfg = config_files(objects)["learner.placement.yaml"]
    assert (cfg["world_size"], cfg["dist_init"]) == (3, "env://")
    # ranks reach each other on any port (rendezvous, gloo/NCCL); nobody else gains access
    policy = of_kind(objects, "NetworkPolicy")[f"{PREFIX}-learner"]["spec"]
    ranks = {
        "podSelector": {
            "matchLabels": {
                "app.kubernetes.io/name": "grpo-pipeline",
                "app.kubernetes.io/instance": RELEASE,
                "app.kubernetes.io/component": "learner",
            }
        }
    }
    assert {"from": [ranks]} in policy["ingress"] and {"to": [ranks]} in policy["egress"]
    _, single = render("default")
    single_policy = of_kind(single, "NetworkPolicy")[f"{PREFIX}-learner"]["spec"]
    assert {"from": [ranks]} not in single_policy["ingress"]
    assert "world_size" not in config_files(single)["learner.placement.yaml"]


def test_evaluation_peers_may_call_the_verifiers() -> None:
    _, objects = render("data-parallel")
    policies = of_kind(objects, "NetworkPolicy")
    for vname in ("math", "steps", "code"):
        spec = policies[f"{PREFIX}-verifier-{vname}"]["spec"]
        (grpc_rule,) = [r for r in spec["ingress"] if r["ports"][0]["port"] == "grpc"]
        assert grpc_rule["from"][3:] == [EVAL_PEER]  # after the assembler, driver, helm test
        assert spec["egress"] == []
    # the allowance is for verifiers only
    generation = policies[f"{PREFIX}-rollout-worker"]["spec"]
    assert EVAL_PEER not in [p for r in generation["ingress"] for p in r.get("from", [])]


def test_external_redis_replaces_the_statefulset() -> None:
    _, objects = render("external-redis")
    assert set(of_kind(objects, "StatefulSet")) == {f"{PREFIX}-learner"}
    secret = of_kind(objects, "Secret")[f"{PREFIX}-redis"]
    assert "redis-url" in secret["data"]
    for dep in workloads(objects).values():
        env = {e["name"]: e for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]}
        if dep["spec"]["template"]["metadata"]["labels"].get("grpo.dev/redis-client"):
            ref = env["REDIS_URL"]["valueFrom"]["secretKeyRef"]
            assert ref == {"name": f"{PREFIX}-redis", "key": "redis-url"}
    egress = of_kind(objects, "NetworkPolicy")[f"{PREFIX}-assembler"]["spec"]["egress"]
    assert {"port": 6380, "protocol": "TCP"} in [p for r in egress for p in r.get("ports", [])]

    _, default = render("default")
    redis = of_kind(default, "StatefulSet")[f"{PREFIX}-redis"]
    (container,) = redis["spec"]["template"]["spec"]["containers"]
    assert "--requirepass" in container["args"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert redis["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"] == {
        "storage": "8Gi"
    }
    assembler = of_kind(default, "Deployment")[f"{PREFIX}-assembler"]
    env = {e["name"]: e for e in assembler["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["REDIS_URL"]["value"] == f"redis://:$(REDIS_PASSWORD)@{PREFIX}-redis:6379/0"


def test_tls_discovery_and_monitoring_options() -> None:
    _, tls = render("tls-on")
    secret = of_kind(tls, "Secret")[f"{PREFIX}-tls"]
    assert secret["type"] == "kubernetes.io/tls"
    assert set(secret["data"]) == {"tls.crt", "tls.key", "ca.crt"}
    server = config_files(tls)["verifier-math.placement.yaml"]["server"]
    assert server["tls_client_ca_file"] == "/etc/grpo/tls/ca.crt"

    _, objects = render("discovery-monitoring-gvisor")
    assert set(of_kind(objects, "Role")) == {f"{PREFIX}-discovery", f"{PREFIX}-driver"}
    rules = of_kind(objects, "Role")[f"{PREFIX}-discovery"]["rules"]
    assert rules == [
        {"apiGroups": [""], "resources": ["services"], "verbs": ["get", "list", "watch"]}
    ]
    binding = of_kind(objects, "RoleBinding")[f"{PREFIX}-discovery"]
    assert binding["subjects"][0]["name"] == f"{PREFIX}-discovery"
    deps = of_kind(objects, "Deployment")
    assert deps[f"{PREFIX}-assembler"]["spec"]["template"]["spec"]["serviceAccountName"] == (
        f"{PREFIX}-discovery"
    )
    discovery = config_files(objects)["assembler.placement.yaml"]["discovery"]
    assert discovery["enabled"] is True and discovery["namespace"] == NAMESPACE
    code = deps[f"{PREFIX}-verifier-code"]["spec"]["template"]["spec"]
    assert code["runtimeClassName"] == "gvisor"
    assert code["hostUsers"] is False
    assert code["containers"][0]["securityContext"]["procMount"] == "Unmasked"
    _, default = render("default")
    default_code = of_kind(default, "Deployment")[f"{PREFIX}-verifier-code"]["spec"]["template"]
    assert default_code["spec"]["hostUsers"] is False
    assert "runtimeClassName" not in default_code["spec"]
    # bubblewrap needs namespaces: the chart's Localhost profile, shipped through the Security
    # Profiles Operator, for this pod only; still non-root
    assert default_code["spec"]["securityContext"]["seccompProfile"] == {
        "type": "Localhost",
        "localhostProfile": f"operator/{NAMESPACE}/grpo-code-sandbox.json",
    }
    (profile,) = of_kind(default, "SeccompProfile").values()
    shipped = json.loads((CHART / "files" / "code-sandbox-seccomp.json").read_text())
    assert profile["metadata"] == {
        "name": "grpo-code-sandbox",
        "namespace": NAMESPACE,
        "labels": profile["metadata"]["labels"],
    }
    assert profile["spec"] == shipped
    assert not of_kind(render("code-gvisor")[1], "SeccompProfile")
    math = of_kind(default, "Deployment")[f"{PREFIX}-verifier-math"]["spec"]["template"]["spec"]
    assert math["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (monitor,) = of_kind(objects, "ServiceMonitor").values()
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"]["endpoints"] == [
        {"port": "metrics", "path": "/metrics", "interval": "30s"}
    ]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"verifiers": {"math": {"replicas": -1}}}, "at '/verifiers/math/replicas': minimum"),
        (
            {"services": {"assembler": {"replica": 2}}},
            "'/services/assembler': additional properties 'replica'",
        ),
        (
            {"services": {"scorer": {"image": {"repository": "x"}}}},
            "additional properties 'scorer'",
        ),
        (
            {"verifiers": {"judge": {"taskTypes": ["poetry"]}}},
            "'/verifiers/judge': missing property 'image'",
        ),
        (
            {"verifiers": {"judge": {"image": {"tag": "1"}, "taskTypes": ["p"]}}},
            "'/verifiers/judge/image': missing property 'repository'",
        ),
        ({"verifiers": {"judge": {"image": {"repository": "j"}}}}, "missing property 'taskTypes'"),
        (
            {"verifiers": {"math": {"kind": "judge"}}},
            "'/verifiers/math/kind': value must be one of",
        ),
        ({"verifiers": {"Bad_Name": JUDGE}}, "'/verifiers': additional properties 'Bad_Name'"),
        ({"tls": {"enabled": True}}, "'/tls/cert'"),
        ({"redis": {"external": {"url": "http://redis:6379"}}}, "'/redis/external/url'"),
        ({"redis": {"auth": {"password": "p@ss"}}}, "'/redis/auth/password'"),
        (
            {"defaults": {"securityContext": {"readOnlyRootFilesystem": False}}},
            "'/defaults/securityContext",
        ),
        # two learners on one run dir: only as data-parallel ranks
        ({"services": {"learner": {"replicas": 2}}}, "'/services/learner/dataParallel/enabled'"),
        ({"services": {"rolloutWorker": {"dataParallel": {"enabled": True}}}}, "dataParallel"),
        ({"weights": {"transfer": "nfs"}}, "'/weights/transfer'"),
        ({"weights": {"accessModes": ["ReadWriteMany"]}}, "additional properties 'accessModes'"),
        # `config:` is checked against the settings model of the block's `serve` (render time)
        (
            {"services": {"learner": {"config": {"batch_group": 3}}}},
            "'/services/learner/config': additional properties 'batch_group'",
        ),
        (
            {"services": {"learner": {"config": {"trainer": {"lr": "fast"}}}}},
            "'/services/learner/config/trainer/lr': got string, want number",
        ),
        (
            {"services": {"rolloutWorker": {"config": {"weights": {"mode": "ftp"}}}}},
            "'/services/rolloutWorker/config/weights/mode': value must be one of",
        ),
        (
            {"services": {"rolloutWorker": {"serve": "generation", "config": {"worker": {}}}}},
            "'/services/rolloutWorker/config': additional properties 'worker'",
        ),
        (
            {"verifiers": {"code": {"config": {"verifier": {"sandbox": {"mirror": "/x"}}}}}},
            "'/verifiers/code/config/verifier/sandbox': additional properties 'mirror'",
        ),
    ],
)
def test_schema_rejects_bad_values_naming_the_key(values: dict[str, Any], message: str) -> None:
    with pytest.raises(helm.HelmValuesError) as excinfo:
        chart().validate_schema(values)
    assert message in str(excinfo.value)
    with pytest.raises(helm.HelmValuesError):  # install/render refuses them too
        chart().render(values=values, name=RELEASE, namespace=NAMESPACE)


def test_service_config_schema_is_generated_from_the_settings_models() -> None:
    """values.schema.json's settings part equals a fresh `make chart-schema` (no drift), and it
    accepts each service's real defaults while the chart's own wiring keeps rendering."""
    import importlib.util

    path = CHART.parents[1] / "scripts" / "chart_schema.py"
    spec = importlib.util.spec_from_file_location("chart_schema", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    current = (CHART / "values.schema.json").read_text()
    assert module.render(json.loads(current)) == current, "stale schema: run make chart-schema"
    defs = json.loads(current)["$defs"]
    from grpo.services.runtime.registry import service_names

    for serve in service_names():
        assert f"settings.{serve}" in defs, serve
    # a full, valid settings document of a service passes as its block's config
    learner = settings_class("learner")(model_path="/m").model_dump(mode="json")
    chart().validate_schema({"services": {"learner": {"config": learner}}})


# Blocks whose content is defined elsewhere, documented by the block's comment: Kubernetes
# objects (their fields) and `config` (the service's snake_case settings).
K8S_BLOCKS = {
    "podSecurityContext",
    "securityContext",
    "resources",
    "tolerations",
    "egressTo",
    "dnsTo",
    "metricsFrom",
    "apiServerEgressTo",
    "nodeSelector",
    "seccompProfile",
    "appArmorProfile",
    "env",
    "config",
    "run",  # a RunConfig: snake_case settings (grpo.services.settings.run)
    "volume",  # a Kubernetes volume source
}


def test_values_keys_are_camel_case_and_commented() -> None:
    lines = (CHART / "values.yaml").read_text().splitlines()
    stack: list[tuple[int, str]] = []  # (indent, key) of the enclosing keys
    for i, line in enumerate(lines):
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "-")) or ":" not in stripped:
            continue
        indent = len(line) - len(line.lstrip())
        while stack and stack[-1][0] >= indent:
            stack.pop()
        key = stripped.split(":", 1)[0]
        inside_k8s = any(k in K8S_BLOCKS for _, k in stack)
        stack.append((indent, key))
        if inside_k8s:
            continue
        assert key[0].islower() and "_" not in key and "-" not in key, (
            f"values.yaml:{i + 1}: key {key!r} is not camelCase"
        )
        assert lines[i - 1].strip().startswith("#"), f"values.yaml:{i + 1}: {key!r} has no comment"


# ---------------------------------------------------------------------------- one derivation
SHIPPED_CONFIGS = sorted((CHART.parents[1] / "configs").glob("*.yaml"))


def grpo_run_settings(run: Any, service: str, redis_url: str) -> dict[str, Any]:
    """What `grpo run` gives ``service`` for ``run`` (grpo.local.cluster's placement and the
    one derivation), validated and dumped; loopback addresses stand in for started services."""
    from grpo.local.cluster import local_placement
    from grpo.services.settings.services import resolve_run, service_settings
    from grpo.services.settings.verifiers import plan_verifiers

    plan = plan_verifiers(run.verifiers, ["arith"])
    names = ["learner", "assembler", *plan.services()]
    addresses = {n: f"127.0.0.1:{50100 + i}" for i, n in enumerate(names)}
    placement = local_placement(
        service,
        run_dir=Path("/runs/x"),
        model=Path("/runs/x/model/sft"),
        addresses=addresses,
        routing=plan.routing(addresses.__getitem__),
        endpoint_tls={a: t.model_dump(mode="json") for a, t in plan.endpoint_tls().items()},
        verifier_addresses={n: addresses[n] for n in plan.services()},
        initial_policy=Path("/runs/x/model/sft"),
    )
    resolved = resolve_run(run, namespace="grpo", redis_url=redis_url)
    doc = service_settings(resolved, service, placement)
    return load_settings(settings_class(service), None, environ={}, base=doc).model_dump(
        mode="json"
    )


def differences(service: str, chart: dict[str, Any], local: dict[str, Any], own: Any) -> list[str]:
    """Dotted keys whose values differ, except what the deployment decides (its placement:
    PLACEMENT_KEYS, and the driver's run.redis_url / run.model.path, which resolve_run and the
    chart resolve each their way) and the workload's own `config:` values."""
    from grpo.services.settings.services import PLACEMENT_KEYS, flatten, role_of

    skip = list(PLACEMENT_KEYS[role_of(service)]) + list(flatten(own or {}))
    if service == "driver":
        skip += ["run.redis_url", "run.model.path"]
    a, b = flatten(chart), flatten(local)
    return [
        f"{k}: chart {a.get(k)!r} != grpo run {b.get(k)!r}"
        for k in sorted(set(a) | set(b))
        if not any(k == s or k.startswith(s + ".") for s in skip) and a.get(k) != b.get(k)
    ]


@pytest.mark.parametrize("config", SHIPPED_CONFIGS, ids=lambda p: p.stem)
def test_every_service_gets_grpo_runs_settings_from_a_shipped_config(
    config: Path, tmp_path: Path
) -> None:
    """The chart with `run:` = a shipped run config: every pod's effective settings (its
    mounted files loaded as `grpo serve --run-config` loads them) equal what `grpo run` gives
    that service for the same file, key by key, but for what each deployment places."""
    from grpo.services.settings.run import load_run_config

    run = load_run_config(config, environ={})
    values = {**REQUIRED, "run": yaml.safe_load(config.read_text()), "gpu": {"enabled": False}}
    files = chart().render(values=copy.deepcopy(values), name=RELEASE, namespace=NAMESPACE)
    objects = manifests(files)
    merged = chart().merge_values(copy.deepcopy(values))
    from grpo.services.settings.verifiers import plan_verifiers

    started = {"learner", "assembler", "rollout-worker", "driver"}
    started |= set(plan_verifiers(run.verifiers, ["arith"]).services())
    compared = set()
    for workload in workloads(objects).values():
        serve, settings = effective_settings(objects, workload, tmp_path)
        component = workload["metadata"]["labels"]["app.kubernetes.io/component"]
        is_verifier = component.startswith("verifier-")
        block = (
            merged["verifiers"][component.removeprefix("verifier-")]
            if is_verifier
            else merged["services"][values_key(component)]
        )
        if serve not in started:
            continue  # a verifier of the chart that this run does not use
        local = grpo_run_settings(run, serve, settings.model_dump(mode="json").get("redis_url"))
        diff = differences(serve, settings.model_dump(mode="json"), local, block.get("config"))
        assert diff == [], (config.name, serve, diff)
        compared.add(serve)
    assert started == compared


def test_the_comparison_sees_a_derivation_the_chart_makes_itself(tmp_path: Path) -> None:
    """A chart that writes a key the run decides into a placement (as the chart's own
    derivation did: max_rollout_lag 512 and a 60 s reclaim delay where grpo run derived 64
    and 75 s) is refused by `grpo serve`; a workload's own `config:` is not, and the
    comparison reports the difference it makes."""
    from grpo.services.settings.run import RunConfig

    run = RunConfig(data={"train_size": 100})  # G, prompts_ahead, group deadline: defaults
    values = {**REQUIRED, "run": {"data": {"train_size": 100}}, "gpu": {"enabled": False}}
    objects = manifests(chart().render(values=values, name=RELEASE, namespace=NAMESPACE))
    cm = of_kind(objects, "ConfigMap")[f"{PREFIX}-config"]
    placement = yaml.safe_load(cm["data"]["rollout-worker.placement.yaml"])
    placement["worker"] = {"max_rollout_lag": 512, "reclaim_idle_ms": 60000}
    cm["data"]["rollout-worker.placement.yaml"] = yaml.safe_dump(placement)
    worker = workloads(objects)[f"{PREFIX}-rollout-worker"]
    with pytest.raises(InvalidArgumentError, match=r"worker\.max_rollout_lag, worker\.reclaim"):
        effective_settings(objects, worker, tmp_path)
    cm["data"]["rollout-worker.placement.yaml"] = yaml.safe_dump(
        {k: v for k, v in placement.items() if k != "worker"}
    )
    cm["data"]["rollout-worker.yaml"] = yaml.safe_dump({"worker": {"max_rollout_lag": 512}})
    serve, settings = effective_settings(objects, worker, tmp_path)
    local = grpo_run_settings(run, serve, settings.redis_url)
    assert local["worker"]["max_rollout_lag"] == 64  # 2 x G 8 x prompts_ahead 4
    assert local["worker"]["reclaim_idle_ms"] == 75000 == settings.worker.reclaim_idle_ms
    assert differences(serve, settings.model_dump(mode="json"), local, None) == [
        "worker.max_rollout_lag: chart 512 != grpo run 64"
    ]


def test_two_renders_give_identical_secrets_and_the_password_is_required() -> None:
    """No generated Redis password (no `lookup`, no randAlphaNum): `helm template` twice gives
    the same Secrets, so a GitOps sync changes nothing; without a password or an existing
    Secret the render fails naming both keys; an existing Secret renders none."""

    def secrets(values: dict[str, Any]) -> list[dict[str, Any]]:
        files = chart().render(values=values, name=RELEASE, namespace=NAMESPACE)
        return [o for o in manifests(files) if o["kind"] == "Secret"]

    first = secrets(with_required({"tls": VALUE_SETS["tls-on"]["tls"]}))  # type: ignore[index]
    second = secrets(with_required({"tls": VALUE_SETS["tls-on"]["tls"]}))  # type: ignore[index]
    assert len(first) == 2 and first == second
    (redis,) = [o for o in first if o["metadata"]["name"] == f"{PREFIX}-redis"]
    assert base64.b64decode(redis["data"]["redis-password"]).decode() == "test-password-1"
    templates = "".join(p.read_text() for p in (CHART / "templates").rglob("*") if p.is_file())
    assert "lookup" not in templates and "randAlpha" not in templates
    no_password = copy.deepcopy(REQUIRED)
    no_password["redis"]["auth"]["password"] = ""
    required = r"redis\.auth\.password or redis\.auth\.existingSecret"
    with pytest.raises(helm.HelmError, match=required):
        chart().render(values=no_password, name=RELEASE, namespace=NAMESPACE)
    existing = copy.deepcopy(no_password)
    existing["redis"]["auth"]["existingSecret"] = "my-redis"
    assert [o["metadata"]["name"] for o in secrets(existing)] == []
    with pytest.raises(helm.HelmError, match="run is required"):
        chart().render(values={"redis": REQUIRED["redis"]}, name=RELEASE, namespace=NAMESPACE)


def config_checksums(values: dict[str, Any]) -> dict[str, str]:
    """checksum/config of every workload's pod template, by component (the driver's Job is
    named after its template: ``job`` holds that name)."""
    files = chart().render(values=with_required(values), name=RELEASE, namespace=NAMESPACE)
    out = {}
    for name, w in workloads(manifests(files)).items():
        component = w["metadata"]["labels"]["app.kubernetes.io/component"]
        out[f"{PREFIX}-{component}"] = w["spec"]["template"]["metadata"]["annotations"][
            "checksum/config"
        ]
        if w["kind"] == "Job":
            out["job"] = name
    return out


def test_editing_one_workloads_config_changes_only_its_checksum() -> None:
    """Each pod's checksum covers what it derives its settings from: its own files, and the
    whole run for the pipeline services but only its own run.verifiers.extra entry for a
    verifier. So a verifier's edit restarts that verifier only, never the learner or the
    rollout workers."""
    base = config_checksums({})
    assert all(base.values()) and len(set(base.values())) == len(base)
    assert re.fullmatch(rf"{PREFIX}-driver-[0-9a-f]{{8}}", base["job"])

    def changed(values: dict[str, Any]) -> set[str]:
        now = config_checksums(values)
        return {name.removeprefix(PREFIX + "-") for name in base if now[name] != base[name]}

    math = {"verifiers": {"math": {"config": {"scoring": {"max_batch_items": 64}}}}}
    assert changed(math) == {"verifier-math"}
    entry = {"verifier-steps": {"scoring": {"max_batch_items": 8}}}
    # its entry in the run: it, and the driver, whose settings hold the whole run (a new Job
    # takes the run over); never the learner, the rollout worker or the assembler
    assert changed({"run": {"verifiers": {"extra": entry}}}) == {"verifier-steps", "driver", "job"}
    # ... which holds because no other service's derivation reads verifiers.extra
    from grpo.services.settings.run import RunConfig
    from grpo.services.settings.services import service_settings

    plain = RunConfig.model_validate(REQUIRED["run"])
    extra = RunConfig.model_validate({**REQUIRED["run"], "verifiers": {"extra": entry}})
    for service in ("learner", "rollout-worker", "assembler", "verifier-math"):
        assert service_settings(plain, service) == service_settings(extra, service), service
    learner = {"services": {"learner": {"config": {"keep_weights": 2}}}}
    assert changed(learner) == {"learner"}
    run = {"run": {"learner": {"batch_groups": 4}}}
    # the driver's Job is immutable: a new template is a new Job (its driver takes over)
    assert changed(run) == {"learner", "rollout-worker", "assembler", "driver", "job"}
    assert changed({"image": {"tag": "0.1.1"}}) == {"job"}  # pods restart for the image


def test_escape_hatches_render_where_they_belong() -> None:
    """Each escape hatch of the "escape-hatches" values lands in the object it names (the value
    set also passes lint and strict OpenAPI validation above); the chart's own labels win."""
    _, objects = render("escape-hatches")
    learner = of_kind(objects, "StatefulSet")[f"{PREFIX}-learner"]["spec"]["template"]
    pod = learner["spec"]
    assert (pod["priorityClassName"], pod["schedulerName"]) == ("rl-training", "volcano")
    assert learner["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu-queue"
    assert learner["metadata"]["labels"]["app.kubernetes.io/component"] == "learner"
    (container,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["NCCL_SOCKET_IFNAME"] == env["GLOO_SOCKET_IFNAME"] == "eth1"
    assert (env["NCCL_IB_HCA"], env["NCCL_DEBUG"]) == ("mlx5", "WARN")
    volumes, mounts = volumes_of(of_kind(objects, "StatefulSet")[f"{PREFIX}-learner"])
    assert volumes["models"]["persistentVolumeClaim"] == {"claimName": "models"}
    assert mounts["models"] == {"name": "models", "mountPath": "/models", "readOnly": True}
    assert volumes["tmp"]["emptyDir"] == {"sizeLimit": "8Gi"}
    assert pod["terminationGracePeriodSeconds"] == 900
    # /dev/shm and the compile caches: first-class on the GPU workloads, by hand elsewhere
    assert volumes["shm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "8Gi"}
    assert mounts["compile-cache"]["mountPath"] == "/var/cache/grpo"
    assert env["TRITON_CACHE_DIR"] == "/var/cache/grpo/triton"
    (job,) = of_kind(objects, "Job").values()
    volumes, mounts = volumes_of(job)
    assert "shm" not in volumes and volumes["dshm"]["emptyDir"] == {"medium": "Memory"}
    assert mounts["dshm"]["mountPath"] == "/dev/shm"
    math = of_kind(objects, "Deployment")[f"{PREFIX}-verifier-math"]["spec"]["template"]["spec"]
    assert math["terminationGracePeriodSeconds"] == 45
    assert {v["name"]: v for v in math["volumes"]}["tmp"]["emptyDir"] == {"sizeLimit": "2Gi"}
    for account in of_kind(objects, "ServiceAccount").values():
        assert account["metadata"]["annotations"] == {"iam.gke.io/gcp-service-account": "rl@p.iam"}
    redis = of_kind(objects, "StatefulSet")[f"{PREFIX}-redis"]["spec"]["template"]
    assert redis["spec"]["nodeSelector"] == {"pool": "cpu"}
    assert redis["spec"]["priorityClassName"] == "rl-critical"
    assert redis["spec"]["tolerations"][0]["key"] == "dedicated" and redis["spec"]["affinity"]
    assert redis["metadata"]["labels"]["team"] == "rl"
    exporter = {c["name"]: c for c in redis["spec"]["containers"]}["exporter"]
    assert exporter["image"] == "docker.io/oliver006/redis_exporter:v1.67.0"
    assert exporter["ports"] == [{"name": "metrics", "containerPort": 9121, "protocol": "TCP"}]
    exporter_env = {e["name"]: e for e in exporter["env"]}
    assert exporter_env["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == f"{PREFIX}-redis"
    service = of_kind(objects, "Service")[f"{PREFIX}-redis"]["spec"]
    assert {"name": "metrics", "port": 9121, "targetPort": "metrics", "protocol": "TCP"} in (
        service["ports"]
    )
    policy = of_kind(objects, "NetworkPolicy")[f"{PREFIX}-redis"]["spec"]
    assert any(r["ports"] == [{"port": "metrics", "protocol": "TCP"}] for r in policy["ingress"])
    (monitor,) = of_kind(objects, "ServiceMonitor").values()
    assert "matchExpressions" not in monitor["spec"]["selector"]  # Redis' exporter scraped too
    # and none of it by default
    _, default = render("default")
    learner = of_kind(default, "StatefulSet")[f"{PREFIX}-learner"]["spec"]["template"]["spec"]
    assert "priorityClassName" not in learner and "schedulerName" not in learner
    redis = of_kind(default, "StatefulSet")[f"{PREFIX}-redis"]["spec"]["template"]["spec"]
    assert [c["name"] for c in redis["containers"]] == ["redis"]


def test_startup_probe_budgets_are_per_workload() -> None:
    """Startup budget = periodSeconds x startupFailureThreshold, per workload: the learner
    restores a large checkpoint and publishes version 0 within an hour, the rollout worker
    waits for that version half an hour, the others start in minutes; each can be raised."""
    _, objects = render("default")

    def budgets(objs: tuple[dict[str, Any], ...]) -> dict[str, int]:
        out = {}
        for w in workloads(objs).values():
            probe = w["spec"]["template"]["spec"]["containers"][0]["startupProbe"]
            component = w["metadata"]["labels"]["app.kubernetes.io/component"]
            out[component] = probe["periodSeconds"] * probe["failureThreshold"]
        return out

    got = budgets(objects)
    assert got["learner"] == 3600 and got["rollout-worker"] == 1800
    assert got["driver"] == 300 and got["assembler"] == 300
    bigger = {"services": {"learner": {"probes": {"startupFailureThreshold": 720}}}}
    assert budgets(manifests(chart().render(values=with_required(bigger), name=RELEASE,
                                            namespace=NAMESPACE)))["learner"] == 7200  # fmt: skip


def fetch_container(objects: tuple[dict[str, Any], ...]) -> dict[str, Any] | None:
    learner = of_kind(objects, "StatefulSet")[f"{PREFIX}-learner"]["spec"]["template"]["spec"]
    inits = learner.get("initContainers", [])
    assert len(inits) <= 1
    return inits[0] if inits else None


def test_the_initial_policy_is_fetched_by_the_learners_init_container(tmp_path: Path) -> None:
    """initialModel: the learner's init container runs `grpo model fetch` into the model path
    on its claim, from an existing claim (read-only, in the init container only), a hub
    repository (HF_HUB_OFFLINE=0 and the token only there) or object storage (the Secret's
    keys); the learner's egress reaches the hub or store; none by default."""
    assert fetch_container(render("default")[1]) is None
    _, objects = render("model-from-hub")
    init = fetch_container(objects)
    assert init is not None
    assert init["command"] == [
        "grpo", "model", "fetch", "--from", "hf://Qwen/Qwen2.5-0.5B@7ae5",
        "--dest", "/var/lib/grpo/model", "--only-rank0",
    ]  # fmt: skip
    env = {e["name"]: e for e in init["env"]}
    assert env["HF_HUB_OFFLINE"]["value"] == "0"
    assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "hf", "key": "token"}
    assert env["RANK"]["valueFrom"]["fieldRef"]["fieldPath"].endswith("pod-index']")
    assert {m["name"] for m in init["volumeMounts"]} == {"weights", "tmp"}
    assert init["securityContext"]["readOnlyRootFilesystem"] is True
    learner = of_kind(objects, "StatefulSet")[f"{PREFIX}-learner"]["spec"]["template"]["spec"]
    main_env = {e["name"]: e.get("value") for e in learner["containers"][0]["env"]}
    assert main_env["HF_HUB_OFFLINE"] == "1" and "HF_TOKEN" not in main_env
    egress = of_kind(objects, "NetworkPolicy")[f"{PREFIX}-learner"]["spec"]["egress"]
    assert {
        "ports": [{"port": 443, "protocol": "TCP"}],
        "to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}],
    } in egress

    _, objects = render("model-from-object-storage")
    init = fetch_container(objects)
    assert init is not None and init["command"][4] == "s3://models/qwen-0.5b"
    env = {e["name"]: e for e in init["env"]}
    assert env["AWS_ENDPOINT_URL"]["value"] == "https://minio.storage.svc:9000"
    assert env["AWS_SECRET_ACCESS_KEY"]["valueFrom"]["secretKeyRef"] == {
        "name": "minio", "key": "AWS_SECRET_ACCESS_KEY"
    }  # fmt: skip
    egress = of_kind(objects, "NetworkPolicy")[f"{PREFIX}-learner"]["spec"]["egress"]
    assert {
        "ports": [{"port": 9000, "protocol": "TCP"}],
        "to": [{"ipBlock": {"cidr": "10.30.0.0/16"}}],
    } in egress

    claim = {"initialModel": {"source": "claim", "claim": {"claimName": "models", "path": "q"}}}
    _, objects = render_values(claim)
    init = fetch_container(objects)
    assert init is not None and init["command"][4] == "/var/lib/grpo-model-source/q"
    volumes, _ = volumes_of(of_kind(objects, "StatefulSet")[f"{PREFIX}-learner"])
    assert volumes["model-source"]["persistentVolumeClaim"] == {
        "claimName": "models", "readOnly": True
    }  # fmt: skip
    assert {
        "name": "model-source",
        "mountPath": "/var/lib/grpo-model-source",
        "readOnly": True,
    } in (init["volumeMounts"])
    # the model must land on the learner's claim
    elsewhere = {**claim, "run": {**REQUIRED["run"], "model": {"path": "/models/q"}}}
    with pytest.raises(helm.HelmError, match="not on the learner's claim"):
        render_values(elsewhere)
    with pytest.raises(helm.HelmValuesError, match="claimName"):
        chart().validate_schema(with_required({"initialModel": {"source": "claim"}}))


def render_values(values: dict[str, Any]) -> tuple[dict[str, Any], tuple[dict[str, Any], ...]]:
    """(merged values, objects) of ``values`` over REQUIRED."""
    full = with_required(values)
    files = chart().render(values=copy.deepcopy(full), name=RELEASE, namespace=NAMESPACE)
    return chart().merge_values(copy.deepcopy(full)), manifests(files)


def test_helm_test_scores_one_item_on_each_verifier() -> None:
    """The `helm test` Pod: one container per routed verifier running `grpo check-verifier`
    at the address the assembler uses, with the verifier's `test` item (a verifier without
    one: its first task type, any verdict); over TLS with the release's CA and the Service's
    name; the verifiers' NetworkPolicies admit it."""

    def test_pod(objects: tuple[dict[str, Any], ...]) -> dict[str, Any]:
        (pod,) = [o for o in objects if o["kind"] == "Pod"]
        assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
        assert pod["spec"]["restartPolicy"] == "Never"
        return {c["name"]: c["command"] for c in pod["spec"]["containers"]}

    commands = test_pod(render("extra-verifier")[1])
    assert set(commands) == {"verifier-math", "verifier-steps", "verifier-code", "verifier-judge"}
    math = commands["verifier-math"]
    assert math[:4] == [
        "grpo", "check-verifier", "--address",
        f"dns:///{PREFIX}-verifier-math.{NAMESPACE}.svc.cluster.local:50051",
    ]  # fmt: skip
    assert math[math.index("--expect-reward") + 1] == "1" and "--gold" in math
    code = commands["verifier-code"]
    assert code[code.index("--entry-point") + 1] == "add" and "--test-code" in code
    judge = commands["verifier-judge"]
    assert judge[judge.index("--task-type") + 1] == "poetry" and "--expect-reward" not in judge
    commands = test_pod(render("external-verifier")[1])
    js = commands["verifier-js"]
    assert js[js.index("--address") + 1] == EXTERNAL["external"]["address"]
    commands = test_pod(render("tls-on")[1])
    steps = commands["verifier-steps"]
    assert steps[steps.index("--tls-ca") + 1] == "/etc/grpo/tls/ca.crt"
    assert steps[steps.index("--tls-server-name") + 1] == f"{PREFIX}-verifier-steps.{NAMESPACE}.svc"
    assert "--tls-cert" in steps  # requireClientCert
    with pytest.raises(helm.HelmValuesError, match="entryPoint"):
        judge_test = {**JUDGE, "test": {"testCode": "def check(candidate): pass"}}
        chart().validate_schema(with_required({"verifiers": {"judge": judge_test}}))
