#!/usr/bin/env bash
# Installs what the build and tests need, skipping what is already there.
# Debian packages through apt-get, Python packages through pip. Safe to run repeatedly.
set -euo pipefail

debs=(cmake g++ make pkg-config nlohmann-json3-dev libyaml-cpp-dev libopenblas-dev libgtest-dev libpng-dev libsnappy-dev libzstd-dev liblz4-dev libbrotli-dev zlib1g-dev python3 python3-pip)
missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install_deps: apt-get install ${missing[*]}"
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq || true
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi

# Python packages used by tests as independent oracles (HF tokenizers, sentencepiece, gguf's dequantizers).
py=python3
pips=(tokenizers sentencepiece gguf numpy jinja2)
pmissing=()
for p in "${pips[@]}"; do
  $py -c "import $p" 2>/dev/null || pmissing+=("$p")
done
if ((${#pmissing[@]})); then
  echo "install_deps: pip install ${pmissing[*]}"
  $py -m pip install -q "${pmissing[@]}" || $py -m pip install -q --break-system-packages "${pmissing[@]}"
fi

# cuDNN frontend (header-only C++; the pip wheel ships it in <site-packages>/include) for the CUDA
# backend's cuDNN SDPA attention. Only when nvcc exists; optional: the build works without it.
if command -v nvcc >/dev/null 2>&1 || [[ -x /usr/local/cuda/bin/nvcc ]]; then
  has_cfe='import importlib.util as u, os, sys
s = u.find_spec("cudnn")
sys.exit(0 if s and s.origin and os.path.exists(os.path.join(os.path.dirname(os.path.dirname(s.origin)), "include", "cudnn_frontend.h")) else 1)'
  if ! $py -c "$has_cfe" 2>/dev/null; then
    echo "install_deps: pip install nvidia-cudnn-frontend"
    $py -m pip install -q nvidia-cudnn-frontend 2>/dev/null || $py -m pip install -q --break-system-packages nvidia-cudnn-frontend ||
      echo "install_deps: WARNING: nvidia-cudnn-frontend did not install; the CUDA backend builds without cuDNN attention" >&2
  fi
fi
