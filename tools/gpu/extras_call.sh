#!/bin/bash
# offload_embeddings true vs false in budgets where auto picks the host (stream/planner.h Note
# [host extras plan]): what the streamed lm_head costs a step. Expects .devbin/pack.tar.xz with
# streamtune (+ lib/). ROWS="model:seq:quant:budget ...". Writes $OUT/rows.jsonl.
set -u
tar xJf .devbin/pack.tar.xz -C .devbin
export LD_LIBRARY_PATH=$PWD/.devbin/lib
W=$(mktemp -d /tmp/ex_XXXX)
: > $OUT/rows.jsonl
for r in ${ROWS:?}; do
  IFS=: read -r m s q b <<< "$r"
  for off in auto true false; do
    line=$(.devbin/streamtune bench --preset $m --seq $s --stream ram --quant $q --vram-budget $b --offload-embeddings $off \
           --steps ${STEPS:-4} --warmup 1 --device cuda --json --no-ceilings 2>$W/err)
    if [ -n "$line" ]; then echo "{\"budget\":\"$b\",\"asked\":\"$off\",${line#\{}" >> $OUT/rows.jsonl
    else echo "{\"model\":\"$m\",\"asked\":\"$off\",\"error\":\"$(tail -c 300 $W/err | tr '\"\n' "' ")\"}" >> $OUT/rows.jsonl; fi
  done
done
python3 - $OUT/rows.jsonl <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if "error" in r:
        print("ERROR", r); continue
    print("%-11s %5d %-6s %-7s offload %-5s -> %-5s step %7.1f ms  resident %2d  GB/step %5.2f  exposed %6s  loss %s" % (
        r["model"], r["seq"], r["quant"], r["budget"], r["asked"], r.get("offload_embeddings"), r["step_ms"],
        r["resident_layers"], r["bytes_streamed_per_step"] / 1e9, r.get("exposed_copy_ms"), r.get("loss_last_exact")))
PY
