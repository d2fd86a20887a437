#!/usr/bin/env bash
# Early stopping and load_best_model_at_end, end to end on the CPU (train/best_eval.h Note [best
# eval and early stopping]). The train set's tokens are all from 3..60 and the eval set's from
# 400..511, so with a high learning rate eval_loss soon rises: the best eval comes before the last
# step, which makes the "final adapter = the best eval's" path observable.
#   A: load_best_model_at_end, 6 steps, eval every step: the best eval B (from metrics.jsonl, HF's
#      rule) is before step 6; final adapter == checkpoint-B's (a checkpoint written for the best)
#   B: early_stopping_patience 2: stops at step S, where A's evals say it must (the same
#      trajectory), final adapter == checkpoint-B's; save_total_limit 1 keeps the best checkpoint
#      beside the newest (save_steps S: one at the stopping step)
#   C: B resumed from checkpoint-B and from checkpoint-S: the same stop, the same adapter bytes;
#      the second trains no further step
#   D: refusals: no eval set, no evals during training, greater_is_better, another metric
#   E: axolotl's loss watchdog and save_first_step
set -u
BIN="$1"
T=$(mktemp -d /tmp/st_cli_early_XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL $*"; exit 1; }
export OMP_WAIT_POLICY=passive

"$BIN" init-model --preset tiny-llama --out "$T/model" --seed 1 --dtype float32 >/dev/null || fail "init-model"
python3 - "$T" <<'PY'
import json, random, sys
r = random.Random(0)
with open(sys.argv[1] + "/train.jsonl", "w") as f:
    for _ in range(32):
        f.write(json.dumps({"input_ids": [r.randrange(3, 60) for _ in range(24)]}) + "\n")
with open(sys.argv[1] + "/eval.jsonl", "w") as f:
    for _ in range(4):
        f.write(json.dumps({"input_ids": [r.randrange(400, 512) for _ in range(24)]}) + "\n")
PY
cat >"$T/noeval.yaml" <<'YAML'
base_model: model
datasets:
  - path: train.jsonl
    type: tokenized
device: cpu
dtype: float32
stream: "off"
sequence_len: 32
micro_batch_size: 2
max_steps: 6
learning_rate: 2.0e-2
lr_scheduler: constant
lora_r: 4
lora_target_modules: [q_proj, v_proj, o_proj, down_proj]
eval_steps: 1
logging_steps: 1
YAML
# ST_TEST_DEVICE=cuda runs the same checks on a GPU (tools/gpu: the same bits rules hold there).
sed -i "s/^device: cpu/device: ${ST_TEST_DEVICE:-cpu}/" "$T/noeval.yaml"
{ cat "$T/noeval.yaml"; printf 'eval_datasets:\n  - path: eval.jsonl\n    type: tokenized\n'; } >"$T/base.yaml"
train() {
  local cfg="$T/base.yaml"
  [[ " $* " == *" --config_noeval "* ]] && cfg="$T/noeval.yaml"
  local args=(); for a in "$@"; do [[ $a == --config_noeval ]] || args+=("$a"); done
  "$BIN" train "$cfg" --cache_dir="$T/cache" "${args[@]}" 2>&1
}
# The step of the best eval as HF picks it (the first of the lowest), the step early stopping with
# patience 2 stops at (transformers' EarlyStoppingCallback, threshold 0), and the last step trained.
best_step() { python3 -c '
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if "eval_loss" in l]
best = None
for e in ev:
    if best is None or e["eval_loss"] < best["eval_loss"]: best = e
print(best["step"])' "$1/metrics.jsonl"; }
stop_step() { python3 -c '
import json, sys
best, bad = None, 0
for e in [json.loads(l) for l in open(sys.argv[1]) if "eval_loss" in l]:
    bad = 0 if best is None or e["eval_loss"] < best else bad + 1
    if best is None or e["eval_loss"] < best: best = e["eval_loss"]
    if bad >= 2: print(e["step"]); break
else: print(0)' "$1/metrics.jsonl"; }
last_step() { python3 -c '
import json, sys
print(max(json.loads(l)["step"] for l in open(sys.argv[1]) if "\"loss\"" in l))' "$1/metrics.jsonl"; }

# A: load_best_model_at_end without early stopping.
out=$(train --output_dir="$T/a" --load_best_model_at_end=true) || fail "run A: $out"
[[ $(last_step "$T/a") == 6 ]] || fail "run A trained to step $(last_step "$T/a"), want 6"
B=$(best_step "$T/a"); S=$(stop_step "$T/a")
(( B < 6 && S > B && S < 6 )) || fail "run A: best eval at step $B, stop at $S; the fixture wants eval_loss rising before step 6: $(cat "$T/a/metrics.jsonl")"
grep -q "final adapter: the best eval's, step $B" <<<"$out" || fail "run A: no final-adapter notice: $out"
cmp -s "$T/a/adapter_model.safetensors" "$T/a/checkpoint-$B/adapter_model.safetensors" || fail "run A: final adapter is not checkpoint-$B's"
# The control: without load_best_model_at_end the final adapter is step 6's, not step B's.
out=$(train --output_dir="$T/a0") || fail "run A0: $out"
cmp -s "$T/a0/adapter_model.safetensors" "$T/a/adapter_model.safetensors" && fail "run A0: the last step's adapter equals the best's"
[[ ! -d "$T/a0/checkpoint-$B" ]] || fail "run A0 wrote a best checkpoint without load_best_model_at_end"

# B: early stopping, patience 2; save_steps S writes a checkpoint at the stopping step.
es=(--early_stopping_patience=2 --save_steps="$S" --save_total_limit=1)
out=$(train --output_dir="$T/b" "${es[@]}") || fail "run B: $out"
[[ $(last_step "$T/b") == "$S" ]] || fail "run B trained to step $(last_step "$T/b"), want $S: $out"
grep -q "early stopping at step $S of 6: 2 evals in a row" <<<"$out" || fail "run B: no early-stopping notice: $out"
grep -q "stopping   after 2 evals" <<<"$out" || fail "run B: banner line missing: $out"
cmp -s "$T/b/adapter_model.safetensors" "$T/a/checkpoint-$B/adapter_model.safetensors" || fail "run B: final adapter is not step $B's"
[[ -d "$T/b/checkpoint-$B" && -d "$T/b/checkpoint-$S" ]] || fail "run B: save_total_limit 1 should keep the best ($B) and the newest ($S): $(ls "$T/b")"
python3 -c '
import json, sys
b = json.load(open(sys.argv[1]))["best_eval"]
assert b["step"] == int(sys.argv[2]) and b["evals_not_improved"] == 2, b' "$T/b/checkpoint-$S/trainer_state.json" "$B" || fail "run B: best_eval in trainer_state.json"

# C: resumed from the best checkpoint, and from the one at the stopping step.
for from in "$B" "$S"; do
  rm -rf "$T/c" && cp -r "$T/b" "$T/c" && rm -f "$T/c/adapter_model.safetensors"
  out=$(train --output_dir="$T/c" "${es[@]}" --resume_from_checkpoint="$T/c/checkpoint-$from") || fail "resume from $from: $out"
  cmp -s "$T/c/adapter_model.safetensors" "$T/b/adapter_model.safetensors" || fail "resume from $from: another adapter"
  [[ $(last_step "$T/c") == "$S" ]] || fail "resume from $from: trained to step $(last_step "$T/c")"
  if [[ $from == "$S" ]]; then
    grep -q "had stopped early at step $S" <<<"$out" || fail "resume from $S: no stopped notice: $out"
  else
    grep -q "early stopping at step $S of 6" <<<"$out" || fail "resume from $B: did not stop at $S: $out"
  fi
done

# E: axolotl's loss watchdog (train/trainer.cc Note [loss watchdog]): a threshold below every loss
# and patience 2 stop the run at step 3 (the checks at the ends of steps 2 and 3 see the logged
# losses of steps 1 and 2), the adapter written; save_first_step writes checkpoint-1.
out=$(train --output_dir="$T/e" --loss_watchdog_threshold=0.001 \
      --loss_watchdog_patience=2 --save_first_step=true --config_noeval) || fail "run E: $out"
[[ $(last_step "$T/e") == 3 ]] || fail "run E trained to step $(last_step "$T/e"), want 3: $out"
grep -q "loss watchdog: .* 2 steps in a row; stopping at step 3 of 6" <<<"$out" || fail "run E: no watchdog notice: $out"
[[ -f "$T/e/adapter_model.safetensors" && -d "$T/e/checkpoint-1" ]] || fail "run E: adapter / checkpoint-1 missing: $(ls "$T/e")"
out=$(train --output_dir="$T/e2" --loss_watchdog_threshold=1000 --config_noeval) || fail "run E2: $out"
[[ $(last_step "$T/e2") == 6 ]] || fail "run E2 (threshold above every loss) stopped at $(last_step "$T/e2")"

# D: refusals, each before any step.
expect_refusal() {  # message, then train args
  local want="$1"; shift
  out=$(train "$@") && fail "accepted: $*: $out"
  grep -q -- "$want" <<<"$out" || fail "$*: want '$want' in: $out"
}
expect_refusal "this run has no eval set" --output_dir="$T/d1" --early_stopping_patience=2 --config_noeval
expect_refusal "evaluates only at the end" --output_dir="$T/d2" --early_stopping_patience=2 --eval_steps=0
expect_refusal "greater_is_better" --output_dir="$T/d3" --greater_is_better=true
expect_refusal "metric_for_best_model" --output_dir="$T/d4" --metric_for_best_model=accuracy
[[ ! -d "$T/d1/checkpoint-1" && ! -d "$T/d2/checkpoint-1" ]] || fail "a refused run trained"
echo PASS
