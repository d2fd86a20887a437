#!/bin/bash
# The fused attention workspace before resident layers (stream/planner.h Note [fused attention
# plan]), side by side with the previous build: bench rows in budgets where the old plan left
# cuDNN out (3B at 2048 in 5 GiB), a link-bound one where the workspace displaces layers (3B in
# 3 GiB), the 4 GiB rows; and the all-resident run whose loss bits the streamed ones must give.
# Expects .devbin/pack.tar.xz with streamtune and streamtune_prev (+ lib/). Writes $OUT/rows.jsonl.
set -u
tar xJf .devbin/pack.tar.xz -C .devbin
export LD_LIBRARY_PATH=$PWD/.devbin/lib
W=$(mktemp -d /tmp/ap_XXXX)
: > $OUT/rows.jsonl
row() {  # BUILD MODEL SEQ STREAM QUANT [ARGS...]
  local b=$1 m=$2 s=$3 st=$4 q=$5; shift 5
  local line
  line=$(.devbin/$b bench --preset $m --seq $s --stream $st --quant $q --steps ${STEPS:-4} --warmup 1 --device cuda --json "$@" 2>$W/err)
  if [ -n "$line" ]; then echo "{\"build\":\"$b\",\"args\":\"$*\",${line#\{}" >> $OUT/rows.jsonl
  else echo "{\"build\":\"$b\",\"model\":\"$m\",\"seq\":$s,\"error\":\"$(tail -c 300 $W/err | tr '\"\n' "' ")\"}" >> $OUT/rows.jsonl; fi
}
row streamtune qwen2.5-3b 2048 off none
for b in streamtune streamtune_prev; do
  for q in none code12; do row $b qwen2.5-3b 2048 ram $q --vram-budget 5GiB; done
  row $b qwen2.5-3b 2048 ram code12 --vram-budget 3GiB
  row $b qwen2.5-7b 2048 ram code12 --vram-budget 4GiB
  row $b llama3-8b 4096 ram code12 --vram-budget 4GiB
done
python3 - $OUT/rows.jsonl <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if "error" in r:
        print("ERROR", r); continue
    gb = r["bytes_streamed_per_step"] / 1e9
    link = r.get("h2d_pinned_gbps") or 0
    floor = 1e3 * gb / link if link else 0
    print("%-15s %-11s %5d %-4s %-6s %-20s step %7.1f ms  tok/s %7.0f  streamed %6.2f GB  floor %6.1f ms  resident %s  loss %s  attn %s" % (
        r["build"], r["model"], r["seq"], r["stream"], r["quant"], r["args"], r["step_ms"], r["tok_s"], gb, floor,
        r.get("resident_layers"), r.get("loss_last_exact"), r.get("attention")))
PY
