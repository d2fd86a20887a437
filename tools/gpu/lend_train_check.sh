#!/bin/bash
# `train` with lent activation memory (stream/prefetcher.h Note [lent activation memory]): the
# SmolLM2-shaped bit fixture (tools/gpu/smol_fixture.sh; 2 micro-batches of 2 x 256 tokens a step,
# LoRA dropout 0.1) packed into 1024-token rows so each layer's saved region holds a layer blob, resident
# (the reference) and streamed from RAM with recompute none and micro-batch-major order (one arena
# slot: the Model lends), with and without STREAMTUNE_LEND_ACTIVATIONS=0, and from disk: one loss and
# adapter signature expected. Expects .devbin/pack.tar.xz with streamtune (+ lib/).
set -u
. tools/gpu/smol_fixture.sh
tar xJf .devbin/pack.tar.xz -C .devbin
export LD_LIBRARY_PATH=$PWD/.devbin/lib
B=$PWD/.devbin/streamtune
W=$(mktemp -d)
smol_fixture $B $W
sed -i 's/^sequence_len: 256$/sequence_len: 1024\nsample_packing: true/' $W/bit.yaml
grep -q '^sample_packing: true' $W/bit.yaml || { echo "fixture yaml changed: no sequence_len 256 to raise"; exit 1; }
ref=""
for v in "off auto 1" "ram none 1" "ram none 0" "disk none 1"; do
  set -- $v
  d=$W/run_$1_$2_$3
  STREAMTUNE_LEND_ACTIVATIONS=$3 $B train $W/bit.yaml --stream=$1 --recompute=$2 --layer_major=false \
    --output_dir=$d >$d.log 2>&1
  rc=$?
  s=$(bit_sig $d)
  [ -z "$ref" ] && ref=$s
  echo "train stream=$1 recompute=$2 lend=$3 rc=$rc sig=$s $([ "$s" = "$ref" ] && echo IDENTICAL || echo DIFFERENT) | $(grep -m1 '^plan:' $d.log) | $(tail -1 $d.log)"
done
