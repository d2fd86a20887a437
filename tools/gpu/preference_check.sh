#!/usr/bin/env bash
# The preference losses (rl: dpo, ipo, orpo, simpo, kto) on the device machine, in one call from the repo
# root (carry .devbin with the staged binary, the gputests and their libraries):
# OUT=$OUT [LOSSES="dpo ipo orpo simpo rpo kto"] [RUNS="cpu:off cuda:off cuda:ram"] [CLI_TESTS="..."]
#   bash tools/gpu/preference_check.sh (rpo: DPO + rpo_alpha; RUNS cpu:off with a CPU-only build)
#   1. the ce_finish row_scale gputest (backend_cuda_cuda_ops_gputest, filter *Ce*);
#   2. against PyTorch + PEFT (tools/ref/preference_ref.py: each loss as TRL defines it, with
#      autograd; the reference under disable_adapter(); torch AdamW): the tiny chat fixture, an
#      initial adapter from a short SFT run, 6 steps of 2 pairs, float32, on the CPU, on CUDA
#      resident and on CUDA streamed (stream: ram) -- each adapter within 2e-3 of torch's;
#      streamed == resident bit for bit;
#   3. tests/cli/dpo_train_test.sh, preference_losses_test.sh and kto_test.sh on CUDA, resident and streamed.
set -uo pipefail
. "$(dirname "$0")/../../tests/cli/chat_fixture.sh"
OUT=${OUT:?}
mkdir -p "$OUT"
[ -f .devbin/pack.tar.xz ] && tar xJf .devbin/pack.tar.xz -C .devbin
export LD_LIBRARY_PATH=$PWD/.devbin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
B=$PWD/.devbin/streamtune
W=$(mktemp -d /tmp/dpo_XXXXXX)
say() { echo "$*" | tee -a "$OUT/summary.txt"; }
PY=${PYTHON:-/opt/torch/.venv/bin/python3}
[ -x "$PY" ] || PY=python3

if [ -x .devbin/backend_cuda_cuda_ops_gputest ]; then
  .devbin/backend_cuda_cuda_ops_gputest --gtest_brief=1 --gtest_filter='*Ce*:*Entropy*' >"$OUT/gputest_ce.log" 2>&1
  say "gputest ce rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/gputest_ce.log" | tr '\n' ' ')"
fi

make_chat_fixture "$B" "$W" 24 || { say "FAIL fixture"; exit 1; }
for i in $(seq 1 12); do
  printf '%s\n' '{"messages": [{"role": "user", "content": "what is '"$i"'?"}], "chosen": {"role": "assistant", "content": "it is '"$i"'"}, "rejected": {"role": "assistant", "content": "no, '"$i"' is not it"}}'
done >"$W/pairs.jsonl"
for i in $(seq 1 12); do  # KTO: unpaired examples, desirable and not, in an uneven order
  label=true reply="it is $i"; (( i % 3 == 0 )) && label=false reply="no, $i is not it"
  printf '%s\n' '{"prompt": [{"role": "user", "content": "what is '"$i"'?"}], "completion": [{"role": "assistant", "content": "'"$reply"'"}], "label": '"$label"'}'
done >"$W/kto.jsonl"
common() {
  cat <<Y
base_model: $W/model
chat_template: chatml
dtype: float32
sequence_len: 64
lora_r: 8
lora_alpha: 16
lora_dropout: 0.0
lora_target_modules: [q_proj, v_proj, down_proj]
lr_scheduler: constant
weight_decay: 0.0
max_grad_norm: 1.0
shuffle: false
val_set_size: 0
Y
}
{ common; cat <<Y
datasets: [{path: $W/sg.jsonl, type: sharegpt}]
device: cpu
micro_batch_size: 4
max_steps: 3
learning_rate: 1.0e-2
output_dir: $W/init
Y
} >"$W/sft.yaml"
"$B" train "$W/sft.yaml" >"$OUT/sft.log" 2>&1 || { say "FAIL sft: $(tail -3 "$OUT/sft.log")"; exit 1; }
declare -A extra=([dpo]=$'rl: dpo\nrl_beta: 0.5' [ipo]=$'rl: ipo\nrl_beta: 0.5' [orpo]=$'rl: orpo\nrl_beta: 0.2'
                  [simpo]=$'rl: simpo\nrl_beta: 2.0\nsimpo_gamma: 0.5\ncpo_alpha: 0.5'
                  [rpo]=$'rl: dpo\nrl_beta: 0.5\nrpo_alpha: 0.5' [kto]=$'rl: kto\nrl_beta: 0.5\nkto_undesirable_weight: 1.5')
declare -A args=([dpo]="--loss dpo --beta 0.5" [ipo]="--loss ipo --beta 0.5" [orpo]="--loss orpo --beta 0.2"
                 [simpo]="--loss simpo --beta 2.0 --gamma 0.5 --cpo-alpha 0.5" [rpo]="--loss dpo --beta 0.5 --rpo-alpha 0.5"
                 [kto]="--loss kto --beta 0.5 --undesirable-weight 1.5")
for v in hinge robust exo_pair nca_pair sppo_hard apo_zero apo_down discopop sigmoid_norm; do  # DPOTrainer's other loss_types
  extra[$v]=$'rl: dpo\nrl_beta: 0.5\ndpo_loss_type: '$v; args[$v]="--loss $v --beta 0.5"
done
extra[robust]+=$'\ndpo_label_smoothing: 0.1'; args[robust]+=" --label-smoothing 0.1"
for loss in ${LOSSES:-dpo ipo orpo simpo rpo hinge robust exo_pair nca_pair sppo_hard apo_zero apo_down discopop sigmoid_norm}; do
  data=pairs.jsonl; [ "$loss" = kto ] && data=kto.jsonl
  for run in ${RUNS:-cpu:off cuda:off cuda:ram}; do
    dev=${run%%:*} stream=${run##*:} name=${loss}_${run/:/_}
    { common; cat <<Y
${extra[$loss]}
datasets: [{path: $W/$data, type: chat_template}]
lora_model_dir: $W/init
device: $dev
stream: "$stream"
micro_batch_size: 2
max_steps: 6
learning_rate: 5.0e-3
output_dir: $W/$name
Y
    } >"$W/$name.yaml"
    "$B" train "$W/$name.yaml" >"$OUT/train_$name.log" 2>&1 || { say "FAIL train $name: $(tail -3 "$OUT/train_$name.log")"; continue; }
    res=$("$PY" tools/ref/preference_ref.py "$W/model" "$W/init" "$W/$data" "$W/$name" ${args[$loss]} \
          --lr 5e-3 --steps 6 --pairs-per-step 2 2>"$OUT/ref_$name.err")
    say "torch vs streamtune $name rc=$? $res"
  done
  [ -d "$W/${loss}_cuda_ram" ] || continue
  if cmp -s "$W/${loss}_cuda_off/adapter_model.safetensors" "$W/${loss}_cuda_ram/adapter_model.safetensors"; then
    say "$loss streamed == resident: IDENTICAL ($(sha256sum "$W/${loss}_cuda_ram/adapter_model.safetensors" | cut -c1-12))"
  else say "$loss streamed vs resident: DIFFERENT"; fi
done
for s in off ram; do
  for t in ${CLI_TESTS-dpo_train_test preference_losses_test kto_test}; do
    ST_TEST_DEVICE=cuda ST_TEST_STREAM=$s bash tests/cli/$t.sh "$B" >"$OUT/cli_${t}_$s.log" 2>&1
    say "$t.sh cuda stream $s rc=$? $(grep -c '^ok' "$OUT/cli_${t}_$s.log") ok, $(grep -c FAIL "$OUT/cli_${t}_$s.log") FAIL"
  done
done
rm -rf "$W"
