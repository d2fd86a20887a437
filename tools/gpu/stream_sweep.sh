#!/usr/bin/env bash
# The speed issue's streamed target over more shapes, in ONE device call (binaries staged by
# tools/cuda/perf_run.sh stage BUILD_DIR; carry .devbin): for each row MODEL:SEQ:BATCH, `streamtune
# bench` resident (--stream off) and streamed from pinned RAM (--stream ram, every layer through 2
# buffers), both with the same --recompute (default none), and the ratio
#   streamed step / max(resident step, bytes streamed per step / link measured in the streamed row)
# which the issue wants <= 1.05.
#   ROWS="qwen2.5-0.5b:512:1 ..."  RECOMPUTE=none|full  STEPS=3  OUT=dir
set -uo pipefail
[ -f .devbin/pack.tar.xz ] && tar xJf .devbin/pack.tar.xz -C .devbin
export LD_LIBRARY_PATH=$PWD/.devbin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
B=${BIN:-$PWD/.devbin/streamtune}
OUT=${OUT:-/tmp/sweep}; mkdir -p "$OUT"
ROWS=${ROWS:-"qwen2.5-0.5b:512:1 qwen2.5-0.5b:2048:1 qwen2.5-1.5b:512:4 qwen2.5-3b:512:4 qwen2.5-7b:2048:1 llama3-8b:4096:1 qwen2.5-14b:2048:1"}
RECOMPUTE=${RECOMPUTE:-none}
STEPS=${STEPS:-3}
for row in $ROWS; do
  IFS=: read -r m s b <<<"$row"
  for mode in off ram; do
    ceil=--no-ceilings; [ "$mode" = ram ] && ceil=  # the streamed row measures the link (its floor)
    "$B" bench --preset "$m" --seq "$s" --batch "$b" --steps "$STEPS" --warmup 1 --stream "$mode" --device cuda \
      --recompute "$RECOMPUTE" $ceil --json >>"$OUT/sweep.jsonl" 2>>"$OUT/sweep.err" ||
      echo "{\"model\":\"$m\",\"seq\":$s,\"batch\":$b,\"stream\":\"$mode\",\"error\":\"rc $?\"}" >>"$OUT/sweep.jsonl"
  done
done
python3 - "$OUT/sweep.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
res = {(r["model"], r["seq"], r["batch"]): r for r in rows if r.get("stream") == "off" and "error" not in r}
print("| model | seq | batch | resident ms | streamed ms | GB/step | link GB/s | floor ms | streamed / max | <= 1.05 |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for r in rows:
    if r.get("stream") != "ram":
        continue
    k = (r["model"], r["seq"], r["batch"])
    if "error" in r or k not in res:
        print("| %s | %s | %s | error: %s |" % (k + (r.get("error") or "no resident row",)))
        continue
    base, floor = res[k]["step_ms"], r.get("transfer_floor_ms") or 0
    q = r["step_ms"] / max(base, floor)
    print("| %s | %d | %d | %.1f | %.1f | %.2f | %.1f | %.1f | %.3f | %s |" % (
        k + (base, r["step_ms"], r["bytes_streamed_per_step"] / 1e9, r.get("h2d_pinned_gbps") or 0, floor, q,
             "yes" if q <= 1.05 else "no")))
PY
