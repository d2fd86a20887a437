#!/usr/bin/env bash
# `streamtune train CONFIG --plan`: the memory plan from the model's config alone. On a 6-layer model:
# the plan printed equals the banner's plan of a real run at the same budget (resident, budgeted,
# forced recompute); nothing is built or written (no layer store in cache_dir, no output_dir); a
# budget that cannot hold the plan exits 1 with the planner's refusal; a GGUF base and a layer store
# as base_model plan too; a missing base_model is an error naming it.
set -euo pipefail
bin=$(realpath "$1")
. "$(dirname "$0")/six_layer_fixture.sh"
six_layer_setup "$bin" tiny-llama
cat >>"$w/c.yaml" <<Y
lora_r: 4
lora_alpha: 8
lora_target_modules: [q_proj, v_proj, down_proj]
micro_batch_size: 2
gradient_accumulation_steps: 2
max_steps: 1
sequence_len: 48
output_dir: $w/out
Y
budget=$(budget_for "$bin" "$w/c.yaml" 2 --stream=ram)
rm -rf "$w/cache" "$w/out"
for v in "--stream=off" "--stream=ram --vram_budget=$budget" "--stream=disk --vram_budget=$budget --recompute=full"; do
  # shellcheck disable=SC2086
  "$bin" train "$w/c.yaml" --plan $v >"$w/plan.log" 2>&1 || { cat "$w/plan.log"; exit 1; }
  [ ! -e "$w/cache" ] || { echo "$v: --plan built something in cache_dir: $(ls "$w/cache")"; exit 1; }
  [ ! -e "$w/out" ] || { echo "$v: --plan wrote output_dir"; exit 1; }
  want=$(grep -m1 '^plan:' "$w/plan.log")
  grep -q 'device memory' "$w/plan.log" || { cat "$w/plan.log"; exit 1; }
  # shellcheck disable=SC2086
  "$bin" train "$w/c.yaml" $v --output_dir="$w/run" >"$w/run.log" 2>&1 || { cat "$w/run.log"; exit 1; }
  got=$(grep -m1 '^plan:' "$w/run.log")
  [ "$want" = "$got" ] || { echo "$v: --plan said '$want', the run planned '$got'"; exit 1; }
  echo "$v: $want"
  rm -rf "$w/cache" "$w/run"
done
if "$bin" train "$w/c.yaml" --plan --stream=ram --vram_budget=64KiB >"$w/bad.log" 2>&1; then
  echo "a 64 KiB budget was planned"; exit 1
fi
grep -q "vram_budget is 64.0 KiB" "$w/bad.log" && grep -q "To fit" "$w/bad.log" || { cat "$w/bad.log"; exit 1; }
# Other bases: a GGUF file, and the layer store a run built.
gguf=$(dirname "$0")/../fixtures/gguf/tiny_llama.gguf
"$bin" train "$w/c.yaml" --plan --base_model="$(realpath "$gguf")" >"$w/gguf.log" 2>&1 || { cat "$w/gguf.log"; exit 1; }
grep -q '^plan:' "$w/gguf.log" || { cat "$w/gguf.log"; exit 1; }
store=$("$bin" shard "$w/m" --dtype float32 --out "$w/store" >/dev/null 2>&1 && echo "$w/store")
"$bin" train "$w/c.yaml" --plan --base_model="$store" >"$w/store.log" 2>&1 || { cat "$w/store.log"; exit 1; }
grep -q '^plan:' "$w/store.log" || { cat "$w/store.log"; exit 1; }
if "$bin" train "$w/c.yaml" --plan --base_model="$w/nope" >"$w/nope.log" 2>&1; then echo "a missing base_model planned"; exit 1; fi
grep -q "nope" "$w/nope.log" || { cat "$w/nope.log"; exit 1; }
echo "train --plan: ok"
