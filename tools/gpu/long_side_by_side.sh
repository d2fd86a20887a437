#!/usr/bin/env bash
# Long context side by side (device): the PyTorch + PEFT peer (.peer/peft_bench.py, fewer steps) and
# `streamtune bench` on the same rows in one call; our rows also with STREAMTUNE_ATTENTION=own
# (what a card without room for cuDNN's deterministic-backward workspace runs) and under a 24 GiB
# budget streamed from RAM (the small-card case).
# Usage: OUT=$OUT bash tools/gpu/long_side_by_side.sh   [ROWS="llama3-8b:16384 ..."; OWN_ROWS; BUDGET_ROWS]
set -u
B=${B:-.devbin}/streamtune
OUT=${OUT:-/tmp/lsbs}
mkdir -p "$OUT"
say() { echo "$*" | tee -a "$OUT/summary.txt"; }
ROWS=${ROWS:-qwen2.5-0.5b:32768 llama3-8b:16384 llama3-8b:32768}
PEER_PY=${PEER_PY:-python3}
for row in $ROWS; do
  p=${row%%:*} s=${row##*:}
  t=$SECONDS
  (cd .peer && $PEER_PY -c "
import json, peft_bench
try:
    r = peft_bench.run('$p', $s, 1, steps=${STEPS:-3}, warm=1)
except Exception as e:
    r = dict(model='$p', seq=$s, error=str(e)[:300])
print(json.dumps(r))") >"$OUT/peer_${p}_$s.log" 2>&1
  say "peer $p@$s ($((SECONDS - t)) s): $(tail -1 "$OUT/peer_${p}_$s.log")"
  t=$SECONDS
  $B bench --preset "$p" --seq "$s" --steps ${STEPS:-3} --warmup 1 --no-ceilings >"$OUT/st_${p}_$s.log" 2>&1
  say "streamtune $p@$s rc=$? ($((SECONDS - t)) s): $(grep -E '^  tok/s' "$OUT/st_${p}_$s.log") | $(grep -E 'layers resident' "$OUT/st_${p}_$s.log" | sed 's/^ *//') | $(grep -E 'peak used' "$OUT/st_${p}_$s.log" | sed 's/^ *//')"
done
for row in ${OWN_ROWS:-qwen2.5-0.5b:32768 llama3-8b:16384}; do
  p=${row%%:*} s=${row##*:}
  STREAMTUNE_ATTENTION=own $B bench --preset "$p" --seq "$s" --steps ${STEPS:-3} --warmup 1 --no-ceilings >"$OUT/own_${p}_$s.log" 2>&1
  say "streamtune own attention $p@$s rc=$?: $(grep -E '^  tok/s' "$OUT/own_${p}_$s.log") | $(grep -E 'layers resident' "$OUT/own_${p}_$s.log" | sed 's/^ *//')"
done
for row in ${BUDGET_ROWS:-llama3-8b:8192 llama3-8b:16384}; do
  p=${row%%:*} s=${row##*:}
  $B bench --preset "$p" --seq "$s" --steps ${STEPS:-3} --warmup 1 --stream ram --vram-budget ${BUDGET:-24GiB} >"$OUT/budget_${p}_$s.log" 2>&1
  say "streamtune $p@$s --stream ram --vram-budget ${BUDGET:-24GiB} rc=$?: $(grep -E '^  tok/s' "$OUT/budget_${p}_$s.log") | $(grep -E 'layers resident' "$OUT/budget_${p}_$s.log" | sed 's/^ *//') | $(grep -E 'exposed copy' "$OUT/budget_${p}_$s.log" | sed 's/^ *//')"
  grep -E 'streamtune: attention' "$OUT/budget_${p}_$s.log" | head -2 | tee -a "$OUT/summary.txt"
done
