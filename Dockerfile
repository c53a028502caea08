# syntax=docker/dockerfile:1.7
# grpo-pipeline images: one target per component, each installing only its pyproject extras.
#
#   docker build --target verifier-math       -t REGISTRY/verifier-math:TAG .  (math + steps; no torch)
#   docker build --target verifier-code       -t REGISTRY/verifier-code:TAG .  (bubblewrap sandbox)
#   docker build --target assembler           -t REGISTRY/assembler:TAG .      (no torch; k8s client)
#   docker build --target rollout-worker      -t REGISTRY/rollout-worker:TAG . (torch + transformers)
#   docker build --target rollout-worker-vllm -t REGISTRY/rollout-worker-vllm:TAG .  (adds vLLM; GPU)
#   docker build --target learner             -t REGISTRY/learner:TAG .        (torch)
#   docker build --target driver              -t REGISTRY/driver:TAG .         (torch + math; run driver)
#
# One name per deployable: the target, the chart workload and `grpo serve NAME` agree (the
# rollout worker holds the generation engine in-process; `grpo serve generation`, the
# standalone grpo.v1.Generation service, is not an image).
#
# Everything is installed at build time; at run time the images reach no network (the Helm
# chart's NetworkPolicies enforce it) and never a model hub (HF_HUB_OFFLINE=1). Every image
# runs as the non-root user 10001 with `grpo` as entrypoint and works on a read-only root
# filesystem with a writable /tmp.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---------------------------------------------------------------- runtime base (no build tools)
FROM ${PYTHON_IMAGE} AS runtime
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
# pyproject.toml's package-dir maps grpo.learner, grpo.services and grpo.verifiers to these folders.
# README.md (pyproject's readme) is left out: only package metadata uses it.
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

FROM source AS build-rollout-worker
RUN pip install --no-cache-dir "torch==2.13.0" \
    && pip install --no-cache-dir "./[generation]"

FROM source AS build-rollout-worker-vllm
RUN pip install --no-cache-dir "./[generation,vllm]"

FROM source AS build-learner
RUN pip install --no-cache-dir "torch==2.13.0" \
    && pip install --no-cache-dir "./[learner,tracking,fetch]"

FROM source AS build-driver
RUN pip install --no-cache-dir "torch==2.13.0" \
    && pip install --no-cache-dir "./[generation,math,data]"

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

FROM runtime AS rollout-worker-vllm
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
