#!/bin/bash
# The RAM tier within a RAM budget on CUDA (store/host_memory.h Note [partial RAM store]).
#  1. The SmolLM2-shaped bit fixture (tools/gpu/smol_fixture.sh): resident (the reference), streamed
#     in 600 MiB of VRAM from RAM, from RAM with ram_budget 90MiB (the arena keeps the 54 MiB extras and ~5 of 30 layers,
#     the rest read from the store files at each use), all resident with ram_budget 1KiB (every layer
#     read from disk once), and from disk: one loss and adapter signature expected
#     (a7a6e8f0a141/e66097bb41ae since session 11).
#  2. Qwen2.5-0.5B (random bf16, init-model) at 2048 tokens in 1 GiB of VRAM, 6 steps: all in RAM
#     against ram_budget 700MiB (a few streamed layers from disk): the same losses, and what the
#     disk reads cost a step on this machine (its disk: ~1 GB/s, anchors.md).
# Expects .devbin/pack.tar.xz with streamtune (+ lib/).
set -u
. tools/gpu/smol_fixture.sh
tar xJf .devbin/pack.tar.xz -C .devbin
export LD_LIBRARY_PATH=$PWD/.devbin/lib
B=$PWD/.devbin/streamtune
W=$(mktemp -d)
smol_fixture $B $W
ref=""
for v in "off - -" "ram 600MiB -" "ram 600MiB 90MiB" "off - 1KiB" "disk 600MiB -"; do
  set -- $v
  d=$W/run_$1_$2_$3
  extra=(); [ "$2" != "-" ] && extra+=(--vram_budget=$2); [ "$3" != "-" ] && extra+=(--ram_budget=$3)
  $B train $W/bit.yaml --stream=$1 "${extra[@]}" --output_dir=$d >$d.log 2>&1
  rc=$?
  s=$(bit_sig $d)
  [ -z "$ref" ] && ref=$s
  echo "train stream=$1 vram=$2 ram_budget=$3 rc=$rc sig=$s $([ "$s" = "$ref" ] && echo IDENTICAL || echo DIFFERENT)"
  grep -m1 '^host RAM' $d.log; grep -m1 '^plan:' $d.log; grep -m1 'host memory' $d.log
  [ $rc -eq 0 ] || tail -5 $d.log
done
$B init-model --preset qwen2.5-0.5b --out $W/q05 --dtype bfloat16 >/dev/null
cat > $W/q.yaml <<Y
base_model: $W/q05
datasets:
  - path: $W/data.jsonl
    type: tokenized
dtype: bfloat16
device: cuda
lora_r: 16
lora_alpha: 32
lora_target_modules: [q_proj, v_proj]
micro_batch_size: 1
max_steps: 6
sequence_len: 2048
sample_packing: true
logging_steps: 1
cache_dir: $W/cache
Y
ref=""
for rb in - 700MiB; do
  d=$W/q_$rb
  extra=(); [ "$rb" != "-" ] && extra+=(--ram_budget=$rb)
  /usr/bin/time -f "%e s wall, %M KiB max RSS" $B train $W/q.yaml --stream=ram --vram_budget=1GiB "${extra[@]}" --output_dir=$d >$d.log 2>&1
  rc=$?
  s=$(bit_sig $d)
  [ -z "$ref" ] && ref=$s
  echo "qwen2.5-0.5b@2048 in 1 GiB, ram_budget=$rb rc=$rc sig=$s $([ "$s" = "$ref" ] && echo IDENTICAL || echo DIFFERENT)"
  grep -m1 '^host RAM' $d.log; grep -m1 '^plan:' $d.log; grep -m1 'host memory' $d.log
  grep -E '^step [0-9]+/6' $d.log | tail -3; tail -1 $d.log
done
