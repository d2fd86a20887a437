#!/usr/bin/env bash
# PyTorch checkpoints on the GPU at a real model's shape (io/torch_zip.h): torch writes a random
# Qwen2.5-0.5B-shaped model (bf16) both as pytorch_model-0000i-of-00003.bin shards + index and as
# model.safetensors; `streamtune logits` on CUDA from each must be byte-equal, and `train` from
# each, streamed from RAM in 1 GiB, must log the same losses. Binaries from .devbin (validate.sh's
# staging). Run on the device:  OUT=$OUT bash tools/gpu/torch_bin_check.sh
set -uo pipefail
[ -f .devbin/pack.tar.xz ] && [ ! -x .devbin/streamtune ] && tar xJf .devbin/pack.tar.xz -C .devbin
export LD_LIBRARY_PATH=$PWD/.devbin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
B=$PWD/.devbin/streamtune
OUT=${OUT:-/tmp/torch_bin}; mkdir -p "$OUT"
W=/tmp/stbin; rm -rf $W; mkdir -p $W
PY=/opt/torch/.venv/bin/python
$PY - $W <<'PY'
import json, os, sys, torch
from transformers import Qwen2Config, Qwen2ForCausalLM
w = sys.argv[1]
torch.manual_seed(0)
cfg = Qwen2Config(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                  num_key_value_heads=2, vocab_size=151936, max_position_embeddings=32768, rope_theta=1e6,
                  tie_word_embeddings=True, torch_dtype="bfloat16")
m = Qwen2ForCausalLM(cfg).to(torch.bfloat16)
m.save_pretrained(f"{w}/st")
os.makedirs(f"{w}/bin")
m.config.save_pretrained(f"{w}/bin")
sd = {k: v.contiguous() for k, v in m.state_dict().items() if k != "lm_head.weight"}
names = list(sd); parts = [names[i::3] for i in range(3)]
wm = {}
for i, part in enumerate(parts):
    f = f"pytorch_model-{i + 1:05d}-of-00003.bin"
    torch.save({k: sd[k] for k in part}, f"{w}/bin/{f}")
    wm.update({k: f for k in part})
json.dump({"metadata": {}, "weight_map": wm}, open(f"{w}/bin/pytorch_model.bin.index.json", "w"))
import random
r = random.Random(0)
with open(f"{w}/data.jsonl", "w") as f:
    for _ in range(16):
        f.write(json.dumps({"input_ids": [r.randrange(151000) for _ in range(512)]}) + "\n")
print("written", sum(os.path.getsize(f"{w}/bin/{x}") for x in os.listdir(f"{w}/bin")), "bytes of .bin")
PY
ids=$(python3 -c 'import random; r = random.Random(1); print(",".join(str(r.randrange(151000)) for _ in range(300)))')
for f in st bin; do
  $B logits --model $W/$f --ids "$ids" --device cuda --out $W/logits_$f.safetensors 2>&1 | tail -1
done
cmp -s $W/logits_st.safetensors $W/logits_bin.safetensors && r=IDENTICAL || r=DIFFERENT
echo "logits on CUDA, .bin vs safetensors: $r" | tee -a "$OUT/summary.txt"
for f in st bin; do
  printf 'base_model: %s\ndatasets:\n  - path: %s/data.jsonl\n    type: tokenized\ndevice: cuda\nstream: ram\nvram_budget: 1GiB\nsequence_len: 512\nmicro_batch_size: 2\nmax_steps: 4\nlogging_steps: 1\nlearning_rate: 1.0e-4\noutput_dir: %s/out_%s\ncache_dir: %s/cache_%s\n' \
    "$W/$f" "$W" "$W" "$f" "$W" "$f" >$W/t_$f.yaml
  $B train $W/t_$f.yaml >$W/train_$f.log 2>&1
  echo "train from $f rc=$? $(grep -c '"loss"' $W/out_$f/metrics.jsonl 2>/dev/null) steps" | tee -a "$OUT/summary.txt"
done
python3 - $W <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
w = sys.argv[1]
l = [[json.loads(x)["loss"] for x in open(f"{w}/out_{f}/metrics.jsonl") if '"loss"' in x] for f in ("st", "bin")]
print("train losses st:", l[0]); print("train losses bin:", l[1]); print("same losses:", l[0] == l[1] and len(l[0]) == 4)
PY
grep -E "plan|resident|stream" $W/train_bin.log | head -4 | tee -a "$OUT/summary.txt"
