#!/usr/bin/env bash
# `streamtune merge` output loads in transformers and means base + adapter; `streamtune generate`
# gives the same greedy text resident and streamed (ram, disk). Developer script, from the repo root:
#
#   tools/ref/merge_hf_check.sh STREAMTUNE_BIN WORKDIR
#
# Environment: DEVICE cpu (default) | cuda | auto: where streamtune trains and computes logits;
#   FIXTURES (default "llama_gqa qwen2_tied qwen3_qknorm mistral_swa qwen2_swa", tests/fixtures/*/model, f32);
#   SMOL=1 adds a SmolLM2-135M-shaped random bf16 model (init-model) with the smollm2 tokenizer;
#   SMOL_LAYERS=N shrinks it to N layers (quicker on a CPU); STEPS (default 4) training steps;
#   GEN=0 skips the generate check; GEN_DEVICES (default: "cuda cpu" when DEVICE=cuda, else "cpu");
#   PYTHON (default python3). WORKDIR is wiped and refilled; its log.txt has every command's output.
#
# Per case: train a LoRA (r 8, alpha 16, all 7 projections, lr 1e-2, so B != 0) with
# `streamtune train`; `streamtune merge` it to merged_f32 (--dtype float32) and, for the bf16 SmolLM2
# model, merged_bf16 (the base's dtype); `streamtune logits` (f32) of base, base+adapter and each
# merged dir; then merge_hf_check.py check (see its docstring: file/tensor/weight checks with numpy,
# HF + PEFT checks when torch imports, else "transformers not installed: skipped").
# Generate (SmolLM2 case; its tokenizer is padded so every id shows as " t<id>"): base+adapter,
# --max-new-tokens 16 --temperature 0, with no --stream, --stream ram and --stream disk on each
# GEN_DEVICES device: the three texts must be identical. On the first device also seeded sampling
# (--temperature 0.8 --top-p 0.95 --seed 5), same rule; and the merged models' greedy text is
# printed (a note, not a check: merged weights round differently, which may flip a near tie).
# Exit 0 only when every check passes.
set -uo pipefail
if [[ $# -ne 2 ]]; then
  echo "usage: $0 STREAMTUNE_BIN WORKDIR" >&2
  exit 2
fi
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
W=$2
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PY=${PYTHON:-python3}
DEVICE=${DEVICE:-cpu}
FIXTURES=${FIXTURES-"llama_gqa qwen2_tied qwen3_qknorm mistral_swa qwen2_swa"}
SMOL=${SMOL:-1}
STEPS=${STEPS:-4}
GEN=${GEN:-1}
if [[ "$DEVICE" == cuda ]]; then GEN_DEVICES=${GEN_DEVICES:-"cuda cpu"}; else GEN_DEVICES=${GEN_DEVICES:-cpu}; fi
LIBDIR="$(dirname "$BIN")/lib"
if [[ -d "$LIBDIR" ]]; then export LD_LIBRARY_PATH="$LIBDIR:${LD_LIBRARY_PATH:-}"; fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
rm -rf "$W"
mkdir -p "$W"
W=$(cd "$W" && pwd)
export XDG_CACHE_HOME="$W/cache"  # the layer store that --stream shards into
LOG="$W/log.txt"
: >"$LOG"
t0=$SECONDS
fails=0

run() {  # run LABEL CMD...: logs the command and its output; returns its status
  local label=$1; shift
  echo "== $label: $*" >>"$LOG"
  local s=$SECONDS
  "$@" >>"$LOG" 2>&1
  local rc=$?
  echo "== $label: rc $rc in $((SECONDS - s)) s" >>"$LOG"
  if [[ $rc -ne 0 ]]; then echo "FAIL $label (rc $rc), see $LOG"; fails=$((fails + 1)); fi
  return $rc
}

write_tokenizer() {  # the smollm2 test tokenizer padded to the model's vocab, plus its config files
  local v
  v=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["vocab_size"])' "$1/config.json") || return 1
  run "tokenizer" "$PY" "$HERE/merge_hf_check.py" tokenizer --src "$ROOT/tests/fixtures/tokenizers/smollm2/tokenizer.json" \
    --out "$1" --vocab "$v"
}

make_base() {  # make_base NAME CASEDIR
  local name=$1 C=$2
  if [[ "$name" == smollm2 ]]; then
    run "$name init" "$BIN" init-model --preset smollm2-135m --dtype bfloat16 --seed 11 --out "$C/model" || return 1
    if [[ -n "${SMOL_LAYERS:-}" ]]; then
      "$PY" -c 'import json,sys; c=json.load(open(sys.argv[1])); c["num_hidden_layers"]=int(sys.argv[2]);
json.dump(c, open(sys.argv[3], "w"))' "$C/model/config.json" "$SMOL_LAYERS" "$C/smol.json" || return 1
      rm -rf "$C/model"
      run "$name init ($SMOL_LAYERS layers)" "$BIN" init-model --config "$C/smol.json" --dtype bfloat16 --seed 11 \
        --out "$C/model" || return 1
    fi
    write_tokenizer "$C/model" || return 1
  else
    cp -r "$ROOT/tests/fixtures/$name/model" "$C/model" || return 1
  fi
}

prepare_case() {  # prepare_case NAME: base, adapter, merges, logits under $W/NAME
  local name=$1 C=$W/$1
  mkdir -p "$C"
  make_base "$name" "$C" || return 1
  run "$name data" "$PY" "$HERE/merge_hf_check.py" data --model "$C/model" --train "$C/train.jsonl" \
    --eval "$C/eval.jsonl" || return 1
  cat >"$C/train.yaml" <<YAML
base_model: model
datasets:
  - path: train.jsonl
    type: tokenized
device: $DEVICE
dtype: float32
stream: "off"
shuffle: false
sequence_len: 32
micro_batch_size: 2
max_steps: $STEPS
learning_rate: 1.0e-2
lr_scheduler: constant
lora_r: 8
lora_alpha: 16
lora_dropout: 0.0
lora_target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]
output_dir: adapter
YAML
  run "$name train" "$BIN" train "$C/train.yaml" || return 1
  run "$name merge f32" "$BIN" merge --model "$C/model" --adapter "$C/adapter" --out "$C/merged_f32" \
    --dtype float32 || return 1
  local tags="base adapter merged_f32"
  if grep -q '"bfloat16"' "$C/model/config.json"; then
    run "$name merge bf16" "$BIN" merge --model "$C/model" --adapter "$C/adapter" --out "$C/merged_bf16" || return 1
    tags="$tags merged_bf16"
  fi
  for t in $tags; do
    local m="$C/model" a=()
    [[ $t == adapter ]] && a=(--adapter "$C/adapter")
    [[ $t == merged_* ]] && m="$C/$t"
    run "$name logits $t" "$BIN" logits --model "$m" "${a[@]}" --ids-file "$C/eval.jsonl" \
      --out "$C/st_$t.safetensors" --device "$DEVICE" --dtype float32 || return 1
  done
}

GEN_PROMPT="The capital of France is"

gen_modes() {  # gen_modes DEV LABEL FLAGS...: base+adapter with no --stream, ram, disk; same text?
  local dev=$1 label=$2 C=$W/smollm2 ref="" mode out rc streamed
  shift 2
  for mode in off ram disk; do
    local flags=() err="$C/gen_${dev}_${label}_$mode.err"
    [[ $mode != off ]] && flags=(--stream "$mode")
    echo "== generate $dev $label $mode" >>"$LOG"
    out=$("$BIN" generate --model "$C/model" --adapter "$C/adapter" --prompt "$GEN_PROMPT" --max-new-tokens 16 \
      --device "$dev" "$@" "${flags[@]}" 2>"$err")
    rc=$?
    cat "$err" >>"$LOG"
    streamed=""
    if [[ $mode != off ]]; then
      if grep -q "^streaming .* layers" "$err"; then streamed=" (streamed)"; else streamed=" (NOT STREAMED)"; fi
    fi
    echo "generate $dev $label base+adapter stream=$mode rc=$rc$streamed: \"${out//$'\n'/\\n}\""
    if [[ $rc -ne 0 || -z "$out" || "$streamed" == *NOT* ]]; then fails=$((fails + 1)); continue; fi
    if [[ -z "$ref" ]]; then ref=$out; elif [[ "$out" != "$ref" ]]; then
      echo "check generate $dev $label: stream=$mode differs from resident  FAIL"; fails=$((fails + 1))
    fi
  done
  [[ -n "$ref" ]] && echo "check generate $dev $label: resident == ram == disk  ok"
  GEN_REF=$ref
}

gen_check() {  # greedy on every GEN_DEVICES device; sampled (seeded) and the merged model on the first
  local first=1 dev out t
  for dev in $GEN_DEVICES; do
    gen_modes "$dev" greedy --temperature 0
    [[ $first == 1 ]] || continue
    first=0
    local greedy=$GEN_REF
    # A random model's greedy text is often one token repeated; seeded sampling from the same
    # logits shows many more of them, so it catches a difference argmax would hide.
    gen_modes "$dev" sampled --temperature 0.8 --top-p 0.95 --seed 5
    for t in merged_f32 merged_bf16; do
      [[ -d "$W/smollm2/$t" ]] || continue
      out=$("$BIN" generate --model "$W/smollm2/$t" --prompt "$GEN_PROMPT" --max-new-tokens 16 --temperature 0 \
        --device "$dev" 2>>"$LOG")
      echo "generate $dev greedy $t (a note, not a check): $([[ "$out" == "$greedy" ]] && echo same as base+adapter \
        || echo differs from base+adapter): \"${out//$'\n'/\\n}\""
    done
  done
}

echo "streamtune: $("$BIN" --version 2>&1 | tr '\n' ' ')device $DEVICE, work dir $W"
cases=()
names="$FIXTURES"
[[ "$SMOL" == 1 ]] && names="$names smollm2"
for n in $names; do
  if prepare_case "$n"; then cases+=("$W/$n"); fi
done
echo "streamtune side done in $((SECONDS - t0)) s (${#cases[@]} of $(wc -w <<<"$names") cases)"
if [[ ${#cases[@]} -gt 0 ]]; then
  t1=$SECONDS
  "$PY" "$HERE/merge_hf_check.py" check "${cases[@]}" || fails=$((fails + 1))
  echo "checks done in $((SECONDS - t1)) s"
fi
if [[ "$GEN" == 1 && -d "$W/smollm2/adapter" ]]; then
  t1=$SECONDS
  gen_check
  echo "generate done in $((SECONDS - t1)) s"
fi
[[ ${#cases[@]} -eq $(wc -w <<<"$names") ]] || fails=$((fails + 1))
echo "merge_hf_check: $([[ $fails -eq 0 ]] && echo PASS || echo "FAIL ($fails)") in $((SECONDS - t0)) s"
[[ $fails -eq 0 ]]
