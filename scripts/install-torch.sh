#!/usr/bin/env bash
# Install torch into the venv given as $1 without ever pulling a multi-GB CUDA build on a
# machine without a GPU: use a local/CPU wheel when pip's configured sources offer one
# (`+cpu` in the resolved file name), else PyTorch's CPU index. With a GPU, plain PyPI torch.
set -euo pipefail
py="$1/bin/python"
version="${TORCH_VERSION:-2.13.0}"
if "$py" -c "import torch" 2>/dev/null; then
  echo "torch $("$py" -c 'import torch; print(torch.__version__)') already installed"
  exit 0
fi
if command -v nvidia-smi >/dev/null 2>&1; then
  exec "$py" -m pip install -q "torch==$version"
fi
resolved="$("$py" -m pip install --dry-run --quiet --no-deps --report - "torch==$version" 2>/dev/null \
  | "$py" -c 'import json, sys; print(" ".join(i["download_info"]["url"] for i in json.load(sys.stdin)["install"]))' \
  || true)"
if [[ "$resolved" == *"+cpu"* || "$resolved" == *"%2Bcpu"* ]]; then
  exec "$py" -m pip install -q "torch==$version"
fi
echo "no CPU torch wheel among pip's sources; using https://download.pytorch.org/whl/cpu"
exec "$py" -m pip install -q "torch==$version" --index-url https://download.pytorch.org/whl/cpu \
  --extra-index-url https://pypi.org/simple
