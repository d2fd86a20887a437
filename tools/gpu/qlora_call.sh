#!/usr/bin/env bash
# QLoRA on the H200 in ONE device call (binaries staged by tools/cuda/perf_run.sh stage BUILD_DIR;
# carry .devbin):
#   1. the cuda_ops gputest (dequant_nf4 bits against the CPU reference, and every other op)
#   2. `streamtune bench` rows, each as bf16 base and NF4 base (--quant nf4) side by side:
#      ROWS="model:seq:stream[:budget] ..." (stream off|ram; budget e.g. 4GiB; default all-streamed)
#      plus BIG rows (NF4 only; e.g. llama3-70b:4096:ram:12GiB)
#   3. unless SKIP_VALIDATE: tools/gpu/validate.sh sections 3b (bit identity) and 3c (QLoRA)
set -uo pipefail
[ -f .devbin/pack.tar.xz ] && tar xJf .devbin/pack.tar.xz -C .devbin
export LD_LIBRARY_PATH=$PWD/.devbin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
B=$PWD/.devbin/streamtune
OUT=${OUT:-/tmp/qlora}; mkdir -p "$OUT"
STEPS=${STEPS:-4}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 200 .devbin/backend_cuda_cuda_ops_gputest --gtest_brief=1 >"$OUT/test_cuda_ops.log" 2>&1
echo "gputest cuda_ops rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/test_cuda_ops.log" | tr '\n' ' ')"
grep -E '^\[  FAILED|Failure' "$OUT/test_cuda_ops.log" | head -5
run_row() {  # model seq stream budget quant
  local extra=()
  [ "$4" != "-" ] && extra+=(--vram-budget "$4")
  timeout 300 "$B" bench --preset "$1" --seq "$2" --steps "$STEPS" --warmup 1 --stream "$3" --device cuda \
    --quant "$5" "${extra[@]}" --json >>"$OUT/bench.jsonl" 2>>"$OUT/bench.err" ||
    echo "{\"model\":\"$1\",\"seq\":$2,\"stream\":\"$3\",\"quant\":\"$5\",\"error\":\"rc $?\"}" >>"$OUT/bench.jsonl"
}
: >"$OUT/bench.jsonl"
for row in ${ROWS:-}; do
  IFS=: read -r m s st bud <<<"$row"
  for q in none nf4; do run_row "$m" "$s" "$st" "${bud:--}" "$q"; done
done
for row in ${BIG:-}; do
  IFS=: read -r m s st bud <<<"$row"
  run_row "$m" "$s" "$st" "${bud:--}" nf4
done
python3 - "$OUT/bench.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print("| model | seq | stream | base | resident/slots | recompute | step ms | tok/s | GB/step | floor ms | planned GiB | peak GiB |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for r in rows:
    if "error" in r:
        print("| %s | %s | %s | %s | error: %s |" % (r["model"], r["seq"], r["stream"], r.get("quant"), r["error"]))
        continue
    peak = (r.get("vram_peak_used_bytes") or 0) - (r.get("vram_baseline_used_bytes") or 0)
    print("| %s | %d | %s | %s | %s/%s | %s | %.1f | %.0f | %.2f | %.1f | %.2f | %.2f |" % (
        r["model"], r["seq"], r["stream"], r.get("quant"), r.get("resident_layers"), r.get("stream_buffers"),
        r.get("recompute"), r["step_ms"], r["tok_s"], r.get("bytes_streamed_per_step", 0) / 1e9,
        r.get("transfer_floor_ms") or 0, (r.get("vram_planned_bytes") or 0) / 2**30, peak / 2**30))
PY
[ -n "${SKIP_VALIDATE:-}" ] || ONLY_PLANS=1 SKIP_TESTS=1 OUT=$OUT/val bash tools/gpu/validate.sh 2>&1 | grep -E "^(plans|qlora)" | cut -c1-230
