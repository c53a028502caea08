#!/usr/bin/env bash
# The GPU check of issue 31 (bench/gpu_check.py): a 0.5B Qwen2-shape model with random bf16
# weights; learner step tokens/s, MFU and peak memory (bf16 weights, and mixed precision), the
# step under FSDP2 on one GPU, a LoRA step, transformers generation tokens/s at batch 64. At
# most 5 minutes (killed past it).
#
#   scripts/gpu-check.sh [--dry-run] [--out DIR] [--cases learner,learner_mixed,fsdp,lora,generation]
#       Run it. --dry-run: tiny shapes on the CPU (what the tests run). Writes DIR/gpu-check.json
#       (default ./gpu-check-out) and prints a table last. Exit 1 when a case failed.
#   scripts/gpu-check.sh --fetch-wheels
#       Here, before a lent GPU machine runs it: put into .whl/ (git-ignored) this project's
#       wheel and the wheels for Python 3.12 that machine lacks (pydantic and its parts; a
#       protobuf as new as the generated stubs need), at the versions of this checkout's venv
#       (GPU_CHECK_WHEEL_PYTHON=3.11 fetches them for another Python, to try the flow here).
#
# On the lent machine (its python3 holds torch, transformers and peft), from the repository
# root, with `.whl` carried: `bash scripts/gpu-check.sh --out "$OUT"`. The wheels go to a
# private target folder put first on PYTHONPATH; Python starts outside the checkout, so the
# installed `grpo` (whose grpo.learner lives in learner/, mapped at install) is the one imported.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
limit_s="${GPU_CHECK_TIMEOUT_S:-300}"

if [ -x "$repo/.venv/bin/python" ]; then py="$repo/.venv/bin/python"; else py="${PYTHON:-python3}"; fi

if [ "${1:-}" = "--fetch-wheels" ]; then
  rm -rf "$repo/.whl" && mkdir -p "$repo/.whl"
  pins=()
  for name in pydantic pydantic_core annotated_types typing_inspection typing_extensions protobuf; do
    pins+=("$("$py" -c "import importlib.metadata as m; print('$name'.replace('_', '-') + '==' + m.version('$name'))")")
  done
  "$py" -m pip download -q --no-deps --only-binary=:all: --implementation cp \
    --python-version "${GPU_CHECK_WHEEL_PYTHON:-3.12}" \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$repo/.whl" "${pins[@]}"
  "$py" -m pip wheel -q --no-deps --no-build-isolation -w "$repo/.whl" "$repo"
  ls -l "$repo/.whl"
  exit 0
fi

if [ ! -x "$repo/.venv/bin/python" ] && compgen -G "$repo/.whl/*.whl" > /dev/null; then
  # A machine without this checkout's venv (the lent GPU): the carried wheels.
  site="$(mktemp -d /tmp/gpu-check-site.XXXXXX)"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$site" "$repo"/.whl/*.whl
  export PYTHONPATH="$site:$repo${PYTHONPATH:+:$PYTHONPATH}"
else
  export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
fi
export TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
args=("$@")
[[ " ${args[*]} " == *" --out "* ]] || args+=(--out "$PWD/gpu-check-out")
# Relative --out paths are the caller's: resolve them before leaving for a neutral folder.
for i in "${!args[@]}"; do
  if [ "${args[$i]}" = "--out" ] && [ $((i + 1)) -lt ${#args[@]} ]; then
    mkdir -p "${args[$((i + 1))]}"
    args[$((i + 1))]="$(cd "${args[$((i + 1))]}" && pwd)"
  fi
done
cd "$(mktemp -d /tmp/gpu-check-run.XXXXXX)"
exec timeout --signal=TERM --kill-after=10 "$limit_s" "$py" -m bench.gpu_check "${args[@]}"
