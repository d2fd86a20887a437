# Sourced by the device scripts that train one small config many ways and compare the bits
# (validate.sh, dora_call.sh, ab_call.sh). Not a script of its own.

# smol_fixture B W: a SmolLM2-shaped random bf16 model in W/smol, 64 rows of random tokens (40-256
# long, seed 7) in W/data.jsonl, and W/bit.yaml training it on CUDA: LoRA r 16 on all seven
# linears, 2 x 2 micro-batches of 256 tokens, 12 steps, lora_dropout ${DROPOUT:-0.1}; the lines of
# ${EXTRA_YAML:-} appended.
smol_fixture() {
  local B=$1 W=$2
  $B init-model --preset smollm2-135m --out $W/smol --dtype bfloat16 >/dev/null
  python3 - $W/data.jsonl <<'PY'
import json, random, sys
r = random.Random(7)
with open(sys.argv[1], "w") as f:
    for _ in range(64):
        f.write(json.dumps({"input_ids": [r.randrange(49152) for _ in range(r.randrange(40, 257))]}) + "\n")
PY
  cat > $W/bit.yaml <<Y
base_model: $W/smol
datasets:
  - path: $W/data.jsonl
    type: tokenized
dtype: bfloat16
device: cuda
lora_r: 16
lora_alpha: 32
lora_dropout: ${DROPOUT:-0.1}
lora_target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]
micro_batch_size: 2
gradient_accumulation_steps: 2
max_steps: 12
sequence_len: 256
cache_dir: $W/cache
${EXTRA_YAML:-}
Y
}

# bit_sig DIR: "<md5 of the logged losses>/<md5 of the adapter bytes>" (12 hex digits each) of a
# finished run in DIR.
bit_sig() {
  local sig ad
  sig=$(python3 -c "import json,sys;print([json.loads(l)['loss'] for l in open('$1/metrics.jsonl') if '\"loss\"' in l])" 2>/dev/null | md5sum | cut -c1-12)
  ad=$(md5sum $1/adapter_model.safetensors 2>/dev/null | cut -c1-12)
  echo "$sig/$ad"
}
