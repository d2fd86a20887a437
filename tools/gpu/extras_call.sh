#!/bin/bash
# offload_embeddings auto / true / false side by side (stream/planner.h Note [host extras plan]):
# where the lm_head should live and whether auto finds it. Expects .devbin/pack.tar.xz with
# streamtune (+ lib/). ROWS="model:seq:quant:budget ...". Writes $OUT/rows.jsonl.
set -u
. tools/gpu/bench_rows.sh
bench_setup
for r in ${ROWS:?}; do
  IFS=: read -r m s q b <<< "$r"
  for off in auto true false; do
    bench_row $F streamtune "$b offload $off" --preset $m --seq $s --stream ram --quant $q --vram-budget $b \
      --offload-embeddings $off --steps ${STEPS:-4} --warmup 1 --no-ceilings
  done
done
print_rows $F
