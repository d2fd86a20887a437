#!/usr/bin/env bash
# `streamtune train` (the CLI, through the layer store and the RAM tier) reproduces the HF+PEFT
# 8-step AdamW traces of every golden fixture in float32 on the CPU: loss within 1e-5 relative.
set -euo pipefail
bin=$(realpath "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMP_WAIT_POLICY=passive
for fx in llama_gqa qwen2_tied qwen3_qknorm mistral_swa qwen2_swa qwen2_dora qwen2_loraplus llama_layers; do
  line=$(python3 tools/gpu/golden_trace.py "$bin" tests/fixtures/$fx "$work/$fx" cpu float32)
  echo "$line"
  python3 -c "import json,sys; r=json.loads(sys.argv[1]); sys.exit(0 if r.get('ok') and r['max_rel_loss_err'] < 1e-5 else 1)" "$line"
done
# DoRA's dropout path (model/layer.cc Note [DoRA with dropout]) at p = 1e-9, where every element is
# kept and 1/(1-p) rounds to 1 in f32: the same 8-step trace.
line=$(GOLDEN_DROPOUT=1e-9 python3 tools/gpu/golden_trace.py "$bin" tests/fixtures/qwen2_dora "$work/qwen2_dora_d9" cpu float32)
echo "dropout 1e-9: $line"
python3 -c "import json,sys; r=json.loads(sys.argv[1]); sys.exit(0 if r.get('ok') and r['max_rel_loss_err'] < 1e-5 else 1)" "$line"
