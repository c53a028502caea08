"""The layers and which may import which (docs/architecture.md, "Layers and imports").

Two checks. Statically, every ``import grpo...`` anywhere in a module (lazy imports inside
functions included: a lazy import is still a dependency) must be allowed by the table below.
At run time, in a fresh interpreter, importing a domain entry point (the ``Verifier`` base
class, ``extract_answer``, every ``grpo.learner`` module) must load neither grpc nor sympy.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = {"learner": "grpo.learner", "services": "grpo.services", "verifiers": "grpo.verifiers"}

# Layer of a module: the first matching prefix wins (most specific first).
LAYER_OF: list[tuple[str, str]] = [
    ("grpo.errors", "errors"),
    ("grpo.integrity", "integrity"),
    ("grpo.v1", "contracts"),
    # The gRPC half of the verifier SDK and each verifier's one-line service module.
    ("grpo.verifiers.sdk.servicer", "verifier-edge"),
    ("grpo.verifiers.sdk.service", "verifier-edge"),
    ("grpo.verifiers.example", "verifier-edge"),
    ("grpo.verifiers.*.service", "verifier-edge"),
    ("grpo.verifiers", "verifiers"),
    ("grpo.model", "model"),
    ("grpo.chat", "model"),
    ("grpo.devices", "model"),
    ("grpo.learner", "learner"),
    # services/ in floors: runtime < settings < tasks and the deployables < evaluation < driver.
    ("grpo.services.runtime", "runtime"),
    ("grpo.services.settings", "settings"),
    ("grpo.services.tasks", "tasks"),
    ("grpo.services.assembler", "assembler"),
    ("grpo.services.generation", "generation"),
    ("grpo.services.learner", "learner-service"),
    ("grpo.services.evaluation", "evaluation"),
    ("grpo.services.driver", "driver"),
    ("grpo.services", "services-root"),
    # The one-machine app behind ``grpo run`` and the experiments, on top of services/.
    ("grpo.local", "local"),
    ("grpo.experiments", "experiments"),
    ("grpo.report", "cli"),
    ("grpo.api", "cli"),
    ("grpo.cli", "cli"),
    ("grpo.__main__", "cli"),
]

DOMAIN = {"errors", "integrity", "contracts", "model", "learner", "verifiers"}
DEPLOYABLES = {"assembler", "generation", "learner-service"}
SERVICES_FLOORS = {"runtime", "settings", "tasks", *DEPLOYABLES, "evaluation", "driver"}

# What each layer may import (grpo modules only; a layer always imports itself). "contracts"
# means the message modules (``grpo.v1.*_pb2``); the gRPC stubs (``*_pb2_grpc``) are "stubs",
# for the edges only. A deployable imports the runtime, the settings and the domain: never a
# peer deployable's modules (what two deployables share lives in the runtime).
MAY_IMPORT: dict[str, set[str]] = {
    "errors": set(),
    "integrity": {"errors"},
    "contracts": {"contracts"},
    "model": {"errors"},
    "learner": {"errors", "integrity", "contracts", "model"},
    "verifiers": {"errors", "contracts"},
    "verifier-edge": {"errors", "contracts", "stubs", "verifiers", "runtime"},
    "runtime": {"errors", "integrity", "contracts", "stubs"},
    "settings": {"errors", "contracts", "learner", "runtime"},
    "tasks": {"errors", "contracts", "model", "runtime", "settings"},
    **{d: {*DOMAIN, "stubs", "runtime", "settings"} for d in DEPLOYABLES},
    "evaluation": {*DOMAIN, "stubs", "verifier-edge", "runtime", "settings", "tasks",
                   "generation"},
    "driver": {"errors", "integrity", "contracts", "stubs", "learner", "runtime", "settings",
               "tasks", "evaluation"},
    "services-root": set(),
    "local": {*DOMAIN, "stubs", "verifier-edge", *SERVICES_FLOORS},
    "experiments": {*DOMAIN, "stubs", "verifier-edge", *SERVICES_FLOORS, "local"},
    "cli": {*DOMAIN, "stubs", "verifier-edge", *SERVICES_FLOORS, "local", "experiments"},
}  # fmt: skip
for _layer, _allowed in MAY_IMPORT.items():
    _allowed.add(_layer)


def layer_of(module: str) -> str:
    """The layer of a dotted module name (``AssertionError`` when no rule places it)."""
    parts = module.split(".")
    if module.startswith("grpo.v1.") and module.endswith("_pb2_grpc"):
        return "stubs"
    for prefix, layer in LAYER_OF:
        pattern = prefix.split(".")
        if len(parts) >= len(pattern) and all(
            p == "*" or p == q for p, q in zip(pattern, parts, strict=False)
        ):
            return layer
    if module.startswith("grpo.cli"):
        return "cli"
    raise AssertionError(f"{module} belongs to no layer: add it to LAYER_OF (and the docs)")


def _module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = list(rel.parts)
    parts[0] = PACKAGES.get(parts[0], parts[0])
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _project_modules() -> list[Path]:
    files = [p for d in PACKAGES for p in (REPO / d).rglob("*.py")]
    files += [p for p in (REPO / "grpo").rglob("*.py") if "v1" not in p.relative_to(REPO).parts]
    return sorted(f for f in files if "__pycache__" not in f.parts)


_TYPE_CHECKING = {"TYPE_CHECKING", "typing.TYPE_CHECKING"}


def _grpo_imports(path: Path, module: str) -> list[tuple[int, str]]:
    """(line, imported module) for every grpo import in ``path`` outside ``if
    TYPE_CHECKING:`` blocks; ``from grpo.v1 import x_pb2_grpc`` yields ``grpo.v1.x_pb2_grpc``."""
    tree = ast.parse(path.read_text(), str(path))
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test) in _TYPE_CHECKING
        for stmt in node.body
        for inner in ast.walk(stmt)
    }
    out = []
    for node in ast.walk(tree):
        if id(node) in typing_only:  # annotations only: not a run-time dependency
            continue
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("grpo")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative import: resolve against the module's package
                base = module.split(".")[: -node.level or None]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            if not name.startswith("grpo"):
                continue
            if name == "grpo.v1":
                out += [(node.lineno, f"grpo.v1.{a.name}") for a in node.names]
            else:
                out.append((node.lineno, name))
    return out


def test_every_import_follows_the_layer_table() -> None:
    broken = []
    for path in _project_modules():
        module = _module_name(path)
        if module == "grpo" or module.startswith("grpo.v1"):
            continue
        layer = layer_of(module)
        for line, imported in _grpo_imports(path, module):
            if imported == "grpo":
                continue
            target = layer_of(imported)
            if target not in MAY_IMPORT[layer]:
                rel = path.relative_to(REPO)
                broken.append(f"{rel}:{line}: {module} ({layer}) imports {imported} ({target})")
    assert not broken, "layer violations:\n" + "\n".join(broken)


def test_layer_table_rejects_a_domain_import_of_the_services() -> None:
    """The table really forbids what docs/architecture.md says (the check can fail)."""
    assert "services" not in MAY_IMPORT[layer_of("grpo.learner.batch")]
    assert "services" not in MAY_IMPORT[layer_of("grpo.verifiers.sdk.base")]
    assert "stubs" not in MAY_IMPORT[layer_of("grpo.verifiers.math.verifier")]
    assert layer_of("grpo.v1.verifier_pb2_grpc") == "stubs"
    assert layer_of("grpo.verifiers.code.service") == "verifier-edge"
    assert "cli" not in MAY_IMPORT[layer_of("grpo.services.runtime.server")]
    with pytest.raises(AssertionError, match="no layer"):
        layer_of("grpo.somewhere_new")


def _violations(module: str, source: str) -> list[str]:
    """The layer violations of ``source`` read as the module ``module``."""
    allowed = MAY_IMPORT[layer_of(module)]
    imported = [n.module for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ImportFrom)]
    return [m for m in imported if m and layer_of(m) not in allowed]


@pytest.mark.parametrize(
    ("module", "planted"),
    [
        ("grpo.services.generation.worker", "from grpo.services.learner.publish import x"),
        ("grpo.services.assembler.service", "from grpo.services.generation.backend import x"),
        ("grpo.services.learner.loop", "from grpo.services.assembler.store import x"),
        ("grpo.services.runtime.streams", "from grpo.services.settings.run import x"),
        ("grpo.services.driver.driver", "from grpo.services.generation.backend import x"),
        ("grpo.services.evaluation.scorers", "from grpo.services.driver.heldout import x"),
        ("grpo.services.driver.service", "from grpo.local.run import x"),
    ],
)
def test_a_planted_import_of_a_peer_or_a_higher_floor_fails(module: str, planted: str) -> None:
    assert _violations(module, planted), f"{planted} in {module} should break the table"


def _package(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] == ["grpo", "services"] and len(parts) > 2:
        return parts[2]
    return None


def test_services_stand_on_at_most_five_floors_with_no_arrow_back_up() -> None:
    """Drawn from the imports (package to package inside services/), the graph has no cycle
    and its longest chain is at most 5 floors: runtime < settings < tasks and the deployables
    < evaluation < driver (issue 34)."""
    arrows: dict[str, set[str]] = {}
    for path in _project_modules():
        module = _module_name(path)
        src = _package(module)
        if src is None:
            continue
        for _line, imported in _grpo_imports(path, module):
            dst = _package(imported)
            if dst is not None and dst != src:
                arrows.setdefault(src, set()).add(dst)
    floor: dict[str, int] = {}

    def floor_of(pkg: str, seen: tuple[str, ...] = ()) -> int:
        assert pkg not in seen, f"import cycle: {' -> '.join((*seen, pkg))}"
        if pkg not in floor:
            floor[pkg] = 1 + max(
                (floor_of(d, (*seen, pkg)) for d in arrows.get(pkg, ())), default=0
            )
        return floor[pkg]

    floors = {pkg: floor_of(pkg) for pkg in {*arrows, *(d for ds in arrows.values() for d in ds)}}
    assert max(floors.values()) <= 5, floors
    assert floors["runtime"] == 1, floors


def _loaded_after_import(statement: str) -> dict[str, bool]:
    code = (
        "import json, sys\n"
        f"{statement}\n"
        "print(json.dumps({m: m in sys.modules for m in ('grpc', 'sympy', 'grpo.services')}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _learner_modules() -> list[str]:
    return sorted(_module_name(p) for p in (REPO / "learner").rglob("*.py"))


DOMAIN_ENTRY_POINTS = [
    "from grpo.verifiers.sdk.base import Verifier",
    "from grpo.verifiers.sdk import Verifier, WorkerPool, make_score",
    "from grpo.verifiers.math import extract_answer",
    "from grpo.verifiers.math.extract import extract_answer",
    "import grpo.errors",
]


@pytest.mark.parametrize("statement", DOMAIN_ENTRY_POINTS)
def test_domain_entry_points_load_neither_grpc_nor_sympy(statement: str) -> None:
    loaded = _loaded_after_import(statement)
    assert loaded == {"grpc": False, "sympy": False, "grpo.services": False}, statement


def test_every_learner_module_loads_neither_grpc_nor_sympy() -> None:
    """All grpo.learner modules imported in one fresh interpreter; then in one each for the
    ones that fail together, so the message names the module that pulls grpc or sympy."""
    modules = _learner_modules()
    together = _loaded_after_import("\n".join(f"import {m}" for m in modules))
    if not any(together.values()):
        return
    culprits = {m: _loaded_after_import(f"import {m}") for m in modules}
    bad = {m: sorted(k for k, v in got.items() if v) for m, got in culprits.items()}
    raise AssertionError(f"learner modules loading grpc/sympy/grpo.services: "
                         f"{ {m: v for m, v in bad.items() if v} }")  # fmt: skip


def test_the_runtime_check_sees_grpc() -> None:
    """The sys.modules probe does detect grpc (so the checks above can fail)."""
    assert _loaded_after_import("import grpo.services.runtime.server")["grpc"] is True


_ORCHESTRATOR_START = """
import json, sys
from pathlib import Path
from grpo.local import cluster, processes
from grpo.services.settings import run as config
from grpo.services.tasks import run_tasks as tasks

processes.ProcessSupervisor.start = lambda self, name, path, service=None: None
processes.ProcessSupervisor.wait_healthy = lambda self, names, timeout_s: None
cluster.LocalCluster.address = lambda self, name: "127.0.0.1:1"
cfg = config.load_run_config(Path("configs/arith-cpu.yaml"), {{"redis_url": "{redis}"}})
run = cluster.LocalCluster(cfg, Path(sys.argv[1]))
run.start(Path("model"), tasks.load_run_tasks(cfg).task_type)
run.start_driver(Path("model"))
written = sorted(p.name for p in (Path(sys.argv[1]) / "services").glob("*.yaml"))
print(json.dumps([written, [m for m in ("torch", "transformers", "sympy") if m in sys.modules]]))
"""


def test_grpo_run_validates_the_service_configs_without_the_services_heavy_imports(
    tmp_path: Path, redis_url: str
) -> None:
    """``grpo run`` (the orchestrator) writes and validates every service's settings of the
    main job, but imports neither torch, transformers nor sympy: the services (forked from
    the preload interpreter) do, and each such import here cost the run 1-2.5 CPU s of
    start-up (``registry.SETTINGS``, ``steps.symbolic``; docs/pipeline.md)."""
    code = _ORCHESTRATOR_START.format(redis=redis_url)
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=REPO,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    written, heavy = json.loads(out.stdout.strip().splitlines()[-1])
    assert {"learner.yaml", "driver.yaml", "verifier-steps.yaml"} <= set(written), written
    assert heavy == []


def test_settings_classes_named_apart_are_the_specs_own() -> None:
    """``registry.SETTINGS`` names the very class each spec validates with."""
    from grpo.services.runtime.registry import SETTINGS, load_settings_cls, load_spec

    assert SETTINGS
    for name in SETTINGS:
        assert load_settings_cls(name) is load_spec(name).settings_cls, name
