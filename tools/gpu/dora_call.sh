#!/usr/bin/env bash
# DoRA on the device machine, in one call from the repo root (after tools/cuda/perf_run.sh stage;
# carry .devbin): OUT=$OUT bash tools/gpu/dora_call.sh
#   1. the DoRA and launch-plan gputests;
#   2. the qwen2_dora golden fixture from PEFT (tools/ref/make_goldens.py, f32 on the CPU) into
#      $OUT/fixtures, and `train` on CUDA against its trace (float32, bfloat16);
#   3. bit identity on CUDA (SmolLM2-shaped random model, bf16, DoRA on all seven linears, 12
#      steps): resident / streamed / budgeted / launch plans off / side stream off / recompute none,
#      and with an NF4 base;
#   4. PEFT round trip with DoRA (tools/ref/peft_compat.sh, DORA=true);
#   5. bench: LoRA vs DoRA side by side (ROWS="preset:seq:targets ..."), and the peer (.peer/,
#      PEFT LoRA and PEFT DoRA through tools/gpu/peft_variant.py) on each row unless SKIP_PEER=1.
# Sections can be skipped: SKIP="1 4" etc.
set -uo pipefail
. "$(dirname "$0")/smol_fixture.sh"
OUT=${OUT:?}
mkdir -p "$OUT"
[ -f .devbin/pack.tar.xz ] && tar xJf .devbin/pack.tar.xz -C .devbin
export LD_LIBRARY_PATH=$PWD/.devbin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
B=$PWD/.devbin/streamtune
W=$(mktemp -d /tmp/dora_XXXXXX)
say() { echo "$*" | tee -a "$OUT/summary.txt"; }
skip() { [[ " ${SKIP:-} " == *" $1 "* ]]; }
PY=${PYTHON:-/opt/torch/.venv/bin/python3}
[ -x "$PY" ] || PY=python3

if ! skip 1; then
  for t in dora_ops launch_plans; do
    .devbin/backend_cuda_${t}_gputest --gtest_brief=1 >"$OUT/test_$t.log" 2>&1
    say "gputest $t rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/test_$t.log" | tr '\n' ' ')"
  done
  grep -A12 "TimingTable\|us per op" "$OUT/test_dora_ops.log" | head -20 >>"$OUT/summary.txt"
fi

if ! skip 2; then
  PYTHONHASHSEED=0 $PY tools/ref/make_goldens.py --out "$OUT/fixtures" --only qwen2_dora >"$OUT/goldens.log" 2>&1
  say "make_goldens qwen2_dora rc=$? $(grep -E 'trainable|loss0' "$OUT/goldens.log" | tr '\n' ' ')"
  tar czf "$OUT/qwen2_dora.tar.gz" -C "$OUT/fixtures" qwen2_dora  # one file: the copy-back skips deep trees
  for dt in float32 bfloat16; do
    $PY tools/gpu/golden_trace.py $B "$OUT/fixtures/qwen2_dora" $W/g_$dt cuda $dt >>"$OUT/golden.jsonl"
    say "golden qwen2_dora cuda $dt rc=$? $(tail -1 "$OUT/golden.jsonl")"
  done
  $PY tools/gpu/golden_trace.py $B "$OUT/fixtures/qwen2_dora" $W/g_cpu cpu float32 >>"$OUT/golden.jsonl"
  say "golden qwen2_dora cpu float32 rc=$? $(tail -1 "$OUT/golden.jsonl")"
  # The DoRA-with-dropout path at p = 1e-9 (every element kept) against the same trace.
  GOLDEN_DROPOUT=1e-9 $PY tools/gpu/golden_trace.py $B "$OUT/fixtures/qwen2_dora" $W/g_d9 cuda float32 >>"$OUT/golden.jsonl"
  say "golden qwen2_dora cuda float32 dropout 1e-9 rc=$? $(tail -1 "$OUT/golden.jsonl")"
  # Real dropout (0.1): the masks are the backend's counter RNG, the same on CPU and CUDA, so f32
  # CPU and CUDA runs must agree (their losses, 8 steps), while neither matches PEFT's RNG.
  for dev in cpu cuda; do
    GOLDEN_DROPOUT=0.1 $PY tools/gpu/golden_trace.py $B "$OUT/fixtures/qwen2_dora" $W/g_d1_$dev $dev float32 >/dev/null
  done
  say "dora dropout 0.1 cpu vs cuda f32: $(python3 -c "
import json,sys
a=[json.loads(l) for l in open('$W/g_d1_cpu/out/metrics.jsonl') if '\"loss\"' in l]
b=[json.loads(l) for l in open('$W/g_d1_cuda/out/metrics.jsonl') if '\"loss\"' in l]
print('steps', len(a), len(b), 'max rel loss diff', max(abs(x['loss']-y['loss'])/abs(x['loss']) for x,y in zip(a,b)),
      'max rel grad_norm diff', max(abs(x['grad_norm']-y['grad_norm'])/abs(x['grad_norm']) for x,y in zip(a,b)))" 2>&1)"
fi

if ! skip 3; then
  DROPOUT=0.0 EXTRA_YAML="use_dora: true" smol_fixture $B $W
  for adapter in lora qlora dropout; do
    ref=""
    for v in "off 2 - on" "off 2 - off" "off 2 - side" "ram 2 - on" "disk 3 - on" "ram 2 300MiB on" "off 2 - on none" \
             "off 2 - on full"; do
      set -- $v
      d=$W/bit_${adapter}_$1_$2_$3_$4_${5:-auto}
      extra="--recompute=${5:-auto}"
      case $adapter in qlora) extra="$extra --adapter=qlora";; dropout) extra="$extra --lora_dropout=0.1";; esac
      b=$3; [ "$adapter" = qlora ] && [ "$b" = 300MiB ] && b=250MiB
      [ "$b" != "-" ] && extra="$extra --vram_budget=$b"
      env_=""; [ "$4" = off ] && env_="STREAMTUNE_GRAPHS=off"; [ "$4" = side ] && env_="STREAMTUNE_SIDE_STREAM=off"
      env $env_ $B train $W/bit.yaml --stream=$1 --stream_buffers=$2 $extra --output_dir=$d >$d.log 2>&1
      rc=$?
      s_=$(bit_sig $d); sig=${s_%/*}; ad=${s_#*/}
      [ -z "$ref" ] && ref="$sig/$ad"
      same=$([ "$sig/$ad" = "$ref" ] && echo IDENTICAL || echo DIFFERENT)
      tps=$(python3 -c "import json;v=[json.loads(l).get('tok_s',0) for l in open('$d/metrics.jsonl') if '\"loss\"' in l][2:];print(round(sorted(v)[len(v)//2]))" 2>/dev/null)
      say "dora $adapter plans=$4 stream=$1 buffers=$2 budget=$b recompute=${5:-auto} rc=$rc losses=$sig adapter=$ad $same tok/s $tps | $(grep -m1 '^plan:' $d.log)"
      [ $rc -ne 0 ] && tail -3 $d.log | tee -a "$OUT/summary.txt"
    done
    tail -2 $W/bit_${adapter}_off_2_-_on_auto/metrics.jsonl >>"$OUT/summary.txt"
  done
fi

if ! skip 4; then
  DORA=true PRESETS="tiny-qwen2 smollm2-135m" PYTHON=$PY bash tools/ref/peft_compat.sh $B "$OUT/peft_dora" >"$OUT/peft_dora.log" 2>&1
  say "peft_compat DORA=true rc=$? $(tail -3 "$OUT/peft_dora.log" | tr '\n' ' ')"
  cat "$OUT/peft_dora/peft_compat.md" >>"$OUT/summary.txt" 2>/dev/null
  tar czf "$OUT/peft_dora.tar.gz" -C "$OUT" peft_dora && rm -rf "$OUT/peft_dora"
fi

if ! skip 5; then
  ROWS=${ROWS:-"qwen2.5-3b:2048:q_proj,v_proj qwen2.5-3b:2048:all-linear qwen2.5-0.5b:512:q_proj,v_proj"}
  for row in $ROWS; do
    IFS=: read -r p s t d <<<"$row"
    d=${d:-0}
    for round in 1 2; do
      for mode in lora dora; do
        f="--lora-dropout $d"; [ $mode = dora ] && f="$f --dora"
        $B bench --preset $p --seq $s --targets $t $f --steps 6 --warmup 2 --no-ceilings --json >$W/b.json 2>$W/b.err
        say "bench $p@$s $t dropout $d $mode round $round rc=$? $(python3 -c "import json;r=json.load(open('$W/b.json'));print('step_ms', round(r['step_ms'],2), 'tok/s', round(r['tok_s']), 'loss', round(r['loss_last'],4))" 2>&1 | tail -1)"
      done
    done
    # The peer (PyTorch + PEFT, resident, gradient checkpointing) on the same row, LoRA and DoRA.
    if [ -z "${SKIP_PEER:-}" ]; then
      tt=$t; [ "$t" = all-linear ] && tt=q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj
      for dora in 0 1; do
        PEFT_DORA=$dora PEFT_DROPOUT=$d PEFT_TARGETS=$tt OUT=$W $PY tools/gpu/peft_variant.py $p:$s >$W/peer.json 2>$W/peer.err
        say "peer $p@$s $t dropout $d dora=$dora rc=$? $(tail -1 $W/peer.json)"
      done
    fi
  done
fi
rm -rf $W "$OUT/fixtures"
