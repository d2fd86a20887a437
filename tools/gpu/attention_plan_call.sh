#!/bin/bash
# The fused attention workspace before resident layers (stream/planner.h Note [fused attention
# plan]), side by side with the previous build: bench rows in budgets where the old plan left
# cuDNN out (3B at 2048 in 5 GiB), a link-bound one where the workspace displaces layers (3B in
# 3 GiB), the 4 GiB rows; and the all-resident run whose loss bits the streamed ones must give.
# Expects .devbin/pack.tar.xz with streamtune and streamtune_prev (+ lib/). Writes $OUT/rows.jsonl.
set -u
. tools/gpu/bench_rows.sh
bench_setup
S="--steps ${STEPS:-4} --warmup 1"
bench_row $F streamtune resident --preset qwen2.5-3b --seq 2048 --stream off $S
for b in streamtune streamtune_prev; do
  for q in none code12; do bench_row $F $b "5GiB" --preset qwen2.5-3b --seq 2048 --stream ram --quant $q --vram-budget 5GiB $S; done
  bench_row $F $b "3GiB" --preset qwen2.5-3b --seq 2048 --stream ram --quant code12 --vram-budget 3GiB $S
  bench_row $F $b "4GiB" --preset qwen2.5-7b --seq 2048 --stream ram --quant code12 --vram-budget 4GiB $S
  bench_row $F $b "4GiB" --preset llama3-8b --seq 4096 --stream ram --quant code12 --vram-budget 4GiB $S
done
print_rows $F
