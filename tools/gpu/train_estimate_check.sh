#!/bin/bash
# The plan banner's step estimate in `train` (stream/planner.h Note [step estimate]) against the
# steps the run logs: Qwen2.5-0.5B shapes (random bf16 weights), packed 2048-token sequences of
# random ids, LoRA q,v r 16, streamed from RAM in a budget that keeps some layers resident; `train
# --plan` and the run itself. Expects .devbin/pack.tar.xz with streamtune (+ lib/).
set -eu
tar xJf .devbin/pack.tar.xz -C .devbin
export LD_LIBRARY_PATH=$PWD/.devbin/lib
B=.devbin/streamtune W=$(mktemp -d)
$B init-model --preset ${PRESET:-qwen2.5-0.5b} --out $W/m --dtype bfloat16 >/dev/null
python3 - $W/data.jsonl <<'PY'
import json, random, sys
r = random.Random(7)
with open(sys.argv[1], "w") as f:
    for _ in range(4000):
        f.write(json.dumps({"input_ids": [r.randrange(151000) for _ in range(r.randrange(100, 400))]}) + "\n")
PY
cat > $W/c.yaml <<Y
base_model: $W/m
datasets:
  - path: $W/data.jsonl
    type: tokenized
dtype: bfloat16
device: cuda
lora_r: 16
lora_alpha: 32
lora_target_modules: [q_proj, v_proj]
micro_batch_size: 1
sequence_len: 2048
sample_packing: true
max_steps: ${STEPS:-12}
logging_steps: 1
stream: ram
output_dir: $W/out
Y
for b in ${BUDGETS:-1GiB 1400MiB}; do
  echo "== vram_budget $b: train --plan"
  $B train $W/c.yaml --plan --vram_budget=$b 2>&1 | grep -E "^plan:|estimate:"
  echo "== vram_budget $b: train"
  $B train $W/c.yaml --vram_budget=$b --output_dir=$W/out.$b > $W/log.$b 2>&1 || { tail -20 $W/log.$b; exit 1; }
  grep -E "^plan:|estimate:" $W/log.$b
  python3 - $W/out.$b/metrics.jsonl <<'PY'
import json, sys
t = [json.loads(l)["elapsed_s"] for l in open(sys.argv[1]) if '"elapsed_s"' in l]
d = [1e3 * (b - a) for a, b in zip(t, t[1:])]
d = sorted(d[len(d) // 2:])  # the second half's steps
print("logged steps %d; median step of the second half: %.1f ms" % (len(t), d[len(d) // 2]))
PY
  # The same plan in bench (no optimizer, data or logging around the step).
  .devbin/streamtune bench --device cuda --preset ${PRESET:-qwen2.5-0.5b} --seq 2048 --stream ram --quant code12 \
    --vram-budget $b --steps 6 --warmup 3 --no-ceilings --json | python3 -c "import json,sys; r=json.load(sys.stdin); print('bench: step %.1f ms, estimate %s ms, %s resident' % (r['step_ms'], r['plan_estimate_ms'], r['resident_layers']))"
done
