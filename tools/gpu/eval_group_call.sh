#!/usr/bin/env bash
# Layer-major evaluation (model/model.h Note [layer-major evaluation]) on the device, in ONE call
# (carry .devbin): one batch at a time (STREAMTUNE_EVAL_GROUP=1) against the default groups, same
# binary, same data; the eval loss must be the same to the last digit printed.
#   1. `streamtune evaluate` of a random bf16 PRESET (default qwen2.5-3b) on EVAL_N samples of ~2000
#      tokens at sequence_len 2048: resident (stream off), and streamed in BUDGET (default 4GiB)
#      with groups 1 and default -> the seconds `evaluate` prints for the pass.
#   2. DPO and KTO streamed in BUDGET with gradient_accumulation_steps 4 (the window's reference
#      forwards, and KTO's KL forwards, as one group) -> ms a step over steps 6-15.
#   PRESET=qwen2.5-3b BUDGET=4GiB EVAL_N=48 PREF_PRESET=qwen2.5-1.5b [KTO_BUDGET=..] [MAX_STEPS=15]
#   [EVALS=0: no evaluate runs] [PREF_RUNS="dpo:1 dpo: kto:1 kto:"] bash tools/gpu/eval_group_call.sh
set -uo pipefail
[ -f .devbin/pack.tar.xz ] && [ ! -x .devbin/streamtune ] && tar xJf .devbin/pack.tar.xz -C .devbin
export LD_LIBRARY_PATH=$PWD/.devbin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
B=$PWD/.devbin/streamtune; W=/tmp/evgroup; rm -rf $W; mkdir -p $W
BUDGET=${BUDGET:-4GiB}; EVAL_N=${EVAL_N:-48}
for p in ${PRESET:-qwen2.5-3b} ${PREF_PRESET:-qwen2.5-1.5b}; do
  [ -d $W/$p ] && continue
  $B init-model --preset $p --out $W/$p --dtype bfloat16 --seed 1 >/dev/null || exit 1
  cp tests/fixtures/gguf/tiny_tokenizer.json $W/$p/tokenizer.json
done
python3 - $W $EVAL_N <<'PY'
import json, random, sys
w, n = sys.argv[1], int(sys.argv[2]); r = random.Random(3)
words = "the of and to in is it that was for on are as with his they at be this from".split()
def text(k): return " ".join(r.choice(words) for _ in range(k))
with open(f"{w}/sft.jsonl", "w") as f:
    for _ in range(16): f.write(json.dumps({"messages": [{"role": "user", "content": text(100)}, {"role": "assistant", "content": text(300)}]}) + "\n")
with open(f"{w}/eval.jsonl", "w") as f:
    for _ in range(n): f.write(json.dumps({"messages": [{"role": "user", "content": text(300)}, {"role": "assistant", "content": text(1600)}]}) + "\n")
with open(f"{w}/pairs.jsonl", "w") as f, open(f"{w}/kto.jsonl", "w") as k:
    for i in range(128):
        q, c, rj = text(250), text(500), text(500)
        f.write(json.dumps({"messages": [{"role": "user", "content": q}], "chosen": {"role": "assistant", "content": c}, "rejected": {"role": "assistant", "content": rj}}) + "\n")
        k.write(json.dumps({"prompt": [{"role": "user", "content": q}], "completion": [{"role": "assistant", "content": c if i % 2 else rj}], "label": i % 2 == 1}) + "\n")
PY
config() {  # config NAME MODEL DATASET STREAM BUDGET EXTRA...
  local name=$1 model=$2 ds=$3 st=$4 vb=$5; shift 5
  { cat <<Y
base_model: $W/$model
datasets: [{path: $W/$ds, type: chat_template}]
chat_template: chatml
device: cuda
dtype: bfloat16
stream: "$st"
vram_budget: "$vb"
sequence_len: 2048
learning_rate: 1.0e-4
lora_r: 16
lora_target_modules: [q_proj, v_proj]
logging_steps: 5
output_dir: $W/out_$name
Y
    printf '%s\n' "$@"; } > $W/$name.yaml
}
M=${PRESET:-qwen2.5-3b}
EV="eval_datasets: [{path: $W/eval.jsonl, type: chat_template}]"
config ev_res $M sft.jsonl off "" "micro_batch_size: 1" "$EV"
config ev_str $M sft.jsonl ram $BUDGET "micro_batch_size: 1" "$EV"
for run in $([ "${EVALS:-1}" = 0 ] || echo "ev_res: ev_str:1 ev_str: ev_res:1"); do
  name=${run%%:*}; g=${run#*:}
  STREAMTUNE_EVAL_GROUP=$g $B evaluate $W/$name.yaml > $W/$name.g$g.log 2>&1; rc=$?
  echo "evaluate $name group=${g:-default} rc=$rc: $(grep -E '^  base ' $W/$name.g$g.log)"
  grep -m1 -E '^plan:' $W/$name.g$g.log | cut -c1-160; grep -m1 -E '^streamed' $W/$name.g$g.log
  [ $rc = 0 ] || tail -5 $W/$name.g$g.log
done
P=${PREF_PRESET:-qwen2.5-1.5b}
config dpo $P pairs.jsonl ram $BUDGET "rl: dpo" "micro_batch_size: 1" "gradient_accumulation_steps: 4" "max_steps: ${MAX_STEPS:-15}"
config kto $P kto.jsonl ram ${KTO_BUDGET:-$BUDGET} "rl: kto" "micro_batch_size: 2" "gradient_accumulation_steps: 4" "max_steps: ${MAX_STEPS:-15}"
for run in ${PREF_RUNS-dpo:1 dpo: kto:1 kto:}; do
  name=${run%%:*}; g=${run#*:}
  rm -rf $W/out_$name
  STREAMTUNE_EVAL_GROUP=$g $B train $W/$name.yaml > $W/$name.g$g.log 2>&1; rc=$?
  [ $rc = 0 ] || { tail -4 $W/$name.g$g.log; continue; }
  python3 - $W/out_$name/metrics.jsonl "$name group=${g:-default}" $rc <<'PY'
import json, sys
L = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l]
a, b = L[0], L[-1]  # steps 5 and 15: the first 5 (plans recorded) left out
ms = (b["elapsed_s"] - a["elapsed_s"]) / (b["step"] - a["step"]) * 1e3
print(f"{sys.argv[2]} rc={sys.argv[3]}: {ms:.1f} ms a step over steps {a['step']+1}-{b['step']}, loss {b['loss']!r}")
PY
  grep -m1 -E '^plan:' $W/$name.g$g.log | cut -c1-160; grep -m1 -E '^streamed' $W/$name.g$g.log
done
# 3. TRAIN_BITS=1: `train` with the eval set every 3 steps, resident and streamed in BUDGET (grouped
#    evals) and streamed one at a time: metrics.jsonl's losses and eval losses (9 digits) identical.
if [ "${TRAIN_BITS:-0}" = 1 ]; then
  for run in res:off::"" str:ram:$BUDGET:"" str1:ram:$BUDGET:1; do
    IFS=: read -r name st vb g <<<"$run"
    config tb_$name $M sft.jsonl $st "$vb" "micro_batch_size: 1" "gradient_accumulation_steps: 2" "max_steps: 6" \
      "eval_steps: 3" "$EV"
    STREAMTUNE_EVAL_GROUP=$g $B train $W/tb_$name.yaml > $W/tb_$name.log 2>&1 || { echo "train $name failed"; tail -4 $W/tb_$name.log; }
    grep -m1 -E '^eval ' $W/tb_$name.log
  done
  python3 - $W <<'PY'
import json, sys
w = sys.argv[1]
def rows(n): return [{k: v for k, v in json.loads(l).items() if k in ("step", "loss", "eval_loss")} for l in open(f"{w}/out_tb_{n}/metrics.jsonl")]
a = rows("res")
for n in ("str", "str1"):
    print(f"train bits {n} vs resident: {'IDENTICAL' if rows(n) == a else 'DIFFERENT'} ({sum('eval_loss' in r for r in a)} evals, {a[-1]})")
PY
fi
