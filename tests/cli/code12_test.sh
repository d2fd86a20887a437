#!/usr/bin/env bash
# The code12 base (core/code12.h; `shard --quant code12`, `bench --quant code12`, train
# `stream_compress: true`) through the CLI: the coded store is ~3/4 of the bf16 store per layer
# and says quant code12 in its manifest; `bench` from a real checkpoint trains to the very loss
# (all 17 digits) of the dense bf16 base, resident and with layers streamed from RAM and disk; a
# float32 store, a QLoRA base and a CPU training run (float32) are refused by name.
set -euo pipefail
bin=$(realpath "$1")
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
. "$(dirname "$0")/six_layer_fixture.sh"
make_six_layer "$bin" tiny-llama "$w/m" 5

"$bin" shard "$w/m" --dtype bfloat16 --out "$w/dense" >/dev/null 2>&1
"$bin" shard "$w/m" --dtype bfloat16 --quant code12 --out "$w/coded" >"$w/shard.log" 2>&1 || { cat "$w/shard.log"; exit 1; }
grep -q '"quant": "code12"' "$w/coded/manifest.json" || { echo "manifest lacks quant code12"; exit 1; }
a=$(stat -c %s "$w/coded/layer_002.safetensors"); b=$(stat -c %s "$w/dense/layer_002.safetensors")
# 12.2 bits of 16 on the linears; the norms and the safetensors header stay as they are.
[ $((a * 100)) -lt $((b * 82)) ] && [ $((a * 100)) -gt $((b * 70)) ] || { echo "code12 layer $a bytes vs $b dense"; exit 1; }

loss_of() {  # QUANT ARGS...: the last loss of a 3-step bench of the checkpoint (every digit) and its loads
  local q=$1
  shift
  "$bin" bench --model "$w/m" --dtype bfloat16 --quant "$q" --seq 48 --steps 3 --warmup 0 --no-ceilings --json "$@" \
    >"$w/bench.json" 2>"$w/bench.err" || { cat "$w/bench.err"; exit 1; }
  grep -o '"loss_last_exact":"[^"]*"' "$w/bench.json"
  grep -o '"loads_per_step":[0-9]*' "$w/bench.json"
}
ref=$(loss_of none --stream off | sed -n 1p)
[ -n "$ref" ] || { echo "no loss"; exit 1; }
# 1 MiB leaves one of the six layers resident: five stream through the buffers.
for args in "--stream off" "--stream ram --stream-buffers 2 --vram-budget 1MiB" "--stream disk --stream-buffers 3 --vram-budget 1MiB"; do
  out=$(loss_of code12 $args)
  echo "code12 $args: $out" | tr '\n' ' '; echo
  [ "$(echo "$out" | sed -n 1p)" = "$ref" ] || { echo "code12 ($args) vs dense $ref"; exit 1; }
  case "$args" in *vram*) echo "$out" | grep -q '"loads_per_step":[1-9]' || { echo "nothing streamed"; exit 1; };; esac
done

expect_error() {  # MESSAGE CMD...
  local msg=$1
  shift
  if "$@" >"$w/bad.log" 2>&1; then echo "accepted: $*"; exit 1; fi
  grep -q -- "$msg" "$w/bad.log" || { echo "$*: message lacks '$msg':"; cat "$w/bad.log"; exit 1; }
}
expect_error "codes bfloat16 weights" "$bin" shard "$w/m" --dtype float32 --quant code12 --out "$w/f32"
write_token_data "$w/data.jsonl" 3 8
cat > "$w/c.yaml" <<Y
base_model: $w/m
datasets:
  - path: $w/data.jsonl
    type: tokenized
device: cpu
max_steps: 1
sequence_len: 48
cache_dir: $w/cache
stream_compress: true
Y
expect_error "stream_compress: true codes bfloat16 weights, but this run computes in float32 (every CPU run does)" \
  "$bin" train "$w/c.yaml" --output_dir="$w/o"
expect_error "a QLoRA base is already 4-bit NF4" "$bin" train "$w/c.yaml" --adapter=qlora --load_in_4bit=true --output_dir="$w/o"
echo "code12: layer $a vs $b bytes; loss $ref in every run"
