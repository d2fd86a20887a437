#!/usr/bin/env bash
# Real-file check of the GGUF path on the default model (SmolLM2-135M-Instruct, Q4_1), for
# `make demo` and by hand; the unit tests use only committed fixtures. Fetches the model if needed,
# builds tools/gguf/gguf_dump.cc against BUILD's st_io/st_core, loads the whole file through
# GgufCheckpoint (every tensor dequantised), checks the expected config, then compares a few
# tensors with gguf-py's dequantisation (compare_dequant_real.py).
# Usage: tools/gguf/check_smollm2.sh [build_dir]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
gguf=$(bash tools/fetch_model.sh)
tool="$build/gguf_dump"

if [[ ! -f "$build/libst_io.a" ]]; then
  cmake --build "$build" --target st_io >/dev/null
fi
if [[ ! -x "$tool" || "$tool" -ot tools/gguf/gguf_dump.cc || "$tool" -ot "$build/libst_io.a" ]]; then
  ${CXX:-g++} -std=c++20 -O2 -Wall -Wextra -Isrc tools/gguf/gguf_dump.cc "$build/libst_io.a" "$build/libst_core.a" -o "$tool"
fi

out=$("$tool" info "$gguf")
echo "$out"
want="arch llama  H 576  L 30  NH 9  KVH 3  D 64  F 1536  vocab 49152"
if ! grep -q "^$want " <<<"$out"; then
  echo "check_smollm2: FAIL: expected config '$want'" >&2
  exit 1
fi
python3 tools/gguf/compare_dequant_real.py "$gguf" "$tool"
echo "check_smollm2: OK"
