#!/bin/bash
# Lent activation memory (stream/prefetcher.h Note [lent activation memory]) side by side: for each
# row MODEL:SEQ:BATCH, the resident step, the streamed step (every layer through the pool's 2
# buffers) with the pool borrowing dead activation regions, and the same with
# STREAMTUNE_LEND_ACTIVATIONS=0; the issue's ratio and the loss bits of all three. Expects
# .devbin/pack.tar.xz with streamtune (+ lib/). Writes $OUT/rows.jsonl.
set -u
. tools/gpu/bench_rows.sh
bench_setup
for r in ${ROWS:?}; do
  IFS=: read -r m s b <<< "$r"
  a=(--preset $m --seq $s --batch $b --recompute ${RECOMPUTE:-none} --steps ${STEPS:-3} --warmup ${WARMUP:-3})
  bench_row $F streamtune "resident" "${a[@]}" --stream off --no-ceilings
  bench_row $F streamtune "lent" "${a[@]}" --stream ram
  STREAMTUNE_LEND_ACTIVATIONS=0 bench_row $F streamtune "not lent" "${a[@]}" --stream ram
  echo "$m@$s x$b done t=${SECONDS}s"
done
python3 - $F <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
res = {(r["model"], r["seq"], r["batch"]): r for r in rows if r.get("label") == "resident" and "error" not in r}
print("| model | seq | batch | resident ms | label | streamed ms | loads / hits / lent slots | GB/step | floor ms | streamed / max | same loss bits |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for r in rows:
    if "error" in r:
        print("ERROR", r); continue
    if r["label"] == "resident":
        continue
    k = (r["model"], r["seq"], r["batch"]); base = res.get(k)
    if base is None:
        continue
    floor = r.get("transfer_floor_ms") or 0
    print("| %s | %d | %d | %.1f | %s | %.1f | %d / %d / %d | %.2f | %.1f | %.3f | %s |" % (
        k + (base["step_ms"], r["label"], r["step_ms"], r["loads_per_step"], r["reuse_hits_per_step"], r.get("lent_slots", 0),
             r["bytes_streamed_per_step"] / 1e9, floor, r["step_ms"] / max(base["step_ms"], floor),
             "yes" if r["loss_last_exact"] == base["loss_last_exact"] else "NO")))
PY
