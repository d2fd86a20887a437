#!/usr/bin/env bash
# An axolotl-style config (the keys of axolotl's example LoRA configs) trains as written
# (cli/foreign_keys.h Note [foreign keys]): keys with no effect here are accepted and listed in the
# banner, bf16 / optimizer / lora_target_linear / warmup_ratio / evals_per_epoch / saves_per_epoch /
# save_strategy / cosine_min_lr_ratio map onto ours (the adapter targets all seven linears, checkpoints land once per
# epoch, the warmup is ceil(ratio x steps)), auto_resume_from_checkpoints starts fresh and then
# resumes; keys asking for training we do not build are refused by name.
set -euo pipefail
bin=$(realpath "$1")
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
. "$(dirname "$0")/six_layer_fixture.sh"
write_token_data "$w/data.jsonl" 4 16
make_six_layer "$bin" tiny-llama "$w/m" 3
cat > "$w/c.yaml" <<Y
base_model: $w/m
model_type: LlamaForCausalLM
tokenizer_type: AutoTokenizer
strict: false
datasets:
  - path: $w/data.jsonl
    type: tokenized
dataset_prepared_path: last_run_prepared
val_set_size: 0.25
output_dir: $w/out
device: cpu
sequence_len: 64
sample_packing: false
eval_sample_packing: false
pad_to_sequence_len: true
adapter: lora
lora_model_dir:
lora_r: 4
lora_alpha: 8
lora_dropout: 0.05
lora_target_linear: true
lora_fan_in_fan_out:
wandb_project:
wandb_entity:
wandb_watch:
wandb_name:
wandb_log_model:
gradient_accumulation_steps: 2
micro_batch_size: 2
num_epochs: 2
optimizer: adamw_bnb_8bit
lr_scheduler: cosine
cosine_min_lr_ratio: 0.1
learning_rate: 0.0002
train_on_inputs: false
group_by_length: false
bf16: false
fp16:
tf32: false
gradient_checkpointing: true
early_stopping_patience:
resume_from_checkpoint:
auto_resume_from_checkpoints: true
local_rank:
logging_steps: 1
xformers_attention:
flash_attention: true
warmup_ratio: 0.1
evals_per_epoch: 2
saves_per_epoch: 1
debug:
deepspeed:
weight_decay: 0.0
fsdp:
fsdp_config:
special_tokens:
cache_dir: $w/cache
Y
"$bin" train "$w/c.yaml" >"$w/log" 2>&1 || { cat "$w/log"; exit 1; }
grep -q "keys with no effect here (other tools' settings): model_type, tokenizer_type, strict" "$w/log" ||
  { echo "no-effect keys not listed"; cat "$w/log"; exit 1; }
grep -q "optimizer adamw_bnb_8bit runs as 32-bit AdamW" "$w/log" || { echo "8-bit optimizer note missing"; exit 1; }
grep -q "warmup ratio 0.1" "$w/log" || { echo "warmup ratio not shown"; cat "$w/log"; exit 1; }
python3 - "$w/out" <<'PY'
import json, math, os, sys
out = sys.argv[1]
c = json.load(open(out + "/adapter_config.json"))
assert sorted(c["target_modules"]) == sorted(["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]), c["target_modules"]
steps = [json.loads(l) for l in open(out + "/metrics.jsonl") if '"loss"' in l]
evals = [json.loads(l)["step"] for l in open(out + "/metrics.jsonl") if '"eval_loss"' in l]
total = len(steps)
# float32 (bf16: false), 12 training samples / 2 / 2 = 3 steps an epoch, 2 epochs.
assert total == 6, total
warm = math.ceil(total * 0.1)  # 1: the first step's lr is below the peak, the second at it
lrs = [s["lr"] for s in steps]
assert lrs[0] < lrs[1] and abs(lrs[1] - 2e-4) < 1e-9, lrs
f = 0.5 * (1 + math.cos(math.pi * (total - 1 - warm) / (total - warm)))  # cosine_min_lr_ratio 0.1
assert abs(lrs[-1] - 2e-4 * (0.9 * f + 0.1)) < 1e-9, (lrs[-1], 2e-4 * (0.9 * f + 0.1))
every = math.ceil(total / (2 * 2))  # evals_per_epoch 2 over 2 epochs
assert evals == [s for s in range(every, total + 1, every)] + ([total] if total % every else []), (evals, every)
ck = sorted(int(d.split("-")[1]) for d in os.listdir(out) if d.startswith("checkpoint-"))
assert ck == [3, 6], ck  # saves_per_epoch 1
print("axolotl config: targets all-linear, %d steps, warmup %d, evals at %s, checkpoints %s" % (total, warm, evals, ck))
PY
grep -q "dtype float32\|float32" "$w/log" || { echo "bf16: false did not pick float32"; exit 1; }
# auto_resume_from_checkpoints: the second run resumes from checkpoint-6 and has nothing left to do.
"$bin" train "$w/c.yaml" >"$w/log2" 2>&1 || { cat "$w/log2"; exit 1; }
grep -qi "resum" "$w/log2" || { echo "second run did not resume"; cat "$w/log2"; exit 1; }

# Refusals by name.
refuse() {  # refuse NAME LINE PATTERN: LINE replaces its key's line, or special_tokens'
  local key=${2%%:*}
  if grep -q "^$key:" "$w/c.yaml"; then sed "s|^$key:.*\$|$2|" "$w/c.yaml" > "$w/$1.yaml"
  else sed "s|^special_tokens:\$|$2|" "$w/c.yaml" > "$w/$1.yaml"; fi
  if "$bin" train "$w/$1.yaml" --output_dir="$w/o_$1" >"$w/$1.log" 2>&1; then echo "$1 accepted"; exit 1; fi
  grep -q "$3" "$w/$1.log" || { echo "$1: expected /$3/"; cat "$w/$1.log"; exit 1; }
  echo "refused $1: $(grep -m1 error "$w/$1.log" | cut -c1-160)"
}
refuse neftune "neftune_noise_alpha: -5" "key 'neftune_noise_alpha': must be >= 0, got -5"
refuse loraplus "loraplus_lr_ratio: -16" "key 'loraplus_lr_ratio': must be >= 0, got -16"
refuse minlr_linear "lr_scheduler: linear" "cosine_min_lr_ratio (min_lr_rate) needs lr_scheduler cosine"
refuse modules "lora_modules_to_save: [embed_tokens, lm_head]" "modules_to_save"
refuse grouped "group_by_length2: x" "unknown key 'group_by_length2'"
refuse fp16 "fp16: true" "float16 training is not supported"
refuse sgd "optim: sgd" "only AdamW is supported"
refuse tokens "tokens: [\"<extra_0>\"]" "adding tokens"
echo "axolotl config: accepted, mapped and refused as documented"
