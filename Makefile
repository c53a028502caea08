# grpo-pipeline developer entry points. `make install` then `make test` on a fresh clone.
VENV ?= .venv
PY := $(VENV)/bin/python
TOOLS := .tools
BUF := $(TOOLS)/node_modules/.bin/buf
export OMP_NUM_THREADS ?= 1
export MKL_NUM_THREADS ?= 1
export TOKENIZERS_PARALLELISM ?= false
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1

.PHONY: install proto proto-check lint test soak faults bench bench-vs-trl gpu-check run gsm8k-chat-inputs clean config-docs chart-schema node-verifier seccomp-profile

install:  ## venv + CPU torch (when no GPU) + editable install with every extra; bubblewrap, runsc and buf
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	scripts/install-torch.sh $(VENV)
	$(PY) -m pip install -q -e '.[all,k8s,dev]'
	command -v bwrap >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap); } || \
	  echo "warning: bubblewrap missing; the code verifier will refuse to start"
	command -v runsc >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq runsc); } || \
	  echo "warning: runsc (gVisor) missing; make soak's gVisor run of the sandbox will fail"
	test -x $(BUF) || (mkdir -p $(TOOLS) && cd $(TOOLS) && npm install --silent --no-audit --no-fund @bufbuild/buf@1.75.0)

proto:  ## regenerate grpo/v1 stubs from proto/ (never hand-edit grpo/v1)
	$(PY) -m grpc_tools.protoc -Iproto --python_out=. --grpc_python_out=. --pyi_out=. proto/grpo/v1/*.proto

proto-check:  ## fail when committed stubs differ from freshly generated ones
	rm -rf $(TOOLS)/proto-check && mkdir -p $(TOOLS)/proto-check
	$(PY) -m grpc_tools.protoc -Iproto --python_out=$(TOOLS)/proto-check --grpc_python_out=$(TOOLS)/proto-check --pyi_out=$(TOOLS)/proto-check proto/grpo/v1/*.proto
	diff -r -x __init__.py -x __pycache__ $(TOOLS)/proto-check/grpo/v1 grpo/v1 || { echo "grpo/v1 stubs are stale: run make proto"; exit 1; }

lint:  ## ruff + mypy + buf lint + hadolint
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) scripts/typing_view.py $(TOOLS)/typing
	cd $(TOOLS)/typing && $(abspath $(VENV))/bin/mypy --config-file $(CURDIR)/pyproject.toml -p grpo
	cd proto && ../$(BUF) lint
	$(VENV)/bin/hadolint Dockerfile

test: proto-check  ## the whole suite (unit, service, end-to-end, chart); < 15 min on 2 cores
	$(PY) -m pytest -q -m "not slow and not gpu and not vllm"

soak:  ## bounded fault/soak runs kept out of `make test`
	$(PY) -m pytest -q -m slow

faults:  ## the fault matrix of grpo run on e2e-tiny (docs/runtime.md: crashes, hangs (Redis too), stalls, full disks, damaged checkpoints, Redis memory, a second run, moved or copied dirs, changed data) and a killed/hung learner rank: ~14 min on 2 busy cores (docs/results/2026-12-05-faults.md)
	$(PY) -m pytest -q -m faults tests/faults tests/learner_service/test_rank_failure.py

chart-wiring:  ## the Helm release rendered and run as local processes, trains 3 steps (docs/kubernetes.md): ~2 min on 2 cores
	$(PY) -m pytest -q -m wiring tests/helm/test_chart_wiring.py

bench:  ## speed and memory benchmarks, printed as ratios measured in the same run
	$(PY) -m bench

gpu-check:  ## learner step (tokens/s, MFU, memory), FSDP2, LoRA and generation of a 0.5B model on a CUDA device, <= 5 min (docs/gpu-check.md); GPU_CHECK_ARGS=--dry-run on the CPU
	scripts/gpu-check.sh $(GPU_CHECK_ARGS)

TRL_VENV ?= .venv-trl
bench-vs-trl:  ## the main job's task side by side with TRL's GRPOTrainer (TRL in its own venv, 3 seeds; long)
	test -x $(TRL_VENV)/bin/python || python3 -m venv $(TRL_VENV)
	scripts/install-torch.sh $(TRL_VENV)
	$(TRL_VENV)/bin/python -c "import trl" 2>/dev/null || $(TRL_VENV)/bin/python -m pip install -q trl==1.16.0
	$(PY) -m bench.bench_vs_trl --trl-python $(TRL_VENV)/bin/python $(BENCH_VS_TRL_ARGS)

run:  ## the main job: SFT warm start then GRPO on arithmetic, on this machine
	$(VENV)/bin/grpo run configs/arith-cpu.yaml

GSM8K_CHAT ?= runs/gsm8k-chat-inputs
gsm8k-chat-inputs:  ## the inputs of configs/gsm8k-chat.yaml: a tiny Qwen2 with a BPE tokenizer and a chat template, GSM8K train as Parquet
	$(VENV)/bin/grpo model init $(GSM8K_CHAT)/model --tokenizer bpe --vocab-size 1024 --max-positions 512
	$(PY) scripts/gsm8k_parquet.py $(GSM8K_CHAT)/gsm8k-train.parquet

node-verifier:  ## install the Node.js example verifier's packages (examples/verifier-node: @grpc/grpc-js, @grpc/proto-loader from npm)
	cd examples/verifier-node && npm ci --silent --no-audit --no-fund

REGISTRY ?= ghcr.io/grpo-pipeline
TAG ?= 0.1.0
PYTHON_DIGEST ?=
PYTHON_DEV_DIGEST ?=
images:  ## build every image target (docker/podman/buildah; PYTHON_DIGEST, PYTHON_DEV_DIGEST required: sha256:<64 hex>)
	$(PY) scripts/images.py build --registry $(REGISTRY) --tag $(TAG) --python-digest "$(PYTHON_DIGEST)" --python-dev-digest "$(PYTHON_DEV_DIGEST)" $(IMAGES_ARGS)

images-lock:  ## regenerate docker/constraints.txt, the one lock of every image (pip --dry-run against PyPI)
	$(PY) scripts/images.py lock

images-check:  ## the images' extras resolve exactly as docker/constraints.txt locks them (pip --dry-run; needs PyPI)
	$(PY) scripts/images.py check-lock

VLLM_VENV ?= .venv-vllm
vllm-contract:  ## install the pinned vllm in its own venv (several GB) and check every vllm call of vllm_backend.py against its real signatures (no GPU)
	test -x $(VLLM_VENV)/bin/python || python3 -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -c "import vllm" 2>/dev/null || $(VLLM_VENV)/bin/python -m pip install -q -c docker/constraints.txt "vllm==$$(sed -n 's/^vllm==//p' docker/constraints.txt)"
	$(VLLM_VENV)/bin/python scripts/vllm_contract.py

chart-schema:  ## regenerate the service-config part of helm/grpo-pipeline/values.schema.json from the settings models
	$(PY) scripts/chart_schema.py

seccomp-profile:  ## regenerate the code verifier's Localhost seccomp profile (helm/grpo-pipeline/files/code-sandbox-seccomp.json)
	$(PY) scripts/seccomp_profile.py

config-docs:  ## regenerate docs/configuration.md from the settings models' Field descriptions
	$(PY) -m grpo.services.runtime.config --markdown > docs/configuration.md

clean:
	rm -rf .pytest_cache .mypy_cache .ruff_cache $(TOOLS)/proto-check
