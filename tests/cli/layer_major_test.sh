#!/usr/bin/env bash
# Layer-major gradient accumulation through the CLI (stream/planner.h Note [layer-major plan];
# model/model.h Note [layer-major accumulation]): a 6-layer Llama, 4 micro-batches a step, LoRA
# dropout. Over budgets that stream some or all layers, layer_major auto/true/false, RAM and disk,
# every run gives the losses (all digits) and adapter bytes of the resident run, and the eval
# losses too (model/model.h Note [layer-major evaluation]: where layers stream, the eval set's 4
# micro-batches go through the layers as one group); at least one budget plans layer-major order,
# and there it loads fewer layers than the same budget with layer_major: false. Also: layer_major:
# true beyond the budget is refused naming the key.
set -euo pipefail
bin=$(realpath "$1")
. "$(dirname "$0")/six_layer_fixture.sh"
six_layer_setup "$bin" tiny-llama 5 40 9
cat >>"$w/c.yaml" <<Y
lora_r: 4
lora_dropout: 0.1
lora_target_modules: [q_proj, v_proj, gate_proj, down_proj]
micro_batch_size: 2
gradient_accumulation_steps: 4
max_steps: 4
sequence_len: 48
val_set_size: 0.2
eval_steps: 2
Y
loads_of() { sed -nE 's/^streamed .* in ([0-9]+) layer loads.*/\1/p' "$1"; }
evals_of() { grep -o '"eval_loss":[^,}]*' "$1/metrics.jsonl" | tr '\n' ' '; }
"$bin" train "$w/c.yaml" --stream=off --output_dir="$w/ref" >"$w/ref.log" 2>&1 || { cat "$w/ref.log"; exit 1; }
ref=$(sig_of "$w/ref")
ref_evals=$(evals_of "$w/ref")
[ "$(echo "$ref_evals" | wc -w)" = 2 ] || { echo "expected 2 evals, got: $ref_evals"; exit 1; }
fewer=0
for tier in ram disk; do
  for b in 2300KiB 2400KiB 2600KiB 3000KiB; do
    for lm in auto false; do
      out="$w/o_${tier}_${b}_$lm"
      if ! "$bin" train "$w/c.yaml" --stream=$tier --vram_budget=$b --layer_major=$lm --output_dir="$out" >"$out.log" 2>&1; then
        cat "$out.log"; exit 1
      fi
      [ "$(sig_of "$out")" = "$ref" ] || { echo "$tier $b $lm: $(sig_of "$out") differs from the resident run $ref"; exit 1; }
      [ "$(evals_of "$out")" = "$ref_evals" ] || { echo "$tier $b $lm: evals $(evals_of "$out") differ from $ref_evals"; exit 1; }
      echo "$tier $b $lm: $(grep -m1 '^plan:' "$out.log" | cut -c1-120) | $(grep -m1 '^streamed' "$out.log")"
    done
    a=$(loads_of "$w/o_${tier}_${b}_auto.log"); f=$(loads_of "$w/o_${tier}_${b}_false.log")
    if grep -q "layer-major over" "$w/o_${tier}_${b}_auto.log"; then
      [ "$a" -lt "$f" ] || { echo "$tier $b: layer-major planned but $a loads vs $f"; exit 1; }
      fewer=$((fewer + 1))
    fi
  done
done
[ "$fewer" -ge 2 ] || { echo "layer-major order was planned for fewer than 2 budgets"; exit 1; }
grep -q '^eval .* micro-batches a pass, up to [0-9]* through the layers together' "$w/o_ram_2300KiB_auto.log" ||
  { echo "the streamed run's banner does not say its evals are grouped"; grep '^eval' "$w/o_ram_2300KiB_auto.log"; exit 1; }
! grep -q 'through the layers together' "$w/ref.log" || { echo "the resident run claims grouped evals"; exit 1; }
# layer_major: true holds every micro-batch of the step (3 here) even where auto would not.
for lm in true false; do
  out="$w/o3_$lm"
  "$bin" train "$w/c.yaml" --gradient_accumulation_steps=3 --stream=ram --vram_budget=2600KiB --layer_major=$lm \
    --output_dir="$out" >"$out.log" 2>&1 || { cat "$out.log"; exit 1; }
done
grep -q "layer-major over 3 micro-batches" "$w/o3_true.log" || { echo "layer_major: true did not hold 3"; grep '^plan' "$w/o3_true.log"; exit 1; }
[ "$(sig_of "$w/o3_true")" = "$(sig_of "$w/o3_false")" ] || { echo "layer_major true differs from false"; exit 1; }
if "$bin" train "$w/c.yaml" --stream=ram --vram_budget=2100KiB --layer_major=true --output_dir="$w/bad" >"$w/bad.log" 2>&1; then
  echo "layer_major: true beyond the budget was accepted"; exit 1
fi
grep -q "layer_major: true needs 4 micro-batches" "$w/bad.log" || { cat "$w/bad.log"; exit 1; }
echo "layer-major: all runs identical ($ref; evals $ref_evals); fewer loads at $fewer budgets"
