#!/usr/bin/env bash
# compute-sanitizer memcheck of a code12 run (validate.sh section 5 calls it with its 6-layer
# config): bfloat16, stream_compress true, a budget that keeps some layers resident (decoded once
# at load) and streams the rest (decoded on every visit).
#   code12_sanitizer.sh BIN YAML [COMPUTE_SANITIZER]
set -uo pipefail
B=$1 Y=$2 CS=${3:-compute-sanitizer}
W=$(mktemp -d)
args=(--dtype=bfloat16 --stream_compress=true)
resident() {  # BUDGET_KIB: layers the plan keeps resident (-1: no plan fits)
  local p
  p=$($B train $Y "${args[@]}" --plan --vram_budget=${1}KiB 2>/dev/null | grep -m1 '^plan:')
  [ -n "$p" ] && echo "$p" | sed -E 's/.* ([0-9]+) of [0-9]+ layers resident.*/\1/' || echo -1
}
lo=1 hi=262144  # the smallest budget (KiB) with at least 2 layers resident, by bisection
while [ $lo -lt $hi ]; do
  mid=$(((lo + hi) / 2))
  if [ "$(resident $mid)" -ge 2 ]; then hi=$mid; else lo=$((mid + 1)); fi
done
$B train $Y "${args[@]}" --plan --vram_budget=${lo}KiB 2>&1 | grep -m1 '^plan:' | sed "s/^/== code12 sanitizer (${lo} KiB): /"
timeout 240 $CS --tool memcheck --error-exitcode 9 $B train $Y "${args[@]}" --vram_budget=${lo}KiB \
  --output_dir=$W/cs >$W/log 2>&1
echo "== compute-sanitizer memcheck code12 rc=$? $(grep -E 'ERROR SUMMARY|Error:' $W/log | head -3 | tr '\n' ' ')"
tail -2 $W/log
