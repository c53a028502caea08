"""The Dockerfile (Docker cannot run here): hadolint passes, every path it copies exists and is
in the build context, every extra it installs is defined in pyproject.toml, each component has
its target, and the chart's default images are targets of it."""

from __future__ import annotations

import fnmatch
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from grpo.services.runtime.registry import SERVICES

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"
HADOLINT = Path(sys.executable).parent / "hadolint"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = pending + line
        pending = ""
        word, _, rest = full.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def stages() -> dict[str, list[tuple[str, str]]]:
    result: dict[str, list[tuple[str, str]]] = {}
    current = ""
    for word, rest in instructions():
        if word == "FROM":
            match = re.search(r"\bAS\s+(\S+)", rest, flags=re.IGNORECASE)
            current = match.group(1) if match else rest
            result[current] = []
        elif current:
            result[current].append((word, rest))
    return result


def test_hadolint_passes() -> None:
    proc = subprocess.run(
        [str(HADOLINT), "--no-color", str(DOCKERFILE)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_copied_paths_exist_and_are_in_the_build_context() -> None:
    ignore = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]

    def in_context(path: str) -> bool:
        included = True
        for pattern in ignore:
            negate = pattern.startswith("!")
            pat = pattern.lstrip("!").rstrip("/")
            if fnmatch.fnmatch(path, pat) or fnmatch.fnmatch(path.split("/")[0], pat):
                included = negate
        return included

    copies = 0
    for word, rest in instructions():
        if word != "COPY":
            continue
        args = [a for a in shlex.split(rest) if not a.startswith("--")]
        if "--from=" in rest:
            continue  # copies between stages
        for source in args[:-1]:
            path = source.rstrip("/")
            assert (REPO / path).exists(), f"Dockerfile copies {source!r}, which does not exist"
            assert in_context(path), f"{source!r} is excluded by .dockerignore"
            copies += 1
    assert copies >= 5
    # every folder of pyproject's package-dir map is copied (the image's install reads it)
    copied = {a.rstrip("/") for w, rest in instructions() if w == "COPY" for a in shlex.split(rest)}
    dirs = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    assert set(dirs.values()) <= copied, sorted(set(dirs.values()) - copied)


def test_installed_extras_are_defined_and_match_components() -> None:
    extras = set(
        tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    )
    by_stage: dict[str, set[str]] = {}
    for stage, body in stages().items():
        for word, rest in body:
            if word == "RUN":
                for group in re.findall(r'"\./\[([a-z0-9,_-]+)\]"', rest):
                    by_stage.setdefault(stage, set()).update(group.split(","))
    used = set().union(*by_stage.values())
    assert used <= extras, f"extras not in pyproject.toml: {sorted(used - extras)}"
    assert by_stage["build-math"] == {"math"}  # the math verifier image has no torch
    assert by_stage["build-code"] == {"code"}
    assert by_stage["build-assembler"] == {"k8s"}
    # report_to: wandb, mlflow; fetch: the init container's `grpo model fetch` from s3://
    assert by_stage["build-learner"] == {"learner", "tracking", "fetch"}
    assert by_stage["build-rollout-worker"] == {"generation"}
    # the driver evaluates with the transformers backend, scores math in process and reads a
    # user's Parquet / Hugging Face dataset (data.source)
    # k8s: the driver scales the GPU workloads to zero when the run is complete
    assert by_stage["build-driver"] == {"generation", "math", "data", "k8s"}
    assert by_stage["build-rollout-worker-vllm"] == {"generation", "vllm"}
    for torchless in ("build-math", "build-code", "build-assembler"):
        assert "torch" not in " ".join(rest for _, rest in stages()[torchless])
    code = " ".join(rest for _, rest in stages()["verifier-code"])
    assert "apt-get install" in code and "bubblewrap" in code


def test_final_images_run_grpo_as_non_root() -> None:
    all_stages = stages()
    values = yaml.safe_load((REPO / "helm" / "grpo-pipeline" / "values.yaml").read_text())
    workloads = {**values["services"], **values["verifiers"]}
    for name, block in workloads.items():
        target = block["image"]["repository"]
        assert target in all_stages, f"chart image {target!r} ({name}) is no Dockerfile target"
        body = dict(all_stages[target])
        assert body["USER"] == "10001:10001", target
        assert body["ENTRYPOINT"] == '["grpo"]', target
        cmd = yaml.safe_load(body["CMD"])
        assert cmd[1] in SERVICES and block["serve"] in SERVICES, (target, cmd)
        if block["image"]["repository"] != "verifier-math":  # verifier-steps shares the image
            assert cmd[:2] == ["serve", block["serve"]], (target, cmd)


def test_one_name_per_deployable() -> None:
    """A pipeline workload's rendered name (its values key in kebab-case), its image target and
    the ``grpo serve`` service its image runs are one name; every image runs the service it is
    named after (a ``-vllm`` variant runs its base). So ``generation`` names only the
    standalone ``grpo serve generation`` service, which no image or workload claims."""
    values = yaml.safe_load((REPO / "helm" / "grpo-pipeline" / "values.yaml").read_text())
    all_stages = stages()
    for key, block in values["services"].items():
        name = re.sub(r"(?<!^)([A-Z])", lambda m: "-" + m.group(1).lower(), key)
        assert block["image"]["repository"] == name == block["serve"], (key, block)
        assert name in SERVICES and name in all_stages, name
    for target, body in all_stages.items():
        cmd = dict(body).get("CMD")
        if cmd is None or target.startswith("build-"):
            continue
        serve = yaml.safe_load(cmd)[1]
        assert serve == target.removesuffix("-vllm"), (target, serve)
    assert "generation" not in all_stages and "generation" in SERVICES


# ---------------------------------------------------------------- reproducible images (issue 33)
def images_script() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("images", REPO / "scripts" / "images.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_base_images_are_pinned_by_a_required_digest() -> None:
    """Every external FROM is ``${IMAGE}@${DIGEST}`` with a DIGEST build argument that has no
    default (a build without it stops at that FROM); `make images` checks a digest's format
    before any build (nothing is looked up from here)."""
    args: dict[str, str | None] = {}
    for word, rest in instructions():
        if word == "ARG":
            name, eq, default = rest.partition("=")
            args[name] = default if eq else None
    all_stages = stages()
    external = []
    for word, rest in instructions():
        if word != "FROM":
            continue
        image = rest.split()[0]
        if image in all_stages:
            continue
        match = re.fullmatch(r"\$\{(\w+)\}@\$\{(\w+)\}", image)
        assert match, f"FROM {image}: not pinned by a digest build argument"
        repo_arg, digest_arg = match.groups()
        assert args[repo_arg] and ":" in str(args[repo_arg]), repo_arg  # a tag, for the reader
        assert args[digest_arg] is None, f"{digest_arg} has a default: it must be required"
        external.append(digest_arg)
    assert sorted(external) == ["PYTHON_DEV_DIGEST", "PYTHON_DIGEST"]
    images = images_script()
    good = "sha256:" + "0123456789abcdef" * 4
    assert images.check_digest("PYTHON_DIGEST", good) == good
    for bad in ("", "sha256:abc", good.upper(), good[7:], "sha512:" + good[7:], good + "0"):
        with pytest.raises(ValueError, match="PYTHON_DIGEST must be an image digest"):
            images.check_digest("PYTHON_DIGEST", bad)


def test_make_images_refuses_a_bad_digest_and_says_when_there_is_no_builder(
    tmp_path: Path,
) -> None:
    script = str(REPO / "scripts" / "images.py")
    good = "sha256:" + "ab" * 32
    env = {"PATH": str(tmp_path)}  # no docker, podman or buildah on this PATH
    base = [sys.executable, script, "build", "--registry", "r.example/grpo", "--tag", "1"]
    bad = subprocess.run([*base, "--python-digest", "latest", "--python-dev-digest", good],
                         env=env, capture_output=True, text=True, check=False)  # fmt: skip
    assert bad.returncode == 2 and "PYTHON_DIGEST must be an image digest" in bad.stderr
    none = subprocess.run([*base, "--python-digest", good, "--python-dev-digest", good],
                          env=env, capture_output=True, text=True, check=False)  # fmt: skip
    assert none.returncode == 2 and "no image builder here" in none.stderr


def locked() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (REPO / "docker" / "constraints.txt").read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        name, sep, version = line.partition("==")
        assert sep and name == name.lower().replace("_", "-") and version, line
        assert name not in pins, f"{name} pinned twice"
        pins[name] = version
    return pins


def test_one_lock_holds_every_image() -> None:
    """docker/constraints.txt pins every requirement of every extra an image installs (and
    the core ones), each pin satisfying pyproject's specifier; every install runs under it
    (PIP_CONSTRAINT before the first project install of both source stages); vllm is pinned
    to one release, the pyproject's, with the torch it needs; the lock is in the build
    context."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pins = locked()
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    images = images_script()
    used = set()
    for body in stages().values():
        for word, rest in body:
            if word == "RUN":
                for group in re.findall(r'"\./\[([a-z0-9,_-]+)\]"', rest):
                    used.update(group.split(","))
    assert used == set(images.IMAGE_EXTRAS), "scripts/images.py locks other extras than built"
    requirements = list(project["dependencies"])
    for extra in used:
        requirements += [r for r in extras[extra] if not r.startswith("grpo-pipeline")]
    for text in requirements:
        req = Requirement(text)
        name = canonicalize_name(req.name)
        assert name in pins, f"{req} is not in the lock"
        assert req.specifier.contains(pins[name], prereleases=True), (str(req), pins[name])
    (vllm_req,) = [Requirement(r) for r in extras["vllm"]]
    assert str(vllm_req.specifier) == f"=={pins['vllm']}"  # one release
    assert "torch" in pins and not ({"pip", "setuptools", "wheel"} & set(pins))
    for stage in ("source", "source-dev"):
        body = stages()[stage]
        env = [i for i, (w, r) in enumerate(body) if w == "ENV" and "PIP_CONSTRAINT" in r]
        copies = [i for i, (w, r) in enumerate(body) if w == "COPY" and "pyproject" in r]
        assert env and copies and env[0] < copies[0], stage
    assert "!docker/constraints.txt" in (REPO / ".dockerignore").read_text()


def test_the_vllm_image_runs_on_a_base_with_a_compiler() -> None:
    """Triton compiles its launcher with the system C compiler at first use (vLLM #2997,
    #14075): the vLLM target and its venv build on the full Python image (gcc, headers), every
    other target on the slim one."""
    froms = {name: body for name, body in stages().items()}
    header = {w: r for w, r in instructions() if w == "ARG"}
    assert "slim" not in " ".join(v for k, v in header.items() if "PYTHON_DEV_IMAGE" in k)
    first = {
        word_rest[1].split()[0]: word_rest[1].split()[-1]
        for word_rest in instructions()
        if word_rest[0] == "FROM"
    }
    assert first["${PYTHON_DEV_IMAGE}@${PYTHON_DEV_DIGEST}"] == "runtime-dev"
    targets = {rest.split()[-1]: rest.split()[0] for w, rest in instructions() if w == "FROM"}
    assert targets["rollout-worker-vllm"] == "runtime-dev"
    assert targets["build-rollout-worker-vllm"] == "source-dev"
    assert targets["source-dev"] == "runtime-dev"
    for name, base in targets.items():
        if name in ("verifier-math", "verifier-code", "assembler", "rollout-worker", "learner",
                    "driver"):  # fmt: skip
            assert base == "runtime", name
    assert froms  # parsed


@pytest.mark.slow
def test_the_lock_resolves_on_pypi() -> None:
    """`make images-check`: every image extra resolves exactly to the lock (pip --dry-run
    against PyPI; metadata only). Needs the network, so it runs with the slow tests."""
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "images.py"), "check-lock"],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
