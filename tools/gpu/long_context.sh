#!/usr/bin/env bash
# Long context on the device: is training past 32k tokens right, and how fast is it?
#   1. The long-sequence gputests (attention_cudnn_gputest.cc Note [long sequences]): cuDNN and the
#      own kernels at 50,000 tokens (and 70,000 packed) against the CPU reference.
#   2. `train` end to end on a one-layer model (head_dim 64, vocab 1000) with one 50,000-token row,
#      and with two packed documents (30,000 + 40,000 tokens) in one 70,000-token row: CUDA f32 vs
#      CPU f32 (loss and grad_norm of 2 steps), CUDA bf16 beside them.
#   3. `bench` rows at 16k-128k tokens (default plan: the planner picks recompute), tok/s and VRAM.
# Usage (device): OUT=$OUT bash tools/gpu/long_context.sh   [B=binary dir, default .devbin]
set -u
D=${B:-.devbin}
B=$D/streamtune
OUT=${OUT:-/tmp/lc_out}
W=${W:-/tmp/lc}
mkdir -p "$OUT" "$W"
say() { echo "$*" | tee -a "$OUT/summary.txt"; }

if [ -z "${SKIP_TESTS:-}" ]; then
  t0=$SECONDS
  "$D/backend_cuda_attention_cudnn_gputest" --gtest_filter='*LongSequences*' >"$OUT/gt_cudnn_long.log" 2>&1
  say "attention_cudnn LongSequencesMatch rc=$? ($((SECONDS - t0)) s)"
  grep -E 'max abs err|FAILED|Failure' "$OUT/gt_cudnn_long.log" | head -20 | tee -a "$OUT/summary.txt"
  t0=$SECONDS
  "$D/backend_cuda_cuda_attention_gputest" --gtest_filter='*LongSequence*' >"$OUT/gt_own_long.log" 2>&1
  say "cuda_attention LongSequenceMatchesCpu rc=$? ($((SECONDS - t0)) s)"
  grep -E 'FAILED|Failure' "$OUT/gt_own_long.log" | head -10 | tee -a "$OUT/summary.txt"
fi

if [ -z "${SKIP_TRAIN:-}" ]; then
  python3 - "$W" <<'PY'
import json, os, random, sys
w = sys.argv[1]
os.makedirs(f"{w}/cfg", exist_ok=True)
json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 128,
           "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 64, "intermediate_size": 256,
           "num_hidden_layers": 1, "vocab_size": 1000, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
           "max_position_embeddings": 131072, "tie_word_embeddings": False, "torch_dtype": "bfloat16"},
          open(f"{w}/cfg/config.json", "w"))
r = random.Random(5)
with open(f"{w}/one.jsonl", "w") as f:
    f.write(json.dumps({"input_ids": [r.randrange(1000) for _ in range(50000)]}) + "\n")
with open(f"{w}/two.jsonl", "w") as f:
    for n in (30000, 40000):
        f.write(json.dumps({"input_ids": [r.randrange(1000) for _ in range(n)]}) + "\n")
PY
  $B init-model --config "$W/cfg/config.json" --out "$W/m" --seed 9 --force >/dev/null || say "init-model FAILED"
  run() {  # name data seq packing device dtype
    cat >"$W/$1.yaml" <<Y
base_model: $W/m
datasets:
  - path: $W/$2
    type: tokenized
sequence_len: $3
sample_packing: $4
shuffle: false
device: $5
dtype: $6
max_steps: 2
learning_rate: 1.0e-2
lora_r: 8
lora_target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]
cache_dir: $W/cache
output_dir: $W/o_$1
Y
    local t=$SECONDS
    $B train "$W/$1.yaml" >"$OUT/train_$1.log" 2>&1
    say "train $1 rc=$? ($((SECONDS - t)) s): $(grep -m1 '^plan:' "$OUT/train_$1.log" | cut -c1-120)"
  }
  for d in "one one.jsonl 50000 false" "two two.jsonl 70000 true"; do
    set -- $d
    run "$1_cpu" "$2" "$3" "$4" cpu float32
    run "$1_cuda" "$2" "$3" "$4" cuda float32
    run "$1_bf16" "$2" "$3" "$4" cuda bfloat16
    python3 - "$W/o_$1_cpu/metrics.jsonl" "$W/o_$1_cuda/metrics.jsonl" "$W/o_$1_bf16/metrics.jsonl" "$1" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
def rows(p):
    try:
        return [json.loads(l) for l in open(p) if l.strip()]
    except OSError as e:
        return []
cpu, f32, bf = rows(sys.argv[1]), rows(sys.argv[2]), rows(sys.argv[3])
name = sys.argv[4]
if not (len(cpu) == len(f32) == len(bf) == 2):
    print(f"{name}: FAIL missing metrics ({len(cpu)}, {len(f32)}, {len(bf)} rows)")
    sys.exit(0)
worst = 0.0
for a, b, c in zip(cpu, f32, bf):
    for k in ("loss", "grad_norm"):
        rel = abs(a[k] - b[k]) / max(abs(a[k]), 1e-30)
        worst = max(worst, rel)
        print(f"{name} step {a['step']} {k}: cpu f32 {a[k]:.8g}  cuda f32 {b[k]:.8g} (rel {rel:.2e})  cuda bf16 {c[k]:.6g}")
print(f"{name}: cuda f32 vs cpu f32 worst rel {worst:.2e} -> {'ok' if worst < 1e-4 else 'FAIL'}")
PY
  done
fi

if [ -z "${SKIP_BENCH:-}" ]; then
  for row in ${ROWS:-qwen2.5-0.5b:32768 qwen2.5-0.5b:131072 qwen2.5-3b:32768 llama3-8b:16384 llama3-8b:32768}; do
    p=${row%%:*} s=${row##*:}
    t=$SECONDS
    $B bench --preset "$p" --seq "$s" --steps ${STEPS:-3} --warmup 1 --no-ceilings >"$OUT/bench_${p}_$s.log" 2>&1
    rc=$?
    say "bench $p@$s rc=$rc ($((SECONDS - t)) s): $(grep -E 'tok/s' "$OUT/bench_${p}_$s.log" | head -1)"
    grep -E '^plan:|VRAM|vram|error|Error' "$OUT/bench_${p}_$s.log" | head -3 | tee -a "$OUT/summary.txt"
  done
fi
cat "$OUT/summary.txt"
