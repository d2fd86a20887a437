#!/bin/bash
# STREAMTUNE_TIMELINE (cli/bench_timeline.h Note [device timeline]) on three streamed rows: one
# step's copies and visits as CSV in $OUT (bench/RESULTS.md session 21 call 7).
set -u
tar xJf .devbin/pack.tar.xz -C .devbin
export LD_LIBRARY_PATH=$PWD/.devbin/lib
B=$PWD/.devbin/streamtune
for row in "qwen2.5-7b 2048 4" "qwen2.5-3b 2048 1" "qwen2.5-0.5b 512 1"; do
  set -- $row
  STREAMTUNE_TIMELINE=$OUT/tl_$1_$2_$3.csv $B bench --preset $1 --seq $2 --batch $3 --steps 3 --warmup 3 --stream ram --recompute none --json 2>$OUT/tl_$1.err | grep '^{' > $OUT/tl_$1_$2_$3.json
  python3 -c "
import json; r=json.load(open('$OUT/tl_$1_$2_$3.json')); print('$row', r['step_ms'], r['exposed_copy_ms'], r['loads_per_step'], r['h2d_pinned_gbps'], r.get('probe_step_ms'))"
  tail -1 $OUT/tl_$1.err
done
