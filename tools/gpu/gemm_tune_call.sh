#!/usr/bin/env bash
# GEMM algorithm tuning A/B on the H200 in ONE device call (binaries staged by
# tools/cuda/perf_run.sh stage BUILD_DIR; carry .devbin): the gemm_tune gputest (bits of the tuned
# runner == cuBLASLt's first choice, per-shape candidate log and times), then `streamtune bench`
# rows with STREAMTUNE_GEMM_TUNE=off and on (the default), interleaved, REPS runs each, and a table.
#   ROWS="qwen2.5-3b:2048 llama3-8b:4096:full ..."  (MODEL:SEQ[:RECOMPUTE])  REPS=2 STEPS=4 OUT=dir
set -uo pipefail
[ -f .devbin/pack.tar.xz ] && [ ! -x .devbin/streamtune ] && tar xJf .devbin/pack.tar.xz -C .devbin
export LD_LIBRARY_PATH=$PWD/.devbin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
B=$PWD/.devbin/streamtune
OUT=${OUT:-/tmp/gt}; mkdir -p "$OUT"
REPS=${REPS:-2}; STEPS=${STEPS:-4}
.devbin/backend_cuda_gemm_tune_gputest >"$OUT/gemm_tune_gputest.log" 2>&1
echo "gemm_tune gputest rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/gemm_tune_gputest.log" | tr '\n' ' ')"
grep -E "first choice|keep|FAIL|changed" "$OUT/gemm_tune_gputest.log"
: >"$OUT/gt.jsonl"
for row in ${ROWS:-}; do
  IFS=: read -r m s rc <<<"$row"
  for rep in $(seq "$REPS"); do
    for mode in off on; do
      STREAMTUNE_GEMM_TUNE=$mode timeout 300 "$B" bench --preset "$m" --seq "$s" --steps "$STEPS" --warmup 2 \
        --stream off --recompute "${rc:-auto}" --device cuda --json --no-ceilings 2>>"$OUT/gt.err" |
        python3 -c "import json,sys; r=json.loads(sys.stdin.read()); r['tune']='$mode'; print(json.dumps(r))" \
        >>"$OUT/gt.jsonl" || echo "{\"model\":\"$m\",\"seq\":$s,\"tune\":\"$mode\",\"error\":\"rc $?\"}" >>"$OUT/gt.jsonl"
    done
  done
done
python3 - "$OUT/gt.jsonl" <<'PY'
import json, sys, collections
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
by = collections.OrderedDict()
for r in rows:
    by.setdefault((r["model"], r["seq"], r.get("recompute", "?")), {}).setdefault(r["tune"], []).append(r)
print("| model | seq | recompute | tune off tok/s | tune on tok/s | gain (medians) |")
print("| --- | --- | --- | --- | --- | --- |")
for (m, s, rc), d in by.items():
    f = lambda k: [x.get("tok_s", 0) for x in d.get(k, []) if "error" not in x]
    off, on = f("off"), f("on")
    med = lambda v: sorted(v)[len(v) // 2] if v else 0
    g = "%+.1f%%" % (100.0 * (med(on) - med(off)) / med(off)) if off and on and med(off) else "-"
    print("| %s | %s | %s | %s | %s | %s |" % (m, s, rc, " / ".join("%.0f" % x for x in off),
          " / ".join("%.0f" % x for x in on), g))
PY
