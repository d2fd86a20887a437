#!/usr/bin/env bash
# The speed issue's streamed target over its whole grid, in ONE device call (binaries staged by
# tools/cuda/perf_run.sh stage BUILD_DIR; carry .devbin): for each row MODEL:SEQ:BATCH, `streamtune
# bench` resident (--stream off, the planner's recompute unless RECOMPUTE is given) and then streamed
# from pinned RAM (--stream ram, every layer through the pool's 2 buffers) with the recompute the
# resident row ran -- the same work on both sides -- and the ratio
#   streamed step / max(resident step, bytes streamed per step / link measured in the streamed row)
# which the issue wants <= 1.05; also whether both rows logged the same loss bits.
#   ROWS="qwen2.5-0.5b:512:1 ..." (default: 0.5B-14B x 512/2048/4096 x batch 1/4, smallest first)
#   RECOMPUTE=auto|none|attention|full  STEPS=3  WARMUP=3  DEADLINE_S=540  OUT=dir  BENCH_DEVICE=cpu (a local check)
# Three warm-up steps: with lent slots the pool settles over the first steps and the launch plans
# of the settled slot addresses are recorded on their second sighting (RESULTS session 20, call 3).
# Rows not started by DEADLINE_S are listed as skipped; the table is also written as JSON.
set -uo pipefail
[ -f .devbin/pack.tar.xz ] && tar xJf .devbin/pack.tar.xz -C .devbin
export LD_LIBRARY_PATH=$PWD/.devbin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
B=${BIN:-$PWD/.devbin/streamtune}
OUT=${OUT:-/tmp/sweep}; mkdir -p "$OUT"
if [ -z "${ROWS:-}" ]; then
  ROWS=""
  for m in qwen2.5-0.5b qwen2.5-1.5b qwen2.5-3b qwen2.5-7b qwen2.5-14b; do
    for s in 512 2048 4096; do for b in 1 4; do ROWS="$ROWS $m:$s:$b"; done; done
  done
fi
RECOMPUTE=${RECOMPUTE:-auto}
STEPS=${STEPS:-3}
WARMUP=${WARMUP:-3}
DEADLINE_S=${DEADLINE_S:-540}
J=$OUT/sweep.jsonl
field() { python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print(r.get(sys.argv[2], ""))' "$1" "$2"; }
for row in $ROWS; do
  IFS=: read -r m s b <<<"$row"
  if [ "$SECONDS" -ge "$DEADLINE_S" ]; then
    echo "{\"model\":\"$m\",\"seq\":$s,\"batch\":$b,\"stream\":\"off\",\"error\":\"skipped (deadline)\"}" >>"$J"
    continue
  fi
  rec=$RECOMPUTE
  for mode in off ram; do
    ceil=--no-ceilings; [ "$mode" = ram ] && ceil=  # the streamed row measures the link (its floor)
    line=$("$B" bench --preset "$m" --seq "$s" --batch "$b" --steps "$STEPS" --warmup "$WARMUP" --stream "$mode" \
      --device "${BENCH_DEVICE:-cuda}" --recompute "$rec" $ceil --json 2>>"$OUT/sweep.err" | grep '^{')
    rc=$?
    [ -n "$line" ] || line="{\"model\":\"$m\",\"seq\":$s,\"batch\":$b,\"stream\":\"$mode\",\"error\":\"rc $rc\"}"
    echo "$line" >>"$J"
    echo "$m@$s x$b $mode: $(field "$line" step_ms) ms ($(field "$line" recompute)$(field "$line" error)) t=${SECONDS}s"
    # The streamed row does the resident row's work: its recompute, not its own choice.
    [ "$mode" = off ] && { r=$(field "$line" recompute); [ -n "$r" ] && rec=$r; }
  done
done
python3 - "$J" "$OUT/sweep_table.json" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
key = lambda r: (r["model"], r["seq"], r["batch"])
res = {key(r): r for r in rows if r.get("stream") == "off"}
table = []
print("| model | seq | batch | recompute | resident ms | streamed ms | GB/step | link GB/s | floor ms | exposed copy ms | streamed / max | <= 1.05 | same loss bits |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for k, r0 in res.items():
    r = next((x for x in rows if x.get("stream") == "ram" and key(x) == k), None)
    err = r0.get("error") or (r or {}).get("error") or ("" if r else "no streamed row")
    if err:
        print("| %s | %s | %s | error: %s |" % (k + (err,)))
        table.append({"model": k[0], "seq": k[1], "batch": k[2], "error": err})
        continue
    base, floor = r0["step_ms"], r.get("transfer_floor_ms") or 0
    q = r["step_ms"] / max(base, floor)
    same = r.get("loss_last_exact") == r0.get("loss_last_exact")
    t = {"model": k[0], "seq": k[1], "batch": k[2], "recompute": r0.get("recompute"), "resident_ms": base,
         "streamed_ms": r["step_ms"], "gb_per_step": r["bytes_streamed_per_step"] / 1e9,
         "link_gbps": r.get("h2d_pinned_gbps") or 0, "floor_ms": floor, "exposed_copy_ms": r.get("exposed_copy_ms"),
         "ratio": q, "met": q <= 1.05, "same_loss_bits": same}
    table.append(t)
    print("| %s | %d | %d | %s | %.1f | %.1f | %.2f | %.1f | %.1f | %.1f | %.3f | %s | %s |" % (
        k + (t["recompute"], base, r["step_ms"], t["gb_per_step"], t["link_gbps"], floor, t["exposed_copy_ms"] or 0, q,
             "yes" if t["met"] else "no", "yes" if same else "NO")))
json.dump(table, open(sys.argv[2], "w"), indent=1)
PY
