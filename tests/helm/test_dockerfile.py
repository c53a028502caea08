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
    assert by_stage["build-driver"] == {"generation", "math", "data"}
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
