#!/usr/bin/env bash
# The speed issue's device call, in ONE call (binaries staged by tools/cuda/perf_run.sh stage BUILD_DIR,
# peers copied into .peer; carry .devbin and .peer):
#   1. every GPU parity test staged (CUDA vs the CPU reference)            -> $OUT/test_*.log
#   2. bench/compare.sh: streamtune and the PyTorch peers side by side, plus the FULL / ATTN rows
#      (--recompute full / attention) and PEER_NOCKPT rows for the recompute A/B  -> $OUT/cmp/
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
BIN=$PWD/.devbin/streamtune OUT=$OUT/cmp DEADLINE_S=${DEADLINE_S:-420} FULL=${FULL:-} ATTN=${ATTN:-} OWN_ATTN=${OWN_ATTN:-} \
  PEER_NOCKPT=${PEER_NOCKPT:-} STREAMED_NONE=${STREAMED_NONE:-} STREAMED_CODE12=${STREAMED_CODE12-"qwen2.5-1.5b:2048 qwen2.5-3b:2048"} bash bench/compare.sh
python3 - "$OUT/cmp" <<'PY'
import json, os, sys
d = sys.argv[1]
def load(f):
    p = os.path.join(d, f)
    return [json.loads(l) for l in open(p) if l.startswith("{")] if os.path.exists(p) else []
st = [r for r in load("streamtune.jsonl") if "error" not in r]
res = {(r["model"], r["seq"]): r for r in st if r["stream"] == "off"}
# A streamed row is held against the resident row doing the same work (the same recompute mode).
same = {(r["model"], r["seq"], r.get("recompute")): r for r in st + load("streamtune_full.jsonl")
        + load("streamtune_attention.jsonl") if r.get("stream") == "off" and "error" not in r}
for r in st:
    base_row = same.get((r["model"], r["seq"], r.get("recompute"))) or res.get((r["model"], r["seq"]))
    if r["stream"] == "off" or base_row is None:
        continue
    base, floor = base_row["step_ms"], r.get("transfer_floor_ms") or 0
    print("streamed %s@%d%s: step %.1f ms, resident %.1f ms, floor %.1f ms (%.2f GB at %.1f GB/s) -> %.3f x max" % (
        r["model"], r["seq"], "" if r.get("quant", "none") == "none" else " (" + r["quant"] + " base)", r["step_ms"], base, floor, r["bytes_streamed_per_step"] / 1e9, r["h2d_pinned_gbps"] or 0,
        r["step_ms"] / max(base, floor)))
for f in ("streamtune_full.jsonl", "streamtune_attention.jsonl"):
    for r in load(f):
        w = res.get((r.get("model"), r.get("seq")))
        if w and "error" not in r:
            print("recompute %s@%d: %.0f tok/s (%s, the plan's choice) vs %.0f (%s): %+.1f%%" % (
                r["model"], r["seq"], w["tok_s"], w.get("recompute"), r["tok_s"], r.get("recompute"),
                100 * (w["tok_s"] / r["tok_s"] - 1)))
for r in load("streamtune_own_attention.jsonl"):
    w = res.get((r.get("model"), r.get("seq")))
    if w and "error" not in r:
        print("attention %s@%d: %.0f tok/s (%s) vs %.0f (%s): %+.1f%%" % (
            r["model"], r["seq"], w["tok_s"], w.get("attention"), r["tok_s"], r.get("attention"),
            100 * (w["tok_s"] / r["tok_s"] - 1)))
PY
