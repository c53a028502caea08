"""A Kubernetes API server stand-in for the tests: HTTPS on loopback, bearer tokens of service
accounts, RBAC from rendered Role and RoleBinding objects, and the ``scale`` subresource of
Deployments and StatefulSets (GET and PATCH).

It answers as the API server does where the code under test looks: 401 without a known token,
403 when no rule of a Role bound to the token's service account allows the verb on the
resource (``deployments/scale``) and name (``resourceNames``), 404 for an unknown workload,
and a ``Scale`` object (``autoscaling/v1``) otherwise. Every request is recorded. A PATCH
that sets ``spec.replicas`` calls ``on_scale(kind, name, replicas)``.
"""

from __future__ import annotations

import json
import re
import ssl
import subprocess
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

_SCALE = re.compile(
    r"^/apis/apps/v1/namespaces/(?P<ns>[^/]+)/(?P<res>deployments|statefulsets)/(?P<name>[^/]+)/scale$"
)
_KINDS = {"deployments": "Deployment", "statefulsets": "StatefulSet"}


def self_signed(folder: Path) -> tuple[Path, Path]:
    """(key, certificate) PEM files for 127.0.0.1 (the certificate is its own CA)."""
    folder.mkdir(parents=True, exist_ok=True)
    key, cert = folder / "apiserver.key", folder / "apiserver.crt"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", key, "-out", cert, "-subj", "/CN=kubernetes",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return key, cert


@dataclass
class Request:
    """One request the server answered."""

    method: str
    path: str
    account: str | None
    status: int
    body: Any = None


@dataclass
class FakeKubeApi:
    """The API server of one namespace (see the module docstring).

    Attributes:
        objects: rendered objects (Roles, RoleBindings, Deployments, StatefulSets) it serves.
        namespace: the namespace they live in.
        on_scale: called with (kind, name, replicas) after a PATCH of ``spec.replicas``.
    """

    objects: list[dict[str, Any]]
    namespace: str
    on_scale: Callable[[str, str, int], None] = lambda kind, name, replicas: None
    requests: list[Request] = field(default_factory=list)
    replicas: dict[tuple[str, str], int] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)  # token -> service account
    cert: Path | None = None
    _server: ThreadingHTTPServer | None = None

    def __post_init__(self) -> None:
        for obj in self.objects:
            if obj["kind"] in ("Deployment", "StatefulSet"):
                key = (obj["kind"], obj["metadata"]["name"])
                self.replicas[key] = int(obj["spec"].get("replicas", 1))

    def token_for(self, account: str) -> str:
        """A bearer token of service account ``account`` (minted once)."""
        for token, name in self.tokens.items():
            if name == account:
                return token
        token = uuid.uuid4().hex
        self.tokens[token] = account
        return token

    def allowed(self, account: str, verb: str, resource: str, name: str) -> bool:
        """RBAC: a Role bound to ``account`` (in this namespace) has a rule for the verb on
        ``apps`` ``resource`` (e.g. ``deployments/scale``) and ``name``."""
        roles = {o["metadata"]["name"]: o for o in self.objects if o["kind"] == "Role"}
        for binding in (o for o in self.objects if o["kind"] == "RoleBinding"):
            subjects = binding.get("subjects", [])
            if not any(
                s["kind"] == "ServiceAccount"
                and s["name"] == account
                and s.get("namespace", self.namespace) == self.namespace
                for s in subjects
            ):
                continue
            role = roles.get(binding["roleRef"]["name"])
            for rule in (role or {}).get("rules", []):
                names = rule.get("resourceNames")
                if (
                    "apps" in rule.get("apiGroups", [])
                    and resource in rule.get("resources", [])
                    and verb in rule.get("verbs", [])
                    and (not names or name in names)
                ):
                    return True
        return False

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self, status: int, body: dict[str, Any], account: str | None) -> None:
                api.requests.append(Request(self.command, self.path, account, status, body))
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _status(self, code: int, reason: str, account: str | None) -> None:
                body = {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                        "reason": reason, "code": code}  # fmt: skip
                self._answer(code, body, account)

            def _scale(self, verb: str) -> None:
                scheme, _, token = self.headers.get("Authorization", "").partition(" ")
                account = api.tokens.get(token.strip()) if scheme.lower() == "bearer" else None
                if account is None:
                    self._status(401, "Unauthorized", None)
                    return
                match = _SCALE.match(self.path.split("?")[0])
                if match is None or match["ns"] != api.namespace:
                    self._status(404, "NotFound", account)
                    return
                kind, name = _KINDS[match["res"]], match["name"]
                if not api.allowed(account, verb, f"{match['res']}/scale", name):
                    self._status(403, "Forbidden", account)
                    return
                if (kind, name) not in api.replicas:
                    self._status(404, "NotFound", account)
                    return
                if verb == "patch":
                    length = int(self.headers.get("Content-Length", "0"))
                    patch = json.loads(self.rfile.read(length) or b"{}")
                    replicas = patch.get("spec", {}).get("replicas")
                    if isinstance(replicas, int):
                        api.replicas[(kind, name)] = replicas
                        api.on_scale(kind, name, replicas)
                scale = {
                    "kind": "Scale",
                    "apiVersion": "autoscaling/v1",
                    "metadata": {"name": name, "namespace": api.namespace},
                    "spec": {"replicas": api.replicas[(kind, name)]},
                    "status": {"replicas": api.replicas[(kind, name)]},
                }
                self._answer(200, scale, account)

            def do_GET(self) -> None:
                self._scale("get")

            def do_PATCH(self) -> None:
                self._scale("patch")

        return Handler

    def start(self, folder: Path) -> tuple[str, int]:
        """Serve HTTPS on a loopback port (certificate in ``folder``); returns (host, port)."""
        key, cert = self_signed(folder)
        self.cert = cert
        server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self._server = server
        return "127.0.0.1", server.server_address[1]

    def service_account_dir(self, folder: Path, account: str) -> Path:
        """What the kubelet mounts for a pod of ``account``: token, ca.crt, namespace."""
        assert self.cert is not None, "start() first"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "token").write_text(self.token_for(account))
        (folder / "ca.crt").write_bytes(self.cert.read_bytes())
        (folder / "namespace").write_text(self.namespace)
        return folder

    def stop(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
