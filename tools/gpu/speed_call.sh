#!/usr/bin/env bash
# The speed issue's device call, in ONE call (binaries staged by tools/cuda/perf_run.sh stage BUILD_DIR,
# peers copied into .peer; carry .devbin and .peer):
#   1. every GPU parity test staged (CUDA vs the CPU reference)            -> $OUT/test_*.log
#   2. bench/compare.sh: streamtune and the PyTorch peers side by side, plus the NOSAVE rows
#      (selective recompute off) for the A/B                              -> $OUT/cmp/
#   3. streamed rows against max(resident step, bytes streamed / link measured in the same row)
set -uo pipefail
[ -f .devbin/pack.tar.xz ] && tar xJf .devbin/pack.tar.xz -C .devbin
export LD_LIBRARY_PATH=$PWD/.devbin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
OUT=${OUT:-/tmp/speed}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for t in $([ -z "${SKIP_TESTS:-}" ] && ls .devbin/backend_cuda_*_gputest); do
  n=$(basename "$t")
  timeout 120 "$t" --gtest_brief=1 --gtest_filter=-*TimingTable* >"$OUT/test_$n.log" 2>&1
  echo "gputest $n rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/test_$n.log" | tr '\n' ' ')"
  grep -E '^\[  FAILED|Failure' "$OUT/test_$n.log" | head -5
done
BIN=$PWD/.devbin/streamtune OUT=$OUT/cmp DEADLINE_S=${DEADLINE_S:-420} NOSAVE=${NOSAVE:-} bash bench/compare.sh
python3 - "$OUT/cmp" <<'PY'
import json, os, sys
d = sys.argv[1]
def load(f):
    p = os.path.join(d, f)
    return [json.loads(l) for l in open(p) if l.startswith("{")] if os.path.exists(p) else []
st = [r for r in load("streamtune.jsonl") if "error" not in r]
res = {(r["model"], r["seq"]): r for r in st if r["stream"] == "off"}
for r in st:
    if r["stream"] == "off" or (r["model"], r["seq"]) not in res:
        continue
    base, floor = res[(r["model"], r["seq"])]["step_ms"], r.get("transfer_floor_ms") or 0
    print("streamed %s@%d: step %.1f ms, resident %.1f ms, floor %.1f ms (%.2f GB at %.1f GB/s) -> %.3f x max" % (
        r["model"], r["seq"], r["step_ms"], base, floor, r["bytes_streamed_per_step"] / 1e9, r["h2d_pinned_gbps"] or 0,
        r["step_ms"] / max(base, floor)))
for r in load("streamtune_nosave.jsonl"):
    w = res.get((r.get("model"), r.get("seq")))
    if w and "error" not in r:
        print("selective recompute %s@%d: %.0f tok/s (attention kept) vs %.0f (recomputed): %+.1f%%" % (
            r["model"], r["seq"], w["tok_s"], r["tok_s"], 100 * (w["tok_s"] / r["tok_s"] - 1)))
PY
