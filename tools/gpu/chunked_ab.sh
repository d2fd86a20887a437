#!/usr/bin/env bash
# The chunked cuDNN backward (attention_cudnn.cc Note [chunked backward]) on the device: its
# gputests, then budgeted long rows with the default attention vs STREAMTUNE_ATTENTION=own
# (what the same plan ran before the chunked path), interleaved, one run each per REPS.
# Usage: OUT=$OUT bash tools/gpu/chunked_ab.sh   [B=.devbin; ROWS="preset:seq:budget ..."; REPS=1]
set -u
D=${B:-.devbin}
OUT=${OUT:-/tmp/chunked_ab}
mkdir -p "$OUT"
say() { echo "$*" | tee -a "$OUT/summary.txt"; }
if [ -z "${SKIP_TESTS:-}" ]; then
  t=$SECONDS
  "$D/backend_cuda_attention_cudnn_gputest" --gtest_filter="${FILTER:-*Chunked*:*LongSequences*}" >"$OUT/gt.log" 2>&1
  say "attention_cudnn_gputest ${FILTER:-*Chunked*:*LongSequences*} rc=$? ($((SECONDS - t)) s)"
  grep -E 'chunked|workspace|max abs err|Failure|FAILED|OK \]' "$OUT/gt.log" | head -60 | tee -a "$OUT/summary.txt"
fi
for row in ${ROWS:-llama3-8b:16384:24GiB qwen2.5-0.5b:32768:8GiB qwen2.5-3b:32768:16GiB}; do
  IFS=: read -r p s bud <<<"$row"
  for rep in $(seq 1 ${REPS:-1}); do
    for v in own default; do
      log="$OUT/${v}_${p}_${s}_$rep.log"
      if [ $v = own ]; then export STREAMTUNE_ATTENTION=own; else unset STREAMTUNE_ATTENTION; fi
      $D/streamtune bench --preset "$p" --seq "$s" --steps ${STEPS:-3} --warmup 1 --stream ram --vram-budget "$bud" \
        --no-ceilings >"$log" 2>&1
      say "$p@$s budget $bud $v rc=$?: $(grep -E '^  tok/s' "$log" | sed 's/  */ /g') | $(grep -E '^  step' "$log" | sed 's/  */ /g') | $(grep -E 'layers resident' "$log" | sed 's/^ *//')"
      grep -E 'streamtune: attention' "$log" | head -3 | tee -a "$OUT/summary.txt"
    done
  done
done
unset STREAMTUNE_ATTENTION
