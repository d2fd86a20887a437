#!/bin/bash
# The code12 base on the device (core/code12.h): the decoder's bits and speed (cuda_ops gputest),
# `train` bit signatures with stream_compress on and off (resident, streamed from RAM and disk),
# then bench rows side by side with --quant none and code12 (streamed from pinned RAM, and
# resident for the decode's cost), each row's floor from the link measured in the same run.
# Expects .devbin/pack.tar.xz (streamtune, gputests/, lib/). Writes $OUT/rows.jsonl.
set -u
tar xJf .devbin/pack.tar.xz -C .devbin
export LD_LIBRARY_PATH=$PWD/.devbin/lib
B=$PWD/.devbin/streamtune
.devbin/gputests/backend_cuda_cuda_ops_gputest 2>&1 | grep -E "^\[  (PASSED|FAILED)|Failure|decode_code12|Expected|Which is" | head -20
W=$(mktemp -d /tmp/c12_XXXX)
. tools/gpu/smol_fixture.sh
DROPOUT=0.1 smol_fixture $B $W
for v in "off - false" "off - true" "ram 300MiB true" "disk 300MiB true" "ram 300MiB false"; do
  set -- $v; d=$W/o_$1_$2_$3
  extra=""; [ "$2" != "-" ] && extra="--vram_budget=$2"
  $B train $W/bit.yaml --stream=$1 $extra --stream_compress=$3 --output_dir=$d > $d.log 2>&1; rc=$?
  echo "train stream=$1 budget=$2 compress=$3 rc=$rc sig=$(bit_sig $d) | $(grep -m1 '^plan:' $d.log | cut -c1-150)"
  [ $rc -ne 0 ] && tail -3 $d.log
done
: > $OUT/rows.jsonl
. tools/gpu/bench_rows.sh
row() {  # MODEL SEQ STREAM QUANT [ARGS...]
  local m=$1 s=$2 st=$3 q=$4; shift 4
  bench_row $OUT/rows.jsonl streamtune "" --preset $m --seq $s --stream $st --quant $q --steps ${STEPS:-5} --warmup 2 "$@"
}
for r in "qwen2.5-0.5b 2048" "qwen2.5-1.5b 2048" "qwen2.5-0.5b 512" "qwen2.5-3b 2048"; do
  set -- $r
  for q in none code12; do row $1 $2 ram $q; done
done
for q in none code12; do row llama3-8b 4096 ram $q --vram-budget 4GiB; done
for r in "qwen2.5-1.5b 2048" "qwen2.5-0.5b 512"; do
  set -- $r
  for q in none code12; do row $1 $2 off $q; done
done
print_rows $OUT/rows.jsonl
