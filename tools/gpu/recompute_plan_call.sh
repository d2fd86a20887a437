#!/bin/bash
# recompute auto with the speeds probed (stream/planner.h Note [recompute plan]): for each row
# MODEL:SEQ:BUDGET, `bench --stream ram --vram-budget BUDGET` with recompute auto (the planner's
# choice), full and attention and none forced: the step, the plan and the loss bits of each.
# Expects .devbin/pack.tar.xz with streamtune (+ lib/). ROWS="qwen2.5-7b:2048:22GiB ...".
# MODES: recompute modes, and "host" / "device": recompute auto with offload_embeddings forced
# true / false (Note [host extras plan]). The table gives each plan's estimate against its step.
set -u
. tools/gpu/bench_rows.sh
bench_setup
for r in ${ROWS:?}; do
  IFS=: read -r m s b <<< "$r"
  for rc in ${MODES:-auto attention none}; do
    case $rc in
      host) args="--recompute auto --offload-embeddings true" ;;
      device) args="--recompute auto --offload-embeddings false" ;;
      *) args="--recompute $rc" ;;
    esac
    bench_row $F streamtune "$m:$s:$b recompute $rc" --preset $m --seq $s $args --vram-budget $b --stream ram \
      --steps ${STEPS:-3} --warmup ${WARMUP:-3} --no-ceilings
  done
done
print_rows $F
python3 - $F <<'PY'
import json, sys
rows = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    row, mode = r["label"].rsplit(" recompute ", 1)
    rows.setdefault(row, {})[mode] = r
# Per row: each mode's step (measured), the planner's estimate, its plan; auto against the best forced mode.
print("| row | mode | step ms | estimate ms | estimate / step | recompute | host extras | resident | lent | loads |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for row, modes in rows.items():
    for mode, r in modes.items():
        if "error" in r:
            print("| %s | %s | does not fit | | | | | |" % (row, mode)); continue
        est = r.get("plan_estimate_ms")
        print("| %s | %s | %.1f | %s | %s | %s | %s | %s | %s | %s |" % (row, mode, r["step_ms"], est,
              "%.3f" % (est / r["step_ms"]) if est else "", r.get("recompute"), r.get("offload_embeddings"),
              r.get("resident_layers"), r.get("lent_slots"), r.get("loads_per_step")))
    forced = {m: r["step_ms"] for m, r in modes.items() if m != "auto" and "error" not in r}
    if "auto" in modes and "error" not in modes["auto"] and forced:
        best = min(forced, key=forced.get)
        print("%s: auto %.1f ms (%s) vs best forced %s %.1f ms: %.3f" % (row, modes["auto"]["step_ms"],
              modes["auto"].get("recompute"), best, forced[best], modes["auto"]["step_ms"] / forced[best]))
PY
