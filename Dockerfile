# syntax=docker/dockerfile:1.7
# grpo-pipeline images: one target per component, each installing only its pyproject extras.
#
#   make images REGISTRY=registry.example.com/grpo TAG=0.1.0 \
#     PYTHON_DIGEST=sha256:<64 hex> PYTHON_DEV_DIGEST=sha256:<64 hex>
#
# builds every target below (scripts/images.py; it checks the digests' format first):
#
#   verifier-math        math + steps verifiers (no torch)
#   verifier-code        bubblewrap sandbox
#   assembler            no torch; kubernetes client
#   rollout-worker       torch + transformers
#   rollout-worker-vllm  adds vLLM (GPU), on the Python image with a C compiler
#   learner              torch (+ tracking, + boto3 for `grpo model fetch`)
#   driver               torch + math + datasets; kubernetes client (the GPU workloads' release)
#
# Reproducible builds: both base images are pinned by digest, given as required build
# arguments (no default: a build without them stops at the first FROM), and every pip
# install is held to docker/constraints.txt (PIP_CONSTRAINT), one lock of every image's
# Python packages resolved together (`make images-lock`; torch and vllm pinned in it).
#
# One name per deployable: the target, the chart workload and `grpo serve NAME` agree (the
# rollout worker holds the generation engine in-process; `grpo serve generation`, the
# standalone grpo.v1.Generation service, is not an image).
#
# Everything is installed at build time; at run time the images reach no network (the Helm
# chart's NetworkPolicies enforce it) and never a model hub (HF_HUB_OFFLINE=1; the learner's
# init container alone may fetch the initial policy). Every image runs as the non-root user
# 10001 with `grpo` as entrypoint and works on a read-only root filesystem with a writable
# /tmp; compile caches (Triton, TorchInductor, vLLM) go where the chart's cache volume is.

# The slim Python image of every target but the vLLM one, and its digest (required).
ARG PYTHON_IMAGE=python:3.11-slim-bookworm
ARG PYTHON_DIGEST
# The full Python image (gcc and Python headers: Triton compiles its launcher at first use,
# vLLM #2997, #14075) of the vLLM target, and its digest (required).
ARG PYTHON_DEV_IMAGE=python:3.11-bookworm
ARG PYTHON_DEV_DIGEST

# ---------------------------------------------------------------- runtime bases
FROM ${PYTHON_IMAGE}@${PYTHON_DIGEST} AS runtime
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    OMP_NUM_THREADS=1 \
    HOME=/tmp \
    PATH=/opt/venv/bin:$PATH
RUN groupadd --system --gid 10001 grpo \
    && useradd --system --uid 10001 --gid grpo --home-dir /tmp --shell /usr/sbin/nologin grpo
WORKDIR /tmp

FROM ${PYTHON_DEV_IMAGE}@${PYTHON_DEV_DIGEST} AS runtime-dev
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    OMP_NUM_THREADS=1 \
    HOME=/tmp \
    PATH=/opt/venv/bin:$PATH
RUN groupadd --system --gid 10001 grpo \
    && useradd --system --uid 10001 --gid grpo --home-dir /tmp --shell /usr/sbin/nologin grpo
WORKDIR /tmp

# ---------------------------------------------------------------- source tree + empty venv
FROM runtime AS source
RUN python -m venv /opt/venv \
    && pip install --no-cache-dir "pip==25.3" "setuptools==80.9.0" "wheel==0.45.1"
WORKDIR /src
# Every install below is held to the lock (the build tools above are pinned by themselves).
COPY docker/constraints.txt ./constraints.txt
ENV PIP_CONSTRAINT=/src/constraints.txt
# pyproject.toml's package-dir maps grpo.learner, grpo.services and grpo.verifiers to these folders.
# README.md (pyproject's readme) is left out: only package metadata uses it.
COPY pyproject.toml ./
COPY grpo/ ./grpo/
COPY learner/ ./learner/
COPY services/ ./services/
COPY verifiers/ ./verifiers/

# the same tree on the compiler image (the vLLM target's venv is built where it runs)
FROM runtime-dev AS source-dev
RUN python -m venv /opt/venv \
    && pip install --no-cache-dir "pip==25.3" "setuptools==80.9.0" "wheel==0.45.1"
WORKDIR /src
COPY docker/constraints.txt ./constraints.txt
ENV PIP_CONSTRAINT=/src/constraints.txt
COPY pyproject.toml ./
COPY grpo/ ./grpo/
COPY learner/ ./learner/
COPY services/ ./services/
COPY verifiers/ ./verifiers/

# ---------------------------------------------------------------- one venv per component
FROM source AS build-math
RUN pip install --no-cache-dir "./[math]"

FROM source AS build-code
RUN pip install --no-cache-dir "./[code]"

FROM source AS build-assembler
RUN pip install --no-cache-dir "./[k8s]"

# torch first (its version from the lock, PIP_CONSTRAINT), so the layer survives a change of our
# code
FROM source AS build-rollout-worker
# hadolint ignore=DL3013
RUN pip install --no-cache-dir torch \
    && pip install --no-cache-dir "./[generation]"

FROM source-dev AS build-rollout-worker-vllm
# hadolint ignore=DL3013
RUN pip install --no-cache-dir torch \
    && pip install --no-cache-dir "./[generation,vllm]"

FROM source AS build-learner
# hadolint ignore=DL3013
RUN pip install --no-cache-dir torch \
    && pip install --no-cache-dir "./[learner,tracking,fetch]"

FROM source AS build-driver
# hadolint ignore=DL3013
RUN pip install --no-cache-dir torch \
    && pip install --no-cache-dir "./[generation,math,data,k8s]"

# ---------------------------------------------------------------- final images
FROM runtime AS verifier-math
COPY --from=build-math /opt/venv /opt/venv
USER 10001:10001
EXPOSE 50051 9090
ENTRYPOINT ["grpo"]
CMD ["serve", "verifier-math", "--config", "/etc/grpo/config.yaml"]

FROM runtime AS verifier-code
# bubblewrap builds the sandbox without setuid: it needs unprivileged user namespaces on the
# node and the chart's seccomp profile (isolation bubblewrap, docs/kubernetes.md). procps'
# kill ends a slot uid's processes under isolation runtime (gVisor/Kata; setpriv is in
# util-linux, which the base image has).
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends bubblewrap procps \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build-code /opt/venv /opt/venv
USER 10001:10001
EXPOSE 50051 9090
ENTRYPOINT ["grpo"]
CMD ["serve", "verifier-code", "--config", "/etc/grpo/config.yaml"]

FROM runtime AS assembler
COPY --from=build-assembler /opt/venv /opt/venv
USER 10001:10001
EXPOSE 50051 9090
ENTRYPOINT ["grpo"]
CMD ["serve", "assembler", "--config", "/etc/grpo/config.yaml"]

FROM runtime AS rollout-worker
COPY --from=build-rollout-worker /opt/venv /opt/venv
USER 10001:10001
EXPOSE 50051 9090
ENTRYPOINT ["grpo"]
CMD ["serve", "rollout-worker", "--config", "/etc/grpo/config.yaml"]

FROM runtime-dev AS rollout-worker-vllm
COPY --from=build-rollout-worker-vllm /opt/venv /opt/venv
USER 10001:10001
EXPOSE 50051 9090
ENTRYPOINT ["grpo"]
CMD ["serve", "rollout-worker", "--config", "/etc/grpo/config.yaml"]

FROM runtime AS learner
COPY --from=build-learner /opt/venv /opt/venv
USER 10001:10001
EXPOSE 50051 9090
ENTRYPOINT ["grpo"]
CMD ["serve", "learner", "--config", "/etc/grpo/config.yaml"]

FROM runtime AS driver
COPY --from=build-driver /opt/venv /opt/venv
USER 10001:10001
EXPOSE 50051 9090
ENTRYPOINT ["grpo"]
CMD ["serve", "driver", "--config", "/etc/grpo/config.yaml"]
