#!/usr/bin/env bash
# DoRA through the CLI (use_dora: true; model/layer.cc Note [DoRA]) on a 6-layer Qwen2 (q/k/v
# biases, all seven linears adapted):
# 1. 12 optimizer steps give the same losses (all digits) and adapter bytes resident, streamed from
#    RAM and from disk, with a budget that leaves some layers resident, and under every recompute
#    mode; the same for QLoRA + DoRA (an NF4 base) and for DoRA with lora_dropout 0.1 (layer.cc
#    Note [DoRA with dropout]); the losses differ from plain LoRA's and from dropout 0.
# 2. The adapter is PEFT's DoRA layout: use_dora true, one lora_magnitude_vector [out] per target,
#    and it resumes as lora_model_dir; a use_dora mismatch is refused by name.
# 3. `merge` folds m / ||W + s B A|| into the weights: the merged model's logits equal the base +
#    adapter logits (f32, within 1e-5 of the largest logit).
set -euo pipefail
bin=$(realpath "$1")
. "$(dirname "$0")/six_layer_fixture.sh"
six_layer_setup "$bin" tiny-qwen2 5 24 9
cat >>"$w/c.yaml" <<Y
use_dora: true
lora_r: 4
lora_alpha: 8
lora_dropout: 0
lora_target_modules: all-linear
micro_batch_size: 2
gradient_accumulation_steps: 2
max_steps: 12
sequence_len: 48
learning_rate: 0.003
Y

run() {  # run NAME ARGS...: trains with the extra CLI overrides, prints "<sig> | <plan>"
  local name=$1
  shift
  if ! "$bin" train "$w/c.yaml" --output_dir="$w/o_$name" "$@" >"$w/$name.log" 2>&1; then
    cat "$w/$name.log"
    exit 1
  fi
  [ "$(grep -c '"loss"' "$w/o_$name/metrics.jsonl")" -eq 12 ] || { echo "$name: not 12 steps"; exit 1; }
  echo "$(sig_of "$w/o_$name") | $(grep -m1 '^plan:' "$w/$name.log")"
}

for adapter in lora qlora dropout; do
  ref=""
  partial=0
  for v in "off 2 - auto" "off 2 - full" "off 2 - none" "ram 2 - auto" "disk 3 - auto" "ram 2 BUDGET auto" \
           "disk 2 BUDGET full"; do
    set -- $v
    extra=(--stream=$1 --stream_buffers=$2 --recompute=$4)
    case $adapter in
      qlora) extra+=(--adapter=qlora);;
      dropout) extra+=(--lora_dropout=0.1);;
    esac
    budget=$3
    # Two of the six layers resident, the rest streamed (six_layer_fixture.sh budget_for).
    [ "$3" = BUDGET ] && budget=$(budget_for "$bin" "$w/c.yaml" 2 "${extra[@]}")
    [ "$budget" != "-" ] && extra+=(--vram_budget=$budget)
    line=$(run "${adapter}_$1_$2_$3_$4" "${extra[@]}")
    echo "$adapter $v: $line"
    sig=${line%% |*}
    k=$(echo "$line" | sed -E 's/.* ([0-9]+) of 6 layers resident.*/\1/')
    [ "$k" -lt 6 ] && [ "$k" -gt 0 ] && partial=$((partial + 1))
    if [ -z "$ref" ]; then ref=$sig; elif [ "$sig" != "$ref" ]; then echo "MISMATCH vs the first $adapter run"; exit 1; fi
  done
  [ "$partial" -ge 1 ] || { echo "$adapter: no variant left k of 6 layers resident (0 < k < 6)"; exit 1; }
  grep -q "DoRA r=4" "$w/${adapter}_off_2_-_auto.log" || { echo "banner does not say DoRA"; exit 1; }
done
# Plain LoRA on the same data differs (the magnitudes are real), and so does dropout 0.
plain=$(run plain --use_dora=false)
[ "${plain%% |*}" != "$(sig_of "$w/o_lora_off_2_-_auto")" ] || { echo "DoRA run equals plain LoRA"; exit 1; }
[ "$(sig_of "$w/o_dropout_off_2_-_auto")" != "$(sig_of "$w/o_lora_off_2_-_auto")" ] || { echo "dropout changed nothing"; exit 1; }

# 2. The adapter layout.
python3 - "$w/o_lora_off_2_-_auto" <<'PY'
import json, struct, sys
d = sys.argv[1]
c = json.load(open(d + "/adapter_config.json"))
assert c["use_dora"] is True, c["use_dora"]
raw = open(d + "/adapter_model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
mags = [k for k in h if k.endswith(".lora_magnitude_vector")]
assert len(mags) == 6 * 7, len(mags)
q = h["base_model.model.model.layers.0.self_attn.q_proj.lora_magnitude_vector"]
assert q["dtype"] == "F32" and len(q["shape"]) == 1, q
print("adapter: use_dora, %d magnitude vectors" % len(mags))
PY
# Resume from the adapter: one more step runs; a plain-LoRA run refuses it by name.
run resumed --lora_model_dir="$w/o_lora_off_2_-_auto" --max_steps=12 >/dev/null
if "$bin" train "$w/c.yaml" --use_dora=false --lora_model_dir="$w/o_lora_off_2_-_auto" --output_dir="$w/x" >"$w/x.log" 2>&1; then
  echo "a use_dora adapter was accepted by a plain LoRA run"; exit 1
fi
grep -q "use_dora=true but the run uses use_dora=false" "$w/x.log" || { cat "$w/x.log"; exit 1; }

# 3. merge: merged logits == base + adapter logits.
"$bin" merge --model "$w/m" --adapter "$w/o_lora_off_2_-_auto" --out "$w/merged" --dtype float32 >/dev/null
"$bin" logits --model "$w/m" --adapter "$w/o_lora_off_2_-_auto" --ids 1,5,9,200,7,3,44,300 --out "$w/l_ad.st" \
  --device cpu --dtype float32 >/dev/null
"$bin" logits --model "$w/merged" --ids 1,5,9,200,7,3,44,300 --out "$w/l_mg.st" --device cpu --dtype float32 >/dev/null
"$bin" logits --model "$w/m" --ids 1,5,9,200,7,3,44,300 --out "$w/l_base.st" --device cpu --dtype float32 >/dev/null
python3 - "$w" <<'PY'
import json, struct, sys
import numpy as np
def logits(p):
    raw = open(p, "rb").read(); n = struct.unpack("<Q", raw[:8])[0]; h = json.loads(raw[8:8 + n])
    v = h["logits_0"]; return np.frombuffer(raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]], np.float32)
w = sys.argv[1]
a, m, b = logits(w + "/l_ad.st"), logits(w + "/l_mg.st"), logits(w + "/l_base.st")
err = np.abs(a - m).max() / np.abs(a).max()
moved = np.abs(a - b).max() / np.abs(a).max()
print("merge: max |adapter - merged| / max |logit| = %.2e (the adapter moved them %.2e)" % (err, moved))
assert err < 1e-5 and moved > 1e-3, (err, moved)
PY

echo "DoRA: bit-identical across plans (LoRA and QLoRA bases, with dropout), PEFT layout, resume, merge"
