#!/usr/bin/env bash
# Exact resume, end to end on the CPU (design: a run killed at any moment and resumed from its
# last checkpoint equals the uninterrupted run).
#   A: 20 steps uninterrupted (save_steps 5, eval every 10 on a held-out val set)
#   B: the same run killed with SIGKILL once checkpoint-10 exists, then resumed
#      (--resume_from_checkpoint=true)
#   C: the same run stopped with SIGINT (exit 130 after a checkpoint), then resumed
# Oracles: metrics.jsonl of B and C equal A's on step/loss/lr/grad_norm/tokens/eval_* (timings
# excluded); adapter_model.safetensors byte-identical (cmp); a resume with a different lora_r is
# refused naming it; loss_curve.svg written; no \r in non-TTY output.
set -u
BIN="$1"
T=$(mktemp -d /tmp/st_cli_resume_XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$T"; }
trap cleanup EXIT
fail() { echo "FAIL $*"; exit 1; }
# Passive OpenMP waits: spinning workers make tiny-model steps 50x slower on a loaded machine.
export OMP_WAIT_POLICY=passive

"$BIN" init-model --preset tiny-llama --out "$T/model" --seed 1 --dtype float32 >/dev/null || fail "init-model"
python3 - "$T/data.jsonl" <<'PY'
import json, random, sys
r = random.Random(0)
with open(sys.argv[1], "w") as f:
    for _ in range(44):
        f.write(json.dumps({"input_ids": [r.randrange(3, 512) for _ in range(r.randrange(12, 32))]}) + "\n")
PY
cat >"$T/train.yaml" <<'YAML'
base_model: model
datasets:
  - path: data.jsonl
    type: tokenized
device: cpu
dtype: float32
stream: "off"
sequence_len: 32
micro_batch_size: 2
gradient_accumulation_steps: 4
max_steps: 20
learning_rate: 1.0e-3
warmup_steps: 3
lora_r: 4
lora_dropout: 0.1
lora_target_modules: [q_proj, v_proj, down_proj]
val_set_size: 4
eval_steps: 10
save_steps: 5
logging_steps: 1
YAML
train() { "$BIN" train "$T/train.yaml" --cache_dir="$T/cache" "$@"; }
# Background runs start the binary itself (not a shell function) so that $! is its pid.
train_bg() { "$BIN" train "$T/train.yaml" --cache_dir="$T/cache" "$@" >"$LOG" 2>&1 & }

out=$(train --output_dir="$T/a" 2>&1) || fail "run A: $out"
[[ "$out" != *$'\r'* ]] || fail "carriage returns in non-TTY output"
for f in adapter_model.safetensors metrics.jsonl loss_curve.svg checkpoint-20/trainer_state.json; do
  [[ -f "$T/a/$f" ]] || fail "run A: missing $f"
done
grep -q "curve      $T/a/loss_curve.svg" <<<"$out" || fail "run A: curve path not printed: $out"

# B: SIGKILL once checkpoint-10 exists.
LOG="$T/b.log" train_bg --output_dir="$T/b"
pid=$!; pids+=("$pid")
for _ in $(seq 1 3000); do [[ -d "$T/b/checkpoint-10" ]] && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.005; done
kill -9 "$pid" 2>/dev/null
{ wait "$pid"; } 2>/dev/null; rc=$?
[[ $rc -eq 137 ]] || fail "run B was not killed mid-run (rc $rc; the test machine is too fast?): $(cat "$T/b.log")"
[[ -d "$T/b/checkpoint-10" && ! -f "$T/b/adapter_model.safetensors" ]] || fail "run B state after kill: $(ls "$T/b")"
out=$(train --output_dir="$T/b" --resume_from_checkpoint=true 2>&1) || fail "resume B: $out"
grep -q "resumed from $T/b/checkpoint-" <<<"$out" || fail "resume B: no 'resumed from' notice: $out"

# C: SIGINT after checkpoint-5: finish the step, checkpoint, exit 130.
LOG="$T/c.log" train_bg --output_dir="$T/c"
pid=$!; pids+=("$pid")
for _ in $(seq 1 3000); do [[ -d "$T/c/checkpoint-5" ]] && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.005; done
kill -INT "$pid" 2>/dev/null
{ wait "$pid"; } 2>/dev/null; rc=$?
[[ $rc -eq 130 ]] || fail "run C after SIGINT: rc $rc (want 130): $(cat "$T/c.log")"
grep -q "interrupted at step" "$T/c.log" || fail "run C: no interruption notice: $(cat "$T/c.log")"
out=$(train --output_dir="$T/c" --resume_from_checkpoint=true 2>&1) || fail "resume C: $out"

python3 - "$T/a/metrics.jsonl" "$T/b/metrics.jsonl" "$T/c/metrics.jsonl" <<'PY' || exit 1
import json, sys
keep = ("step", "loss", "lr", "grad_norm", "tokens", "eval_loss", "eval_ppl")
def rows(p):
    return [{k: v for k, v in json.loads(l).items() if k in keep} for l in open(p) if l.strip()]
a = rows(sys.argv[1])
assert [r["step"] for r in a if "loss" in r] == list(range(1, 21)), a
assert [r["step"] for r in a if "eval_loss" in r] == [10, 20], a
for p in sys.argv[2:]:
    b = rows(p)
    if a != b:
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y: print(f"FAIL {p} line {i+1}: {y} != {x}"); break
        else: print(f"FAIL {p}: {len(b)} lines vs {len(a)}")
        sys.exit(1)
print(f"ok   resume: metrics.jsonl identical over {len(a)} lines (killed, interrupted, uninterrupted)")
PY
cmp "$T/a/adapter_model.safetensors" "$T/b/adapter_model.safetensors" || fail "adapter bytes differ after SIGKILL + resume"
cmp "$T/a/adapter_model.safetensors" "$T/c/adapter_model.safetensors" || fail "adapter bytes differ after SIGINT + resume"

out=$(train --output_dir="$T/c" --resume_from_checkpoint="$T/c/checkpoint-10" --lora_r=8 2>&1); rc=$?
[[ $rc -eq 1 ]] || fail "resume with lora_r 8: rc $rc (want 1): $out"
grep -q "lora_r: checkpoint 4, this run 8" <<<"$out" || fail "refusal does not name lora_r: $out"
echo "ok   resume: adapters byte-identical; SIGINT exit 130; mismatched lora_r refused"
