"""The chart's TLS health probe (used when tls.enabled, since kubelet gRPC probes cannot speak
TLS) is executed as rendered against a real mutual-TLS server built by the runtime."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import helm_python as helm
import pytest
import yaml

from grpo.services.runtime.server import ServerSettings, ServiceBinding, create_server
from grpo.v1 import verifier_pb2_grpc

CHART = Path(__file__).resolve().parents[2] / "helm" / "grpo-pipeline"
SERVER_NAME = "rl-grpo-pipeline-verifier-math.ml.svc"


def rendered_readiness_probe() -> list[str]:
    pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    values = {
        "tls": {"enabled": True, "cert": pem, "key": pem, "ca": pem},
        "run": {"data": {"train_size": 10}},
        "redis": {"auth": {"password": "p"}},
    }
    with helm.Chart.load(CHART) as chart:
        files = chart.render(values=values, name="rl", namespace="ml")
    for doc in yaml.safe_load_all(files["grpo-pipeline/templates/deployment.yaml"]):
        if doc and doc["metadata"]["name"] == "rl-grpo-pipeline-verifier-math":
            command: list[str] = doc["spec"]["template"]["spec"]["containers"][0]["readinessProbe"][
                "exec"
            ]["command"]
            return command
    raise AssertionError("verifier-math Deployment not rendered")


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI")
def test_rendered_tls_probe_reports_health_over_mutual_tls(tmp_path: Path) -> None:
    key, cert = tmp_path / "tls.key", tmp_path / "tls.crt"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "1", "-keyout", key, "-out", cert, "-subj", f"/CN={SERVER_NAME}",
         "-addext", f"subjectAltName=DNS:{SERVER_NAME}"],
        check=True, capture_output=True,
    )  # fmt: skip
    shutil.copy(cert, tmp_path / "ca.crt")  # self-signed: its own CA
    settings = ServerSettings(
        port=0,
        metrics_port=-1,
        tls_cert_file=cert,
        tls_key_file=key,
        tls_client_ca_file=tmp_path / "ca.crt",  # mutual TLS: the probe must present a cert
    )
    binding = ServiceBinding(
        name="grpo.v1.Verifier",
        add_to_server=verifier_pb2_grpc.add_VerifierServicer_to_server,
        servicer=verifier_pb2_grpc.VerifierServicer(),
    )
    argv = rendered_readiness_probe()
    assert argv[0] == "python" and argv[4:] == [
        "grpo.v1.Verifier",
        SERVER_NAME,
        "/etc/grpo/tls",
    ]
    with create_server([binding], settings) as server:
        command = [sys.executable, *argv[1:3], f"127.0.0.1:{server.port}", argv[4], argv[5]]
        command.append(str(tmp_path))  # where the pod mounts the TLS Secret
        serving = subprocess.run(command, capture_output=True, text=True, timeout=60)
        assert serving.returncode == 0, serving.stderr
        server.set_serving(False)
        draining = subprocess.run(command, capture_output=True, text=True, timeout=60)
        assert draining.returncode == 1, draining.stderr
