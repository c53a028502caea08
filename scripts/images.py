"""The container images: their lock, the check of their base-image digests, their build.

    python scripts/images.py lock                 # regenerate docker/constraints.txt (PyPI)
    python scripts/images.py check-lock           # the lock resolves (pip --dry-run; PyPI)
    python scripts/images.py build --registry R --tag T \\
        --python-digest sha256:... --python-dev-digest sha256:... [--push] [--target NAME]

``lock`` resolves every extra any image installs together with ``pip install --dry-run
--report`` (PEP 658 metadata: nothing is downloaded but what has none) on this machine's
Python and platform, and writes one ``name==version`` per package: the one constraints file
every image installs under (the Dockerfile's ``PIP_CONSTRAINT``). ``build`` checks the two
digests' format (``sha256:`` and 64 hex digits; nothing is looked up) and builds every target
with the first builder found (``docker buildx``, ``docker``, ``podman``, ``buildah``); with none
it says so and exits 2.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONSTRAINTS = REPO / "docker" / "constraints.txt"
IMAGE_EXTRAS = ("math", "code", "k8s", "generation", "learner", "tracking", "fetch", "data", "vllm")
"""Every extra a Dockerfile stage installs (tests/helm/test_dockerfile.py checks the list)."""
TARGETS = (
    "verifier-math",
    "verifier-code",
    "assembler",
    "rollout-worker",
    "rollout-worker-vllm",
    "learner",
    "driver",
)
BUILD_TOOLS = ("pip", "setuptools", "wheel")
"""Pinned in the Dockerfile itself, left out of the lock."""
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def check_digest(name: str, value: str) -> str:
    """``value`` when it is an image digest (``sha256:`` and 64 lowercase hex digits).

    Raises:
        ValueError: naming the build argument and what a digest looks like.
    """
    if not DIGEST.fullmatch(value or ""):
        raise ValueError(
            f"{name} must be an image digest, sha256: followed by 64 lowercase hex digits "
            f"(docker buildx imagetools inspect python:3.11-slim-bookworm); got {value!r}"
        )
    return value


def resolve(extra_args: list[str], report: Path) -> dict[str, str]:
    """Package name -> version of pip's resolution of the image extras (a dry run)."""
    spec = f"{REPO}[{','.join(IMAGE_EXTRAS)}]"
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
           "--quiet", "--report", str(report), spec, *extra_args]  # fmt: skip
    subprocess.run(cmd, check=True)
    data = json.loads(report.read_text())
    return {
        item["metadata"]["name"].lower().replace("_", "-"): item["metadata"]["version"]
        for item in data["install"]
        if item["metadata"]["name"] != "grpo-pipeline"
    }


def lock() -> Path:
    """Write docker/constraints.txt (see the module docstring)."""
    with tempfile.TemporaryDirectory() as tmp:
        pins = resolve([], Path(tmp) / "report.json")
    header = [
        "# One lock for every image (the Dockerfile's PIP_CONSTRAINT): every extra an image",
        f"# installs ({', '.join(IMAGE_EXTRAS)}) resolved together by pip.",
        f"# Regenerate: make images-lock (python scripts/images.py lock), on Python "
        f"{platform.python_version()} {sys.platform} {platform.machine()},",
        f"# {time.strftime('%Y-%m-%d', time.gmtime())}; pip, setuptools and wheel are pinned in"
        " the Dockerfile.",
    ]
    lines = [f"{name}=={version}" for name, version in sorted(pins.items())]
    lines = [line for line in lines if line.split("==")[0] not in BUILD_TOOLS]
    CONSTRAINTS.parent.mkdir(exist_ok=True)
    CONSTRAINTS.write_text("\n".join(header + lines) + "\n")
    return CONSTRAINTS


def check_lock() -> int:
    """0 when the image extras resolve under the lock as it is (pip --dry-run)."""
    with tempfile.TemporaryDirectory() as tmp:
        pins = resolve(["--constraint", str(CONSTRAINTS)], Path(tmp) / "report.json")
    locked = {
        line.split("==")[0]: line.split("==")[1]
        for line in CONSTRAINTS.read_text().splitlines()
        if line and not line.startswith("#")
    }
    off = {n: (v, locked.get(n)) for n, v in pins.items() if locked.get(n) != v}
    if off:
        print(f"resolved off the lock: {off}", file=sys.stderr)
        return 1
    print(f"{len(pins)} packages resolve exactly as locked in {CONSTRAINTS.relative_to(REPO)}")
    return 0


def builder() -> list[str] | None:
    """The command that builds an image here, or None."""
    docker = shutil.which("docker")
    if docker:
        has_buildx = subprocess.run([docker, "buildx", "version"], capture_output=True)
        return [docker, "buildx", "build"] if has_buildx.returncode == 0 else [docker, "build"]
    for tool in ("podman", "buildah"):
        path = shutil.which(tool)
        if path:
            return [path, "build"] if tool == "podman" else [path, "bud"]
    return None


def build(args: argparse.Namespace) -> int:
    """Build (and with --push, push) the targets; 2 without a builder or with a bad digest."""
    try:
        python = check_digest("PYTHON_DIGEST", args.python_digest)
        dev = check_digest("PYTHON_DEV_DIGEST", args.python_dev_digest)
    except ValueError as exc:
        print(f"images: {exc}", file=sys.stderr)
        return 2
    command = builder()
    if command is None:
        print("images: no image builder here (docker, podman or buildah): nothing built. "
              "Run `make images` where one is installed.", file=sys.stderr)  # fmt: skip
        return 2
    for target in args.target or TARGETS:
        image = f"{args.registry.rstrip('/')}/{target}:{args.tag}"
        cmd = [*command, "--target", target, "--tag", image,
               "--build-arg", f"PYTHON_DIGEST={python}",
               "--build-arg", f"PYTHON_DEV_DIGEST={dev}", str(REPO)]  # fmt: skip
        if args.push and command[1:2] == ["buildx"]:
            cmd.insert(3, "--push")
        print("+", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
        if args.push and command[1:2] != ["buildx"]:
            subprocess.run([command[0], "push", image], check=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("lock", help="regenerate docker/constraints.txt")
    sub.add_parser("check-lock", help="the image extras resolve exactly as locked")
    b = sub.add_parser("build", help="build every image target")
    b.add_argument("--registry", required=True)
    b.add_argument("--tag", required=True)
    b.add_argument("--python-digest", default="")
    b.add_argument("--python-dev-digest", default="")
    b.add_argument("--target", action="append", choices=TARGETS)
    b.add_argument("--push", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "lock":
        print(lock())
        return 0
    if args.command == "check-lock":
        return check_lock()
    return build(args)


if __name__ == "__main__":
    sys.exit(main())
