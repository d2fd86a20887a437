#!/usr/bin/env bash
# This build (.devbin) against a previous one (.devbin_prev/prev.tar.xz, its streamtune only; the
# libraries are .devbin's), in one device call from the repo root (was dropout_ab.sh):
#   OUT=$OUT bash tools/gpu/ab_call.sh
#   1. bench, interleaved rounds: ROWS="preset:seq:targets:dropout[:flag,flag...] ..." under both
#      builds; a flag is `dora` or a bench option without its dashes, `recompute=full`;
#   2. bit identity of this build on CUDA (SmolLM2-shaped random model, bf16, all seven linears,
#      12 steps, LoRA dropout ${DROPOUT:-0.1}): resident / ram / disk / budget / launch plans off /
#      side stream off / recompute none / recompute full. SKIP_BITS=1 skips it.
set -uo pipefail
. "$(dirname "$0")/smol_fixture.sh"
OUT=${OUT:?}
mkdir -p "$OUT"
[ -f .devbin/pack.tar.xz ] && tar xJf .devbin/pack.tar.xz -C .devbin
[ -f .devbin_prev/prev.tar.xz ] && tar xJf .devbin_prev/prev.tar.xz -C .devbin_prev
export LD_LIBRARY_PATH=$PWD/.devbin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
NEW=$PWD/.devbin/streamtune
OLD=$PWD/.devbin_prev/streamtune
W=$(mktemp -d /tmp/dab_XXXXXX)
say() { echo "$*" | tee -a "$OUT/summary.txt"; }

ROWS=${ROWS:-"qwen2.5-3b:2048:all-linear:0.05 qwen2.5-3b:2048:q_proj,v_proj:0.05 qwen2.5-3b:2048:all-linear:0.05:dora"}
for row in $ROWS; do
  IFS=: read -r p s t d flags <<<"$row"
  f="--lora-dropout $d"
  for x in ${flags//,/ }; do f="$f --${x/=/ }"; done
  for round in 1 2; do
    for which in old new; do
      B=$NEW; [ $which = old ] && B=$OLD
      $B bench --preset $p --seq $s --targets $t $f --steps 6 --warmup 2 --no-ceilings --json >$W/b.json 2>$W/b.err
      say "bench $p@$s $t dropout $d ${flags:-lora} $which round $round rc=$? $(python3 -c "import json;r=json.load(open('$W/b.json'));print('step_ms', round(r['step_ms'],2), 'tok/s', round(r['tok_s']), 'loss', round(r['loss_last'],4))" 2>&1 | tail -1)"
    done
  done
done

if [ -z "${SKIP_BITS:-}" ]; then
  smol_fixture $NEW $W
  ref=""
  for v in "off 2 - on" "off 2 - off" "off 2 - side" "ram 2 - on" "disk 3 - on" "ram 2 300MiB on" "off 2 - on none" "off 2 - on full"; do
    set -- $v
    d=$W/bit_$1_$2_$3_$4_${5:-auto}
    extra="--recompute=${5:-auto}"; [ "$3" != "-" ] && extra="$extra --vram_budget=$3"
    env_=""; [ "$4" = off ] && env_="STREAMTUNE_GRAPHS=off"; [ "$4" = side ] && env_="STREAMTUNE_SIDE_STREAM=off"
    env $env_ $NEW train $W/bit.yaml --stream=$1 --stream_buffers=$2 $extra --output_dir=$d >$d.log 2>&1
    rc=$?
    s_=$(bit_sig $d); sig=${s_%/*}; ad=${s_#*/}
    [ -z "$ref" ] && ref="$sig/$ad"
    same=$([ "$sig/$ad" = "$ref" ] && echo IDENTICAL || echo DIFFERENT)
    say "lora dropout ${DROPOUT:-0.1} plans=$4 stream=$1 buffers=$2 budget=$3 recompute=${5:-auto} rc=$rc losses=$sig adapter=$ad $same | $(grep -m1 '^plan:' $d.log)"
  done
  tail -2 $W/bit_off_2_-_on_auto/metrics.jsonl >>"$OUT/summary.txt"
fi
rm -rf $W
