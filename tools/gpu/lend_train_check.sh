#!/bin/bash
# `train` with lent activation memory (stream/prefetcher.h Note [lent activation memory]): the
# SmolLM2-shaped bit fixture (tools/gpu/smol_fixture.sh: 2 micro-batches of 2 x 256 tokens a step,
# all seven targets, LoRA dropout 0.1; each layer's saved region with recompute none, ~8 MB, holds
# its 6.8 MiB blob), resident (the reference) and in a budget that streams layers, with recompute
# none and micro-batch-major order (one arena slot: the Model lends), with and without
# STREAMTUNE_LEND_ACTIVATIONS=0, and from disk: one loss and adapter signature expected.
# Expects .devbin/pack.tar.xz with streamtune (+ lib/). BUDGET (default 600MiB).
set -u
. tools/gpu/smol_fixture.sh
tar xJf .devbin/pack.tar.xz -C .devbin
export LD_LIBRARY_PATH=$PWD/.devbin/lib
B=$PWD/.devbin/streamtune
W=$(mktemp -d)
smol_fixture $B $W
ref=""
for v in "off auto - 1" "ram none ${BUDGET:-600MiB} 1" "ram none ${BUDGET:-600MiB} 0" "disk none ${BUDGET:-600MiB} 1"; do
  set -- $v
  d=$W/run_$1_$2_$4
  budget=""; [ "$3" != "-" ] && budget="--vram_budget=$3"
  STREAMTUNE_LEND_ACTIVATIONS=$4 $B train $W/bit.yaml --stream=$1 --recompute=$2 --layer_major=false $budget \
    --output_dir=$d >$d.log 2>&1
  rc=$?
  s=$(bit_sig $d)
  [ -z "$ref" ] && ref=$s
  echo "train stream=$1 recompute=$2 budget=$3 lend=$4 rc=$rc sig=$s $([ "$s" = "$ref" ] && echo IDENTICAL || echo DIFFERENT) | $(grep -m1 '^plan:' $d.log) | $(grep -m1 "^streamed " $d.log)"
  [ $rc -eq 0 ] || tail -5 $d.log
done
# compute-sanitizer memcheck over `bench` on an 8-layer f32 model with recompute none at 256 tokens
# (each region holds a blob: the pool copies into the Model's arena) and at 64.
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ -x "$CS" ]; then
  $B init-model --preset tiny-qwen2 --out $W/tq >/dev/null
  python3 -c "
import json; c = json.load(open('$W/tq/config.json'))
c.update(num_hidden_layers=8, hidden_size=128, intermediate_size=256)
json.dump(c, open('$W/tq8.json', 'w'))"
  $B init-model --config $W/tq8.json --out $W/tq8 --dtype float32 >/dev/null
  # At 64 tokens a region is half a blob: slots span two adjacent regions (Note [lent region spans]).
  for seq in ${MEMCHECK_SEQS:-256 64}; do
    timeout 240 $CS --tool memcheck --error-exitcode 9 $B bench --model $W/tq8 --seq $seq --stream ram --recompute none \
      --steps 3 --warmup 1 --device cuda --dtype float32 --no-ceilings --json >$W/cs.json 2>$W/cs.err
    echo "compute-sanitizer memcheck seq $seq rc=$? $(grep -o '"lent_slots":[0-9]*' $W/cs.json) $(grep -o '"loads_per_step":[0-9]*' $W/cs.json) $(grep -E 'ERROR SUMMARY' $W/cs.err $W/cs.json | head -2 | tr '\n' ' ')"
  done
fi
