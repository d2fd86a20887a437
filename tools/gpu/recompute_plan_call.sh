#!/bin/bash
# recompute auto with the speeds probed (stream/planner.h Note [recompute plan]): for each row
# MODEL:SEQ:BUDGET, `bench --stream ram --vram-budget BUDGET` with recompute auto (the planner's
# choice), full and attention and none forced: the step, the plan and the loss bits of each.
# Expects .devbin/pack.tar.xz with streamtune (+ lib/). ROWS="qwen2.5-7b:2048:22GiB ...".
set -u
. tools/gpu/bench_rows.sh
bench_setup
for r in ${ROWS:?}; do
  IFS=: read -r m s b <<< "$r"
  for rc in ${MODES:-auto attention none}; do
    bench_row $F streamtune "$b recompute $rc" --preset $m --seq $s --recompute $rc --vram-budget $b --stream ram \
      --steps ${STEPS:-3} --warmup ${WARMUP:-3} --no-ceilings
  done
done
print_rows $F
python3 - $F <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print(r["label"], "->", r.get("recompute"), "lent", r.get("lent_slots"), "loads", r.get("loads_per_step"), r.get("error", ""))
PY
