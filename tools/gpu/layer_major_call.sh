#!/usr/bin/env bash
# Layer-major gradient accumulation on the H200 in ONE device call (binaries staged by
# tools/cuda/perf_run.sh stage BUILD_DIR; carry .devbin): for each row MODEL:SEQ:G:BUDGET:QUANT,
# `streamtune bench --stream ram --grad-accum G --vram-budget BUDGET --quant QUANT` with
# --layer-major false and auto side by side (same plan otherwise), then a table.
#   ROWS="llama3-8b:1024:8:12GiB:none ..."  STEPS=3  OUT=dir
set -uo pipefail
[ -f .devbin/pack.tar.xz ] && [ ! -x .devbin/streamtune ] && tar xJf .devbin/pack.tar.xz -C .devbin
export LD_LIBRARY_PATH=$PWD/.devbin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
B=$PWD/.devbin/streamtune
OUT=${OUT:-/tmp/lm}; mkdir -p "$OUT"
STEPS=${STEPS:-3}
: >"$OUT/lm.jsonl"
for row in ${ROWS:-}; do
  IFS=: read -r m s g bud q <<<"$row"
  for lm in false auto; do
    timeout 300 "$B" bench --preset "$m" --seq "$s" --grad-accum "$g" --steps "$STEPS" --warmup 1 --stream ram \
      --vram-budget "$bud" --quant "${q:-none}" --layer-major "$lm" --device cuda --json >>"$OUT/lm.jsonl" 2>>"$OUT/lm.err" ||
      echo "{\"model\":\"$m\",\"seq\":$s,\"grad_accum\":$g,\"error\":\"rc $? (layer-major $lm, $bud)\"}" >>"$OUT/lm.jsonl"
  done
done
python3 - "$OUT/lm.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print("| model | seq | G | base | slots | resident | recompute | step ms | tok/s | GB/step | floor ms | planned GiB | peak GiB |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for r in rows:
    if "error" in r:
        print("| %s | %s | %s | error: %s |" % (r["model"], r["seq"], r.get("grad_accum"), r["error"])); continue
    peak = (r.get("vram_peak_used_bytes") or 0) - (r.get("vram_baseline_used_bytes") or 0)
    print("| %s | %d | %d | %s | %d | %d | %s | %.1f | %.0f | %.2f | %.1f | %.2f | %.2f |" % (
        r["model"], r["seq"], r["grad_accum"], r["quant"], r["micro_batch_slots"], r["resident_layers"], r["recompute"],
        r["step_ms"], r["tok_s"], r["bytes_streamed_per_step"] / 1e9, r.get("transfer_floor_ms") or 0,
        (r.get("vram_planned_bytes") or 0) / 2**30, peak / 2**30))
PY
