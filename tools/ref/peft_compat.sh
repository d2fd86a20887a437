#!/usr/bin/env bash
# PEFT compatibility on the device machine (issue "product" §7), in ONE call from the repo root:
#
#   tools/ref/peft_compat.sh BIN OUTDIR
#
# BIN: a prebuilt streamtune (CPU or CUDA build); if $(dirname BIN)/lib exists it goes first on
# LD_LIBRARY_PATH. OUTDIR receives only small files: peft_compat.json, peft_compat.md, logs.
# Models, adapters and logits live in a temporary work dir (KEEP_WORK=1 keeps it).
#
# Per preset (PRESETS, default "tiny-qwen2 tiny-llama smollm2-135m") and dtype (float32, bfloat16):
#   1. streamtune init-model --preset P --dtype D            (random base, HF layout)
#   2. streamtune train, 8 steps on random tokens            -> ours_adapter (B != 0)
#   3. streamtune logits --adapter ours_adapter              -> st_ours.safetensors
#   4. peft_compat.py make-peft: PEFT LoraConfig r=8 on all 7 projections, 8 AdamW steps in torch,
#      save_pretrained                                       -> peft_adapter
#   5. streamtune logits --adapter peft_adapter              -> st_peft.safetensors
#   6. peft_compat.py compare: transformers (eager) + PeftModel.from_pretrained for both adapters,
#      max abs diff / rel norm err / argmax agreement; JSON + table. Tolerances: see the .py.
# RSLORA=true runs both sides with rsLoRA (use_rslora), DORA=true with DoRA (use_dora). Exit 0 only
# when every case passes.
set -uo pipefail
if [[ $# -ne 2 ]]; then
  echo "usage: $0 STREAMTUNE_BIN OUTDIR" >&2
  exit 2
fi
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
OUT=$2
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3}
PRESETS=${PRESETS:-"tiny-qwen2 tiny-llama smollm2-135m"}
DTYPES=${DTYPES:-"float32 bfloat16"}
DEVICE=${DEVICE:-auto}
STEPS=${STEPS:-8}
LR=${LR:-1.0e-2}
export RSLORA=${RSLORA:-false}   # true: both sides train rsLoRA adapters (scale alpha / sqrt(r))
export DORA=${DORA:-false}       # true: both sides train DoRA adapters (use_dora)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
LIBDIR="$(dirname "$BIN")/lib"
if [[ -d "$LIBDIR" ]]; then export LD_LIBRARY_PATH="$LIBDIR:${LD_LIBRARY_PATH:-}"; fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
W=$(mktemp -d /tmp/peft_compat_XXXXXX)
if [[ "${KEEP_WORK:-0}" == 1 ]]; then echo "work dir: $W"; else trap 'rm -rf "$W"' EXIT; fi
LOG="$OUT/peft_compat.log"
: >"$LOG"
t0=$SECONDS

run() {  # run LABEL CMD...: logs the command and its output; returns its status
  local label=$1; shift
  echo "== $label: $*" >>"$LOG"
  local s=$SECONDS
  "$@" >>"$LOG" 2>&1
  local rc=$?
  echo "== $label: rc $rc in $((SECONDS - s)) s" >>"$LOG"
  [[ $rc -ne 0 ]] && echo "FAIL $label (rc $rc), see $LOG" >&2
  return $rc
}

version=$("$BIN" --version 2>&1 | tr '\n' ' ')
echo "streamtune: $version"
cases=()
for p in $PRESETS; do
  for d in $DTYPES; do
    C="$W/$p-$d"
    mkdir -p "$C"
    printf '{"preset": "%s", "dtype": "%s"}\n' "$p" "$d" >"$C/case.json"
    run "$p/$d init" "$BIN" init-model --preset "$p" --dtype "$d" --seed 7 --out "$C/model" || continue
    run "$p/$d data" "$PY" "$HERE/peft_compat.py" data --model "$C/model" --train "$C/train.jsonl" \
      --eval "$C/eval.jsonl" || continue
    cat >"$C/train.yaml" <<YAML
base_model: model
datasets:
  - path: train.jsonl
    type: tokenized
device: $DEVICE
dtype: $d
stream: "off"
shuffle: false
sequence_len: 64
micro_batch_size: 2
max_steps: $STEPS
learning_rate: $LR
lr_scheduler: constant
lora_r: 8
lora_alpha: 16
lora_dropout: 0.0
use_rslora: $RSLORA
use_dora: $DORA
lora_target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]
output_dir: ours_adapter
YAML
    run "$p/$d train" "$BIN" train "$C/train.yaml" || continue
    run "$p/$d logits(ours)" "$BIN" logits --model "$C/model" --adapter "$C/ours_adapter" \
      --ids-file "$C/eval.jsonl" --out "$C/st_ours.safetensors" --device "$DEVICE" --dtype "$d" || continue
    cases+=("$C")
  done
done
echo "streamtune side done in $((SECONDS - t0)) s (${#cases[@]} cases)"

run "PEFT training" "$PY" "$HERE/peft_compat.py" make-peft --steps "$STEPS" --lr "$LR" "${cases[@]}"
for C in "${cases[@]}"; do
  d=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["dtype"])' "$C/case.json")
  [[ -f "$C/peft_adapter/adapter_config.json" ]] || continue
  run "$(basename "$C") logits(peft)" "$BIN" logits --model "$C/model" --adapter "$C/peft_adapter" \
    --ids-file "$C/eval.jsonl" --out "$C/st_peft.safetensors" --device "$DEVICE" --dtype "$d"
done

rc=1
if [[ ${#cases[@]} -gt 0 ]]; then
  "$PY" "$HERE/peft_compat.py" compare --json "$OUT/peft_compat.json" --streamtune-version "$version" \
    "${cases[@]}" 2>>"$LOG"
  rc=$?
fi
expected=$(( $(wc -w <<<"$PRESETS") * $(wc -w <<<"$DTYPES") ))
if [[ ${#cases[@]} -ne $expected ]]; then
  echo "only ${#cases[@]} of $expected cases reached the comparison; see $LOG"
  rc=1
fi
echo "peft_compat: rc $rc in $((SECONDS - t0)) s; results in $OUT/peft_compat.json"
exit $rc
