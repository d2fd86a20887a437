#!/usr/bin/env bash
# QLoRA through the CLI (adapter: qlora = an NF4 base, model/weights.h Note [NF4 base layout]):
# 12 optimizer steps on a 6-layer Llama give the same losses (all digits) and adapter bytes
# resident, streamed from RAM and from disk, with a budget that leaves some layers resident, and
# under every recompute mode; the losses differ from plain LoRA on the same base (the quantization
# is real); the store is cached apart from the bf16 one and a quarter of its size per layer; the
# bitsandbytes options we do not implement are refused by name.
set -euo pipefail
bin=$(realpath "$1")
. "$(dirname "$0")/six_layer_fixture.sh"
six_layer_setup "$bin" tiny-llama 3 24 7
cat >>"$w/c.yaml" <<Y
adapter: qlora
load_in_4bit: true
bnb_4bit_quant_type: nf4
bnb_4bit_use_double_quant: false
lora_r: 4
lora_alpha: 8
lora_dropout: 0.1
lora_target_modules: [q_proj, v_proj, gate_proj, down_proj]
micro_batch_size: 2
gradient_accumulation_steps: 2
max_steps: 12
sequence_len: 48
learning_rate: 0.003
Y
ref=""
partial=0
# Budgets that leave one, two or three of the six layers resident (six_layer_fixture.sh budget_for).
b1=$(budget_for "$bin" "$w/c.yaml" 3 --stream=ram --stream_buffers=2 --recompute=auto)
b2=$(budget_for "$bin" "$w/c.yaml" 1 --stream=disk --stream_buffers=2 --recompute=full)
b3=$(budget_for "$bin" "$w/c.yaml" 2 --stream=ram --stream_buffers=3 --recompute=auto)
for v in "off 2 - auto" "off 2 - full" "off 2 - none" "ram 2 - auto" "disk 3 - auto" "ram 2 $b1 auto" "disk 2 $b2 full" "ram 3 $b3 auto"; do
  set -- $v
  extra=(--recompute="$4")
  [ "$3" != "-" ] && extra+=(--vram_budget="$3")
  out="$w/o_$1_$2_$3_$4"
  if ! "$bin" train "$w/c.yaml" --stream=$1 --stream_buffers=$2 "${extra[@]}" --output_dir="$out" >"$out.log" 2>&1; then
    cat "$out.log"; exit 1
  fi
  plan=$(grep -m1 '^plan:' "$out.log")
  case "$plan" in *"(NF4 base)"*) ;; *) echo "$v: the plan does not say NF4 base: $plan"; exit 1;; esac
  k=$(echo "$plan" | sed -E 's/.* ([0-9]+) of 6 layers resident.*/\1/')
  [ "$k" -gt 0 ] && [ "$k" -lt 6 ] && partial=$((partial + 1))
  [ "$(grep -c '"loss"' "$out/metrics.jsonl")" -eq 12 ] || { echo "$v: not 12 steps"; exit 1; }
  [ -s "$out/adapter_config.json" ] || { echo "$v: no PEFT adapter config"; exit 1; }
  sig=$(sig_of "$out")
  echo "qlora $v: $sig | $plan"
  if [ -z "$ref" ]; then ref=$sig; elif [ "$sig" != "$ref" ]; then echo "MISMATCH vs the first run"; exit 1; fi
done
[ "$partial" -ge 1 ] || { echo "no budget left some layers resident and some streamed"; exit 1; }

# The same run as plain LoRA on the bf16/f32 base trains to other losses.
"$bin" train "$w/c.yaml" --adapter=lora --load_in_4bit=false --output_dir="$w/lora" >"$w/lora.log" 2>&1 || { cat "$w/lora.log"; exit 1; }
[ "$(sig_of "$w/lora")" != "$ref" ] || { echo "plain LoRA gave the QLoRA bits: nothing was quantized"; exit 1; }

# Two stores side by side in the cache; the NF4 layer file is about a quarter of the f32 one... of
# the float32 store's (the CPU trains in float32): 4.5 bits a weight against 32, plus the norms.
nf4=$(ls -d "$w"/cache/stores/*-nf4)
dense=$(ls -d "$w"/cache/stores/* | grep -v -- '-nf4$')
grep -q '"quant": "nf4"' "$nf4/manifest.json" || { echo "manifest lacks quant nf4"; exit 1; }
a=$(stat -c %s "$nf4/layer_000.safetensors"); b=$(stat -c %s "$dense/layer_000.safetensors")
[ $((a * 5)) -lt "$b" ] || { echo "nf4 layer file $a bytes vs $b dense: not smaller"; exit 1; }

# `shard --quant nf4` writes the same layer bytes the trainer's store has.
"$bin" shard "$w/m" --dtype float32 --quant nf4 --out "$w/shard_nf4" >/dev/null 2>&1
cmp "$w/shard_nf4/layer_003.safetensors" "$nf4/layer_003.safetensors" || { echo "shard --quant nf4 differs from the trainer's store"; exit 1; }

# Options we do not implement are refused by name, exit non-zero.
expect_error() {  # override message
  if "$bin" train "$w/c.yaml" "$1" --output_dir="$w/bad" >"$w/bad.log" 2>&1; then echo "accepted $1"; exit 1; fi
  grep -q -- "$2" "$w/bad.log" || { echo "$1: message lacks '$2':"; cat "$w/bad.log"; exit 1; }
}
expect_error --bnb_4bit_use_double_quant=true "double quantization is not supported"
expect_error --bnb_4bit_quant_type=fp4 "'fp4' is not supported"
expect_error --load_in_8bit=true "8-bit base weights are not supported"
expect_error --adapter=lora "load_in_4bit: true needs adapter: qlora"
echo "qlora: all runs identical ($ref), $partial partly streamed"
