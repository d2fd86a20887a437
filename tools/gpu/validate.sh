#!/usr/bin/env bash
# The CUDA issue's "Show on the H200" list in ONE device call (binaries from .devbin, staged by
# tools/cuda/perf_run.sh stage BUILD_DIR):
#   1. parity tests of every op (CUDA vs CPU reference)          -> $OUT/test_*.log
#   2. golden HF+PEFT traces on the GPU (f32 and bf16)             -> golden.jsonl
#   3. streamed == resident bit for bit on the GPU (off/ram/disk, 2/3 buffers, k resident)
#   4. Qwen2.5-7B at seq 2048 and Qwen2.5-14B streamed within 4 GiB; Llama-3-8B at 4096 in 4 GiB;
#      4b. the attention path (and the bits) the same in every budget
#   5. compute-sanitizer memcheck + racecheck on a small streamed run
#   6. PEFT round trip (tools/ref/peft_compat.sh)
set -uo pipefail
. "$(dirname "$0")/smol_fixture.sh"
[ -f .devbin/pack.tar.xz ] && tar xJf .devbin/pack.tar.xz -C .devbin
export LD_LIBRARY_PATH=$PWD/.devbin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
OUT=${OUT:-/tmp/validate}; mkdir -p "$OUT"
B=$PWD/.devbin/streamtune
W=/tmp/stv; rm -rf $W; mkdir -p $W
say() { echo "== $*" | tee -a "$OUT/summary.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$OUT/summary.txt"
$B --version | tee -a "$OUT/summary.txt"

if [ -z "${SKIP_TESTS:-}" ]; then
for g in .devbin/backend_cuda_*_gputest; do
  t=$(basename "$g" _gputest)
  "$g" --gtest_brief=1 --gtest_filter=-*TimingTable* >"$OUT/test_$t.log" 2>&1
  say "gputest $t rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/test_$t.log" | tr '\n' ' ')"
  grep -E '^\[  FAILED|Failure' "$OUT/test_$t.log" | head -4 | tee -a "$OUT/summary.txt"
done
fi

# ONLY_PLANS=1: the gputests and sections 3b-3e only (launch plans, layer-major, packed rows).
[ -n "${ONLY_PLANS:-}" ] || for fx in llama_gqa qwen2_tied qwen3_qknorm mistral_swa qwen2_swa; do
  for dt in float32 bfloat16; do
    python3 tools/gpu/golden_trace.py $B tests/fixtures/$fx $W/g_${fx}_$dt cuda $dt >>"$OUT/golden.jsonl"
    say "golden $fx $dt rc=$? $(tail -1 "$OUT/golden.jsonl")"
  done
done

# train_as MODE YAML ARGS...: `train` with launch plans off (MODE off), the side stream off
# (side), the own attention kernels (own), or as configured (anything else).
train_as() {
  local mode=$1; shift
  case $mode in
    off) STREAMTUNE_GRAPHS=off $B train "$@" ;;
    side) STREAMTUNE_SIDE_STREAM=off $B train "$@" ;;
    own) STREAMTUNE_ATTENTION=own $B train "$@" ;;
    *) $B train "$@" ;;
  esac
}

# 3. bit identity: a SmolLM2-shaped random model, random tokens, 12 steps, bf16 on the GPU.
smol_fixture $B $W
ref=""
# Field 4: offload_embeddings (embedding + lm_head in host memory, lm_head streamed in 16384-row
# vocabulary chunks: 3 for SmolLM2's 49152). Field 5: recompute (auto keeps every activation when
# all layers are resident; full / attention forced; none forced with layers streamed).
[ -n "${ONLY_PLANS:-}" ] || for v in "off 2 -" "off 2 - auto full" "off 2 - auto attention" "ram 2 -" "ram 3 -" "disk 2 -" "disk 3 -" \
         "ram 2 300MiB" "ram 3 400MiB" "ram 2 - true" "disk 3 - true" "ram 2 300MiB true" "ram 2 600MiB auto none"; do
  set -- $v
  extra="--offload_embeddings=${4:-auto} --recompute=${5:-auto}"; [ "$3" != "-" ] && extra="$extra --vram_budget=$3"
  d=$W/bit_$1_$2_$3_${4:-auto}_${5:-auto}
  $B train $W/bit.yaml --stream=$1 --stream_buffers=$2 $extra --output_dir=$d >$d.log 2>&1
  rc=$?
  s_=$(bit_sig $d); sig=${s_%/*}; ad=${s_#*/}
  plan=$(grep -m1 '^plan:' $d.log)
  [ -z "$ref" ] && ref="$sig/$ad"
  same=$([ "$sig/$ad" = "$ref" ] && echo IDENTICAL || echo DIFFERENT)
  say "bit stream=$1 buffers=$2 budget=$3 offload=${4:-auto} recompute=${5:-auto} rc=$rc losses=$sig adapter=$ad $same | $plan"
done
[ -n "${ONLY_PLANS:-}" ] || tail -3 $W/bit_ram_2_-_auto_auto/metrics.jsonl >> "$OUT/summary.txt"

# 3b. launch plans (model/launch_plans.h) and the side stream (backend.h Note [side stream]): the
#     same config (LoRA dropout 0.1: seeds read from device memory), plans on (default) and off
#     (STREAMTUNE_GRAPHS=off): one signature; then dropout 0.
sed 's/^lora_dropout: .*/lora_dropout: 0.0/' $W/bit.yaml > $W/bit0.yaml
ref=""
#     "side": plans on, the side stream off (STREAMTUNE_SIDE_STREAM=off: every LoRA op in issue order).
for v in "off 2 - on" "off 2 - off" "off 2 - side" "ram 2 - on" "disk 3 - on" "ram 2 300MiB on" "ram 2 300MiB off" \
         "ram 2 300MiB side" "off 2 - on full" "off 2 - side full" "off 2 - on none" "off 2 - side none" \
         "off 2 - on auto 0" "off 2 - off auto 0" "off 2 - side auto 0"; do
  set -- $v
  d=$W/plan_$1_$2_$3_$4_${5:-auto}
  extra="--recompute=${5:-auto}"; [ "$3" != "-" ] && extra="$extra --vram_budget=$3"
  y=$W/bit.yaml; [ -n "${6:-}" ] && { y=$W/bit0.yaml; d=${d}_d0; [ "${ref0:-}" ] || { ref0=1; ref=""; }; }
  train_as $4 $y --stream=$1 --stream_buffers=$2 $extra --output_dir=$d >$d.log 2>&1
  rc=$?
  s_=$(bit_sig $d); sig=${s_%/*}; ad=${s_#*/}
  [ -z "$ref" ] && ref="$sig/$ad"
  [ -z "${ref0_sig:-}" ] && ref0_sig="$sig/$ad"
  same=$([ "$sig/$ad" = "$ref" ] && echo IDENTICAL || echo DIFFERENT)
  tps=$(python3 -c "import json;v=[json.loads(l).get('tok_s',0) for l in open('$d/metrics.jsonl') if '\"loss\"' in l][2:];print(round(sorted(v)[len(v)//2]))" 2>/dev/null)
  say "plans=$4 dropout=${6:-0.1} stream=$1 buffers=$2 budget=$3 recompute=${5:-auto} rc=$rc losses=$sig adapter=$ad $same median tok/s $tps | $(grep -m1 "^launch " $d.log) $(grep -m1 "launch plans off" $d.log)"
done

# 3c. QLoRA (adapter: qlora, an NF4 base: model/weights.h Note [NF4 base layout]): one signature
#     resident / streamed / budgeted / recompute forced / plans off / side stream off, and not the
#     bf16 base's signature (the first row of 3b).
lora_ref=$ref0_sig
{ cat $W/bit.yaml; echo "adapter: qlora"; } > $W/q.yaml
ref=""
for v in "off 2 - on" "ram 2 - on" "disk 3 - on" "ram 2 250MiB on" "off 2 - on full" "off 2 - off" "ram 2 - side"; do
  set -- $v
  d=$W/q_$1_$2_$3_$4_${5:-auto}
  extra="--recompute=${5:-auto}"; [ "$3" != "-" ] && extra="$extra --vram_budget=$3"
  train_as $4 $W/q.yaml --stream=$1 --stream_buffers=$2 $extra --output_dir=$d >$d.log 2>&1
  rc=$?
  s_=$(bit_sig $d); sig=${s_%/*}; ad=${s_#*/}
  [ -z "$ref" ] && ref="$sig/$ad"
  same=$([ "$sig/$ad" = "$ref" ] && echo IDENTICAL || echo DIFFERENT)
  [ "$sig/$ad" = "$lora_ref" ] && same="$same SAME-AS-BF16-BASE(wrong)"
  tps=$(python3 -c "import json;v=[json.loads(l).get('tok_s',0) for l in open('$d/metrics.jsonl') if '\"loss\"' in l][2:];print(round(sorted(v)[len(v)//2]))" 2>/dev/null)
  say "qlora plans=$4 stream=$1 buffers=$2 budget=$3 recompute=${5:-auto} rc=$rc losses=$sig adapter=$ad $same median tok/s $tps | $(grep -m1 '^plan:' $d.log)"
done

# 3d. layer-major accumulation (bit.yaml has 2 micro-batches a step): layer_major true / false /
#     auto under a budget that streams (300 MiB: the planner picks 2 micro-batches there; 200 MiB
#     cannot hold the plan and is refused), and disk: the signature of the first row of 3b.
for v in "ram 2 300MiB true" "ram 2 300MiB false" "ram 2 300MiB auto" "disk 2 300MiB true" "ram 2 - true"; do
  set -- $v
  d=$W/lm_$1_$2_$3_$4
  extra="--layer_major=$4"; [ "$3" != "-" ] && extra="$extra --vram_budget=$3"
  $B train $W/bit.yaml --stream=$1 --stream_buffers=$2 $extra --output_dir=$d >$d.log 2>&1
  rc=$?
  s_=$(bit_sig $d); sig=${s_%/*}; ad=${s_#*/}
  same=$([ "$sig/$ad" = "$lora_ref" ] && echo IDENTICAL || echo DIFFERENT)
  say "layer-major=$4 stream=$1 budget=$3 rc=$rc losses=$sig adapter=$ad $same | $(grep -m1 '^plan:' $d.log | cut -c1-160) | $(grep -m1 '^streamed' $d.log)"
done

# 3e. packed rows (sample_packing: several documents a row, attention on cuDNN's ragged spans,
#     attention_cudnn.cc Note [ragged documents]): one signature over tiers, budgets, recompute
#     modes, launch plans and the side stream; then the own kernels (STREAMTUNE_ATTENTION=own:
#     other kernels, so other bits) must give losses within bf16 noise of it.
sed 's/^sequence_len: .*/sequence_len: 256\nsample_packing: true/' $W/bit.yaml > $W/pack.yaml
ref=""; packed_losses=""
for v in "off 2 - on" "ram 2 - on" "disk 3 - on" "ram 2 300MiB on" "off 2 - off" "off 2 - side" "off 2 - on full" \
         "off 2 - on attention" "ram 2 - own"; do
  set -- $v
  d=$W/pack_$1_$2_$3_$4_${5:-auto}
  extra="--recompute=${5:-auto}"; [ "$3" != "-" ] && extra="$extra --vram_budget=$3"
  train_as $4 $W/pack.yaml --stream=$1 --stream_buffers=$2 $extra --output_dir=$d >$d.log 2>&1
  rc=$?
  losses=$(python3 -c "import json;print(' '.join(str(json.loads(l)['loss']) for l in open('$d/metrics.jsonl') if '\"loss\"' in l))" 2>/dev/null)
  s_=$(bit_sig $d); sig=${s_%/*}; ad=${s_#*/}
  if [ "$4" = own ]; then
    cmp=$(python3 -c "a=[float(x) for x in '$packed_losses'.split()]; b=[float(x) for x in '$losses'.split()]; d=max(abs(x-y)/abs(y) for x,y in zip(a,b)); print('max rel loss diff vs ragged %.2e %s' % (d, 'ok' if len(a)==len(b)>0 and d<2e-2 else 'FAIL'))" 2>&1)
    say "packed own kernels rc=$rc losses=$sig | $cmp"
  else
    [ -z "$ref" ] && { ref="$sig/$ad"; packed_losses=$losses; }
    same=$([ "$sig/$ad" = "$ref" ] && echo IDENTICAL || echo DIFFERENT)
    say "packed plans=$4 stream=$1 buffers=$2 budget=$3 recompute=${5:-auto} rc=$rc losses=$sig adapter=$ad $same | $(grep -m1 'ragged' $d.log | cut -c1-120)"
  fi
done
[ -n "${ONLY_PLANS:-}" ] && exit 0

# 4. big shapes streamed from pinned RAM within 4 GiB (random weights in memory).
for row in "qwen2.5-7b 2048" "qwen2.5-14b 2048" "llama3-8b 4096"; do
  set -- $row
  $B bench --preset $1 --seq $2 --steps 3 --warmup 1 --stream ram --vram-budget 4GiB --device cuda --json \
    >>"$OUT/big.jsonl" 2>>"$OUT/big.err"
  say "big $1 seq $2 rc=$? $(tail -1 "$OUT/big.jsonl" | python3 -c "import json,sys; r=json.loads(sys.stdin.read()); g=lambda k: round((r.get(k) or 0)/2**30,3); print({'tok_s': r.get('tok_s'), 'step_ms': r.get('step_ms'), 'planned_GiB': g('vram_planned_bytes'), 'allocated_GiB': g('vram_allocated_bytes'), 'peak_above_context_GiB': round(((r.get('vram_peak_used_bytes') or 0)-(r.get('vram_baseline_used_bytes') or 0))/2**30,3), 'resident': r.get('resident_layers'), 'slots': r.get('num_slots'), 'offload': r.get('offload_embeddings'), 'GB_per_step': round(r.get('bytes_streamed_per_step',0)/1e9,2), 'exposed_ms': r.get('exposed_copy_ms'), 'xfer_floor_ms': r.get('transfer_floor_ms')})" 2>&1)"
done

# 4b. the attention path does not depend on the budget (stream/planner.h Note [fused attention
#     plan]): Qwen2.5-0.5B at 2048 tokens, where cuDNN's whole workspace (~119 MiB) is not free,
#     resident and in budgets where it displaces resident layers: one loss_last_exact, cuDNN whole.
: > "$OUT/attn_plan.jsonl"
for budget in - 1GiB 800MiB; do
  if [ "$budget" = - ]; then args="--stream off"; else args="--stream ram --vram-budget $budget"; fi
  $B bench --preset qwen2.5-0.5b --seq 2048 --steps 3 --warmup 1 $args --device cuda --json \
    >>"$OUT/attn_plan.jsonl" 2>>"$OUT/attn_plan.err"
done
say "attention plan: $(python3 -c "
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(' | '.join('%s resident %s: %s %s' % (r['stream'], r.get('resident_layers'), r.get('attention'), r.get('loss_last_exact')) for r in rows))
ok = len(rows) == 3 and len({r.get('loss_last_exact') for r in rows}) == 1 and all(r.get('attention') == 'fused (cuDNN)' for r in rows)
print('IDENTICAL' if ok else 'DIFFER')" "$OUT/attn_plan.jsonl" 2>&1)"

# 5. compute-sanitizer on a small streamed run: a 6-layer random model, f32, a budget that leaves
#    at most 3 layers resident (the rest stream through the pool), 3 steps.
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ -x "$CS" ]; then
  $B init-model --preset tiny-llama --out $W/tl --force >/dev/null
  python3 - $W <<'PY'
import json, random, sys
w = sys.argv[1]
c = json.load(open(w + "/tl/config.json"))
c.update(num_hidden_layers=6, hidden_size=128, intermediate_size=256, vocab_size=1024)
json.dump(c, open(w + "/tl6.json", "w"))
r = random.Random(3)
with open(w + "/d6.jsonl", "w") as f:
    for _ in range(16):
        f.write(json.dumps({"input_ids": [r.randrange(1024) for _ in range(r.randrange(20, 64))]}) + "\n")
PY
  $B init-model --config $W/tl6.json --out $W/tl6 >/dev/null
  cat > $W/t6.yaml <<Y
base_model: $W/tl6
datasets:
  - path: $W/d6.jsonl
    type: tokenized
dtype: float32
device: cuda
max_steps: 3
sequence_len: 64
lora_target_modules: [q_proj, v_proj, down_proj]
stream: ram
cache_dir: $W/cache6
Y
  budget=""
  for b in 80MiB 76MiB 72MiB 70MiB 69MiB 68MiB 67MiB 66MiB 65MiB; do
    p=$($B train $W/t6.yaml --vram_budget=$b --max_steps=1 --output_dir=$W/probe 2>&1 | grep -m1 '^plan:')
    if echo "$p" | grep -qE ' [0-3] of 6 layers resident'; then budget=$b; say "sanitizer plan ($b): $p"; break; fi
  done
  for tool in memcheck racecheck; do
    # offload_embeddings + a 300-row vocab chunk: the lm_head streams in 4 chunks through the copy stream.
    timeout 240 $CS --tool $tool --error-exitcode 9 $B train $W/t6.yaml ${budget:+--vram_budget=$budget} \
      --offload_embeddings=true --vocab_chunk=300 \
      --output_dir=$W/cs_$tool >"$OUT/sanitizer_$tool.log" 2>&1
    say "compute-sanitizer $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|Error:' "$OUT/sanitizer_$tool.log" | head -3 | tr '\n' ' ')"
  done
  bash tools/gpu/code12_sanitizer.sh $B $W/t6.yaml "$CS" | tee -a "$OUT/summary.txt"
fi

# 6. PEFT round trip.
if [ -z "${SKIP_PEFT:-}" ]; then
  bash tools/ref/peft_compat.sh $B "$OUT" >"$OUT/peft_stdout.log" 2>&1
  say "peft_compat rc=$?"; tail -20 "$OUT/peft_stdout.log" | tee -a "$OUT/summary.txt"
fi

# 7. merge -> transformers (tools/ref/merge_hf_check.sh): a LoRA trained on the GPU (3 fixtures + a
#    SmolLM2-135M-shaped bf16 model), `streamtune merge` (f32 and bf16); AutoModelForCausalLM loads
#    the merged dir and matches PEFT base+adapter and `streamtune logits`; AutoTokenizer loads the
#    carried tokenizer; `generate` greedy (cuda and cpu) and seeded sampling (cuda) give the same
#    text resident, --stream ram and --stream disk.
if [ -z "${SKIP_MERGE_HF:-}" ]; then
  t7=$SECONDS
  DEVICE=cuda timeout 300 bash tools/ref/merge_hf_check.sh $B $W/mhf >"$OUT/merge_hf.log" 2>&1
  rc=$?
  say "merge_hf rc=$rc in $((SECONDS - t7)) s: $(grep -c '^check .*  ok$' "$OUT/merge_hf.log") checks ok, $(grep -c 'FAIL' "$OUT/merge_hf.log") FAIL lines $(grep -m1 -o '^transformers not installed: skipped' "$OUT/merge_hf.log")"
  grep -E 'FAIL|^generate cuda greedy base\+adapter stream=off' "$OUT/merge_hf.log" | head -8 | tee -a "$OUT/summary.txt"
fi
cat "$OUT/summary.txt"
