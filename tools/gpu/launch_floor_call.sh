#!/bin/bash
# The launch-plan grant's floor (stream/planner.h Note [launch plan memory]) side by side with the
# previous build: budgets whose leftover beside the residency is between the new floor (8 MiB)
# and the old one (2 MiB a layer). Expects .devbin/pack.tar.xz with streamtune and streamtune_prev
# (+ lib/). Writes $OUT/rows.jsonl.
set -u
tar xJf .devbin/pack.tar.xz -C .devbin
export LD_LIBRARY_PATH=$PWD/.devbin/lib
W=$(mktemp -d /tmp/lf_XXXX)
: > $OUT/rows.jsonl
row() {  # BUILD MODEL SEQ QUANT BUDGET
  local line
  line=$(.devbin/$1 bench --preset $2 --seq $3 --stream ram --quant $4 --vram-budget $5 --steps ${STEPS:-4} --warmup 1 \
         --device cuda --json --no-ceilings 2>$W/err)
  if [ -n "$line" ]; then echo "{\"build\":\"$1\",\"budget\":\"$5\",${line#\{}" >> $OUT/rows.jsonl
  else echo "{\"build\":\"$1\",\"model\":\"$2\",\"error\":\"$(tail -c 300 $W/err | tr '\"\n' "' ")\"}" >> $OUT/rows.jsonl; fi
}
for r in ${ROWS:-"qwen2.5-3b:2048:code12:5GiB"}; do
  IFS=: read -r m s q b <<< "$r"
  for bin in streamtune streamtune_prev; do row $bin $m $s $q $b; done
done
python3 - $OUT/rows.jsonl <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if "error" in r:
        print("ERROR", r); continue
    print("%-15s %-11s %5d %-6s %-7s step %7.1f ms  resident %2d  replays %3s eager %3s  exposed %6s  planned %.3f GiB  loss %s" % (
        r["build"], r["model"], r["seq"], r["quant"], r["budget"], r["step_ms"], r["resident_layers"],
        r.get("plan_replays_per_step"), r.get("eager_visits_per_step"), r.get("exposed_copy_ms"),
        r.get("vram_planned_bytes", 0) / 2**30, r.get("loss_last_exact")))
PY
