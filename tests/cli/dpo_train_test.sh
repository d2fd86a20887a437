#!/usr/bin/env bash
# rl: dpo end to end (train/preference_loss.h Note [DPO]) on the tiny chat fixture: pairs
# "what is i?" -> chosen "it is i" / rejected "it is not i", in axolotl's chat_template form.
# Oracles:
#  - a fresh adapter is the reference itself: the first step's loss is ln 2 exactly, rewards 0;
#  - the loss falls and the eval prefers the chosen replies (eval rewards/accuracies 1, margins
#    > 0) after training, and `evaluate` repeats train's last eval_loss;
#  - independently of the training path: the DPO loss and log-probabilities `evaluate` reports for
#    one pair equal those computed in numpy from `streamtune logits` of the adapter (policy) and of
#    the bare base (reference), over the reply's tokens as `tokenize` gives them;
#  - refusals name the key: rl: grpo, a non-preference dataset under rl: dpo, a preference type
#    without rl, DoRA with DPO. (IPO, ORPO and SimPO: preference_losses_test.sh.)
set -u
BIN="$1"
T=$(mktemp -d /tmp/st_cli_dpo_XXXXXX)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/chat_fixture.sh"
make_chat_fixture "$BIN" "$T" 1 || { echo "FAIL fixture"; exit 1; }
make_pair_fixture "$T/pairs.jsonl" 40
export PYTHONPATH="$(cd "$(dirname "$0")" && pwd):${PYTHONPATH:-}"  # st_logits.py
cat >"$T/t.yaml" <<'YAML'
base_model: model
rl: dpo
rl_beta: 0.5
datasets:
  - path: pairs.jsonl
    type: chat_template
val_set_size: 0.2
chat_template: chatml
device: cpu
dtype: float32
stream: "off"
sequence_len: 64
micro_batch_size: 2
gradient_accumulation_steps: 2
max_steps: 20
save_steps: 10
learning_rate: 1.0e-2
lora_r: 8
output_dir: out
YAML
# ST_TEST_DEVICE=cuda runs the same checks on a GPU; ST_TEST_STREAM=ram streams the layers there.
sed -i -e "s/^device: cpu/device: ${ST_TEST_DEVICE:-cpu}/" -e "s/^stream: \"off\"/stream: \"${ST_TEST_STREAM:-off}\"/" "$T/t.yaml"
fail=0
(cd "$T" && "$BIN" train t.yaml >train.log 2>&1) || { echo "FAIL train: $(tail -5 "$T/train.log")"; exit 1; }
grep -q "dpo        DPO: sigmoid loss, beta 0.5" "$T/train.log" || { echo "FAIL banner: $(head -30 "$T/train.log")"; fail=1; }
out=$(cd "$T" && "$BIN" evaluate t.yaml --no-base 2>/dev/null); rc=$?
[[ $rc -eq 0 ]] || { echo "FAIL evaluate rc $rc: $out"; exit 1; }
python3 - "$T/out/metrics.jsonl" "$out" <<'PY' || fail=1
import json, math, re, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
steps = [l for l in lines if "loss" in l]
evals = [l for l in lines if "eval_loss" in l]
first, last = steps[0], steps[-1]
assert first["step"] == 1 and first["loss"] == float("%.9g" % math.log(2)), first
assert first["rewards/chosen"] == 0 and first["rewards/rejected"] == 0, first
assert first["rewards/accuracies"] == 0, first  # no pair's chosen reward is above its rejected one yet
assert last["loss"] < 0.5 * math.log(2), ("the DPO loss did not fall", last)
assert last["rewards/margins"] > 0, last
e = evals[-1]
assert "eval_ppl" not in e, e
assert e["eval_loss"] < math.log(2) and e["eval_rewards/accuracies"] == 1.0 and e["eval_rewards/margins"] > 0, e
m = re.search(r"eval_loss ([0-9.]+) \(dpo, 8 pairs\)", sys.argv[2])
assert m, sys.argv[2]
assert abs(float(m.group(1)) - e["eval_loss"]) < 5e-7, (m.group(1), e)
print(f"ok   dpo: step 1 loss ln 2, last {last['loss']:.4f} (margins {last['rewards/margins']:.3f}); "
      f"eval {e['eval_loss']:.4f} accuracies 1; evaluate repeats it")
PY

# A run resumed from its step-10 checkpoint ends with the same adapter, bit for bit (the reference
# is recomputed against the base, not carried in the checkpoint).
mkdir -p "$T/re" && cp -r "$T/out/checkpoint-10" "$T/re/"
(cd "$T" && "$BIN" train t.yaml --output_dir=re --resume_from_checkpoint=re/checkpoint-10 >resume.log 2>&1) ||
  { echo "FAIL resume: $(tail -3 "$T/resume.log")"; fail=1; }
if cmp -s "$T/out/adapter_model.safetensors" "$T/re/adapter_model.safetensors"; then echo "ok   resume: the same adapter"
else echo "FAIL resume: the adapter differs from the uninterrupted run's"; fail=1; fi

# One pair, evaluated by `evaluate`, against numpy over `logits` (policy: the adapter; reference: the base).
head -1 "$T/pairs.jsonl" >"$T/one.jsonl"
sed 's/pairs.jsonl/one.jsonl/; s/^val_set_size: 0.2/val_set_size: 0/' "$T/t.yaml" >"$T/one.yaml"
out=$(cd "$T" && "$BIN" evaluate one.yaml --no-base --adapter out 2>&1) || { echo "FAIL evaluate one: $out"; exit 1; }
prompt=$'<|im_start|>user\nwhat is 1?<|im_end|>\n<|im_start|>assistant\n'
for r in chosen rejected; do
  reply="it is 1"; [[ $r == rejected ]] && reply="it is not 1"
  "$BIN" tokenize --model "$T/model" --no-special --text "$prompt" >"$T/$r.prompt" || { echo "FAIL tokenize"; exit 1; }
  "$BIN" tokenize --model "$T/model" --no-special --text "$prompt$reply<|im_end|>" >"$T/$r.ids" || { echo "FAIL tokenize"; exit 1; }
  ids=$(tr ' ' ',' <"$T/$r.ids")
  for m in base adapter; do
    a=(); [[ $m == adapter ]] && a=(--adapter "$T/out")
    "$BIN" logits --model "$T/model" "${a[@]}" --ids "$ids" --out "$T/$r.$m.st" --device cpu --dtype float32 >/dev/null 2>&1 ||
      { echo "FAIL logits $r $m"; exit 1; }
  done
done
python3 - "$T" "$out" <<'PY' || fail=1
import json, math, re, sys
import numpy as np
import st_logits
from st_logits import load_logits, token_logps
t, out = sys.argv[1], sys.argv[2]
def logp_sum(r, m):
    ids = [int(x) for x in open(f"{t}/{r}.ids").read().split()]
    p = len(open(f"{t}/{r}.prompt").read().split())
    return sum(token_logps(load_logits(f"{t}/{r}.{m}.st"), ids)[p - 1 :])
pc, pr = logp_sum("chosen", "adapter"), logp_sum("rejected", "adapter")
rc, rr = logp_sum("chosen", "base"), logp_sum("rejected", "base")
z = 0.5 * ((pc - rc) - (pr - rr))
loss = -(z - math.log1p(math.exp(z))) if z < 0 else math.log1p(math.exp(-z))
m = re.search(r"eval_loss ([0-9.]+) \(dpo, 1 pairs\).*logps/chosen (-?[0-9.]+)\s+logps/rejected (-?[0-9.]+)", out)
assert m, out
got = [float(x) for x in m.groups()]
assert abs(got[0] - loss) < 2e-5 * max(1, loss), (got, loss)
assert abs(got[1] - pc) < 1e-3 and abs(got[2] - pr) < 1e-3, (got, pc, pr)
print(f"ok   dpo oracle: loss {got[0]:.6f} = numpy {loss:.6f} (logps {pc:.4f} / {pr:.4f}, reference {rc:.4f} / {rr:.4f})")
PY

expect_refusal grpo "'rl': 'grpo' is not one of: dpo, ipo, orpo, simpo, kto \\(GRPO" -- train t.yaml --rl=grpo --output_dir=o2
sed 's/type: chat_template/type: alpaca/' "$T/t.yaml" >"$T/alpaca.yaml"
expect_refusal sft-type "rl: dpo trains on preference pairs, and type alpaca has none" -- train alpaca.yaml --output_dir=o3
grep -v '^rl:' "$T/t.yaml" | sed 's/type: chat_template/type: chatml.intel/' >"$T/norl.yaml"
expect_refusal no-rl "type chatml.intel holds preference data: set rl \\(dpo" -- train norl.yaml --output_dir=o4
expect_refusal dora "rl: dpo with use_dora is not supported" -- train t.yaml --use_dora=true --output_dir=o5
exit $fail
