#!/usr/bin/env bash
# The preference losses against supervised fine-tuning on the same rows a step, on the device
# (carry .devbin): PRESET=qwen2.5-1.5b [MODES="sft dpo orpo ..."] bash tools/gpu/preference_speed.sh.
# A random bf16 model of PRESET with the tiny fixture tokenizer; 256 synthetic pairs (prompt ~250
# words, replies ~500) at sequence_len 2048: SFT on prompt + chosen with micro_batch_size 2 (2 rows)
# against a preference loss (dpo, ipo, orpo, simpo; _stream: streamed within 4 GiB) with
# micro_batch_size 1 (its 2 rows; DPO / IPO plus the reference forward), or KTO (kto, kto_stream)
# with micro_batch_size 2 (2 examples trained, the reference forward over them and their 2 KL rows,
# the policy's forward over the KL rows); ms a step over steps 11-30.
set -uo pipefail
[ -f .devbin/pack.tar.xz ] && [ ! -x .devbin/streamtune ] && tar xJf .devbin/pack.tar.xz -C .devbin
export LD_LIBRARY_PATH=$PWD/.devbin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
B=$PWD/.devbin/streamtune; W=/tmp/dspeed; rm -rf $W; mkdir -p $W
$B init-model --preset ${PRESET:-qwen2.5-1.5b} --out $W/m --dtype bfloat16 --seed 1 >/dev/null || exit 1
cp tests/fixtures/gguf/tiny_tokenizer.json $W/m/tokenizer.json
python3 - $W <<'PY'
import json, random, sys
w = sys.argv[1]; r = random.Random(3)
words = "the of and to in is it that was for on are as with his they at be this from".split()
def text(n): return " ".join(r.choice(words) for _ in range(n))
with open(f"{w}/pairs.jsonl", "w") as f, open(f"{w}/sft.jsonl", "w") as g, open(f"{w}/kto.jsonl", "w") as k:
    for i in range(256):
        q, c, rj = text(250), text(500), text(500)
        k.write(json.dumps({"prompt": [{"role": "user", "content": q}], "completion": [{"role": "assistant", "content": c if i % 2 else rj}], "label": i % 2 == 1}) + "\n")
        f.write(json.dumps({"messages": [{"role": "user", "content": q}], "chosen": {"role": "assistant", "content": c}, "rejected": {"role": "assistant", "content": rj}}) + "\n")
        g.write(json.dumps({"messages": [{"role": "user", "content": q}, {"role": "assistant", "content": c}]}) + "\n")
PY
for mode in ${MODES:-sft sft_rows dpo sft_stream dpo_stream}; do
  ds=sft.jsonl; rl=""; st=off; mbs=2
  case $mode in dpo*|ipo*|orpo*|simpo*) ds=pairs.jsonl; rl="rl: ${mode%%_*}"; mbs=1 ;;
                kto*) ds=kto.jsonl; rl="rl: kto"; mbs=2 ;; esac
  vb=""; [[ $mode == *stream ]] && { st=ram; vb=4GiB; }
  pf=auto; [[ $mode == sft_rows ]] && pf=false  # SFT's 2 rows as rows, as DPO's are (not padding-free)
  cat > $W/$mode.yaml <<Y
base_model: $W/m
$rl
datasets: [{path: $W/$ds, type: chat_template}]
chat_template: chatml
device: cuda
dtype: bfloat16
stream: "$st"
vram_budget: "$vb"
padding_free: "$pf"
sequence_len: 2048
micro_batch_size: $mbs
max_steps: 30
learning_rate: 1.0e-4
lora_r: 16
lora_target_modules: [q_proj, v_proj]
logging_steps: 10
output_dir: $W/out_$mode
Y
  s=$(date +%s.%N); $B train $W/$mode.yaml > $W/$mode.log 2>&1; rc=$?; e=$(date +%s.%N)
  python3 - $W/out_$mode/metrics.jsonl $mode $rc <<'PY'
import json, sys
L = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l]
a, b = L[0], L[-1]  # steps 10 and 30: the first 10 (plans recorded, graphs built) left out
ms = (b["elapsed_s"] - a["elapsed_s"]) / (b["step"] - a["step"]) * 1e3
print(f"{sys.argv[2]} rc={sys.argv[3]}: {ms:.1f} ms a step over steps {a['step']+1}-{b['step']}, tokens a step "
      f"{(b['tokens'] - a['tokens']) / (b['step'] - a['step']):.0f}, last loss {b['loss']:.4f}")
PY
  grep -E '^  (plan|data|pairs|examples|dpo|ipo|orpo|simpo|kto) ' $W/$mode.log | head -4
done
