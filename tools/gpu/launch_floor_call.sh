#!/bin/bash
# The launch-plan grant's floor (stream/planner.h Note [launch plan memory]) side by side with the
# previous build: budgets whose leftover beside the residency is between the new floor (8 MiB)
# and the old one (2 MiB a layer). Expects .devbin/pack.tar.xz with streamtune and streamtune_prev
# (+ lib/). ROWS="model:seq:quant:budget ...". Writes $OUT/rows.jsonl.
set -u
. tools/gpu/bench_rows.sh
bench_setup
for r in ${ROWS:-"qwen2.5-3b:2048:code12:5GiB"}; do
  IFS=: read -r m s q b <<< "$r"
  for bin in streamtune streamtune_prev; do
    bench_row $F $bin "$b" --preset $m --seq $s --stream ram --quant $q --vram-budget $b --steps ${STEPS:-4} --warmup 1 --no-ceilings
  done
done
print_rows $F
