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
