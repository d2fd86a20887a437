#!/usr/bin/env bash
# rl: kto end to end (train/kto_loss.h Note [KTO]) on the tiny chat fixture's unpaired examples
# "what is i?" -> "it is i" (desirable) and "what is i?" -> "it is not i" (undesirable). Oracles:
#  - the loss falls over training and the eval rewards the desirable replies above the others
#    (rewards/margins > 0); metrics.jsonl carries kl and TRL's reward / logp names;
#  - independently of the training path: for one micro-batch of three examples, the loss, the
#    rewards, the log-probabilities and kl that `evaluate` reports equal numpy over `streamtune
#    logits` of the adapter and of the base (the reference), with z0 from the three KL sequences --
#    each example's prompt followed by the reply of the one before it (data/data_loader.h Note
#    [KTO batches]) -- for the KTO adapter (z0 clamped at 0) and a supervised one (z0 > 0);
#  - the conversational record form, the string form and axolotl's chatml.prompt_pairs read the
#    same tokens (the same eval);
#  - refusals name the key: micro_batch_size 1, rpo_alpha, a record without its label, pairs
#    (chosen / rejected) under rl: kto.
set -u
BIN="$1"
T=$(mktemp -d /tmp/st_cli_kto_XXXXXX)
trap '[[ -n "${KEEP:-}" ]] || rm -rf "$T"' EXIT
. "$(dirname "$0")/chat_fixture.sh"
make_chat_fixture "$BIN" "$T" 1 || { echo "FAIL fixture"; exit 1; }
export PYTHONPATH="$(cd "$(dirname "$0")" && pwd):${PYTHONPATH:-}"  # st_logits.py
for i in $(seq 1 24); do
  printf '%s\n' '{"prompt": [{"role": "user", "content": "what is '"$i"'?"}], "completion": [{"role": "assistant", "content": "it is '"$i"'"}], "label": true}'
  printf '%s\n' '{"prompt": [{"role": "user", "content": "what is '"$i"'?"}], "completion": [{"role": "assistant", "content": "it is not '"$i"'"}], "label": false}'
done >"$T/kto.jsonl"
# One micro-batch of three: "what is 1?" -> "it is 1", "what is 2?" -> "it is 2" (desirable),
# "what is 3?" -> "it is not 3" (undesirable).
sed -n '1p;3p;6p' "$T/kto.jsonl" >"$T/three.jsonl"
printf '%s\n' '{"prompt": "what is 1?", "completion": "it is 1", "label": true}' \
  '{"prompt": "what is 2?", "completion": "it is 2", "label": true}' \
  '{"prompt": "what is 3?", "completion": "it is not 3", "label": false}' >"$T/three_strings.jsonl"
for i in $(seq 1 24); do
  printf '%s\n' '{"conversations": [{"from": "human", "value": "what is '"$i"'?"}, {"from": "gpt", "value": "it is '"$i"'"}]}'
done >"$T/sg.jsonl"
cat >"$T/base.yaml" <<'YAML'
base_model: model
datasets:
  - path: kto.jsonl
    type: chat_template
val_set_size: 0.25
chat_template: chatml
device: cpu
dtype: float32
stream: "off"
sequence_len: 64
micro_batch_size: 2
gradient_accumulation_steps: 2
max_steps: 16
learning_rate: 1.0e-2
lora_r: 8
rl: kto
rl_beta: 0.5
kto_undesirable_weight: 1.5
output_dir: kto
YAML
sed -i -e "s/^device: cpu/device: ${ST_TEST_DEVICE:-cpu}/" -e "s/^stream: \"off\"/stream: \"${ST_TEST_STREAM:-off}\"/" "$T/base.yaml"
sed 's/kto.jsonl/three.jsonl/; s/^val_set_size: 0.25/val_set_size: 0/; s/^micro_batch_size: 2/micro_batch_size: 3/' \
  "$T/base.yaml" >"$T/three.yaml"
sed 's/three.jsonl/three_strings.jsonl/' "$T/three.yaml" >"$T/strings.yaml"
sed 's/three.jsonl/three_strings.jsonl/; s/type: chat_template$/type: chatml.prompt_pairs/' "$T/three.yaml" >"$T/fixed.yaml"
# A supervised adapter on the desirable replies: it raises "it is j" after any "what is i?", so
# the KL sequences' log-ratios are positive and z0 is not the clamp (the KTO adapter lowers them).
sed 's/kto.jsonl/sg.jsonl/; s/type: chat_template$/type: sharegpt/; /^rl/d; /^kto_/d; s/^output_dir: kto/output_dir: sft/' \
  "$T/base.yaml" >"$T/sft.yaml"
fail=0
for c in base sft; do
  (cd "$T" && "$BIN" train $c.yaml >$c.log 2>&1) || { echo "FAIL train $c: $(tail -5 "$T/$c.log")"; exit 1; }
done
for a in kto sft; do
  (cd "$T" && "$BIN" evaluate three.yaml --no-base --adapter $a >$a.eval 2>&1) ||
    { echo "FAIL evaluate $a: $(cat "$T/$a.eval")"; exit 1; }
done
p=$'<|im_start|>user\nwhat is %s?<|im_end|>\n<|im_start|>assistant\n'
# Sequences: x1..x3 the examples; k1..k3 their KL sequences, prompt j + the reply of example j-1 (mod 3).
for s in x1:1:"it is 1" x2:2:"it is 2" x3:3:"it is not 3" k1:1:"it is not 3" k2:2:"it is 1" k3:3:"it is 2"; do
  IFS=: read -r name q reply <<<"$s"
  printf -v prompt "$p" "$q"
  "$BIN" tokenize --model "$T/model" --no-special --text "$prompt" >"$T/$name.prompt" &&
    "$BIN" tokenize --model "$T/model" --no-special --text "$prompt$reply<|im_end|>"$'\n' >"$T/$name.ids" &&
    "$BIN" tokenize --model "$T/model" --no-special --text "$prompt$reply<|im_end|>" >"$T/$name.trained" ||
    { echo "FAIL tokenize"; exit 1; }
  ids=$(tr ' ' ',' <"$T/$name.ids")
  for m in base kto sft; do
    adapter=(); [[ $m != base ]] && adapter=(--adapter "$T/$m")
    "$BIN" logits --model "$T/model" "${adapter[@]}" --ids "$ids" --out "$T/$name.$m.st" --device cpu --dtype float32 \
      >/dev/null 2>&1 || { echo "FAIL logits $name $m"; exit 1; }
  done
done
python3 - "$T" <<'PY' || fail=1
import json, math, re, sys
from st_logits import load_logits, token_logps
t = sys.argv[1]
def ids(name): return [int(x) for x in open(f"{t}/{name}").read().split()]
def reply(name, m):  # the reply's summed log p: tokens P .. end of turn
    P, E = len(ids(f"{name}.prompt")), len(ids(f"{name}.trained"))
    return sum(token_logps(load_logits(f"{t}/{name}.{m}.st"), ids(f"{name}.ids"))[P - 1 : E - 1])
beta, wd, wu = 0.5, 1.0, 1.5
sg = lambda z: 1 / (1 + math.exp(-z))
for a in ("kto", "sft"):
    r = {n: reply(n, a) - reply(n, "base") for n in ("x1", "x2", "x3", "k1", "k2", "k3")}
    raw = (r["k1"] + r["k2"] + r["k3"]) / 3
    z0 = max(0.0, raw)
    loss = (wd * (1 - sg(beta * (r["x1"] - z0))) + wd * (1 - sg(beta * (r["x2"] - z0))) + wu * (1 - sg(beta * (z0 - r["x3"])))) / 3
    want = {"loss": loss, "rewards/chosen": beta * (r["x1"] + r["x2"]) / 2, "rewards/rejected": beta * r["x3"],
            "rewards/margins": beta * ((r["x1"] + r["x2"]) / 2 - r["x3"]), "kl": z0,
            "logps/chosen": (reply("x1", a) + reply("x2", a)) / 2, "logps/rejected": reply("x3", a)}
    out = open(f"{t}/{a}.eval").read()
    m = re.search(r"eval_loss ([0-9.]+) \(kto, 3 examples\)(.*)", out)
    assert m, out
    got = {"loss": float(m.group(1))}
    for k, v in re.findall(r"([a-z_/]+) (-?[0-9.]+)", m.group(2)): got[k] = float(v)
    for k, v in want.items():
        tol = 1e-5 * max(1, abs(v)) if k == "loss" else 2e-4 * max(1, abs(v))
        assert abs(got[k] - v) < tol, (a, k, got, want)
    # The KTO adapter lowers the mismatched replies (z0 the clamp at 0); the SFT adapter raises them.
    assert (raw < 0) if a == "kto" else (raw > 0.05), (a, raw)
    print(f"ok   {a} adapter, three examples = numpy: loss {loss:.6f}, rewards {want['rewards/chosen']:.4f} / "
          f"{want['rewards/rejected']:.4f}, kl {z0:.4f} (mean log-ratio of the KL sequences {raw:.4f})")
metrics = [json.loads(l) for l in open(f"{t}/kto/metrics.jsonl")]
steps = [l for l in metrics if "loss" in l]
evals = [l for l in metrics if "eval_loss" in l]
assert steps[-1]["loss"] < 0.8 * steps[0]["loss"], (steps[0], steps[-1])
assert evals[-1]["eval_rewards/margins"] > 0, evals[-1]
for k in ("kl", "rewards/chosen", "logps/rejected"): assert k in steps[-1] and "eval_" + k in evals[-1], (k, steps[-1])
print(f"ok   kto: loss {steps[0]['loss']:.4f} -> {steps[-1]['loss']:.4f}, eval margins {evals[-1]['eval_rewards/margins']:.4f}")
PY
a=$(cd "$T" && "$BIN" evaluate three.yaml --no-base --adapter kto 2>/dev/null | grep -o 'eval_loss.*' | sed -E 's/  \([0-9.]+ s\)$//')  # the seconds vary
b=$(cd "$T" && "$BIN" evaluate strings.yaml --no-base --adapter kto 2>/dev/null | grep -o 'eval_loss.*' | sed -E 's/  \([0-9.]+ s\)$//')  # the seconds vary
c=$(cd "$T" && "$BIN" evaluate fixed.yaml --no-base --adapter kto 2>/dev/null | grep -o 'eval_loss.*' | sed -E 's/  \([0-9.]+ s\)$//')  # the seconds vary
if [[ -n "$a" && "$a" == "$b" && "$a" == "$c" ]]; then echo "ok   string and chatml.prompt_pairs records: the same eval"
else echo "FAIL record forms: '$a' / '$b' / '$c'"; fail=1; fi
if grep -q "kto        KTO: beta 0.5, desirable weight 1, undesirable weight 1.5" "$T/base.log" &&
   grep -q "examples   24 desirable, 24 undesirable" "$T/base.log" && grep -qx -- "- kto" "$T/kto/README.md" &&
   grep -q "desirable / undesirable = 0.667, outside the \[1, 4/3\] KTO recommends; try kto_desirable_weight in \[1.5, 2\] or kto_undesirable_weight in \[0.75, 1\]" "$T/base.log" &&
   grep -q "by KTO on examples labelled desirable or undesirable" "$T/kto/README.md"; then
  echo "ok   banner and model card"
else echo "FAIL banner / model card: $(grep -iE 'kto|examples' "$T/base.log" "$T/kto/README.md" | head)"; fail=1; fi

# A run resumed from its step-8 checkpoint ends with the same adapter, bit for bit (the KL rows
# are a function of the data position, the reference is recomputed).
(cd "$T" && "$BIN" train base.yaml --save_steps=8 --output_dir=whole >whole.log 2>&1) || { echo "FAIL train whole"; fail=1; }
mkdir -p "$T/re" && cp -r "$T/whole/checkpoint-8" "$T/re/"
(cd "$T" && "$BIN" train base.yaml --output_dir=re --resume_from_checkpoint=re/checkpoint-8 >resume.log 2>&1) ||
  { echo "FAIL resume: $(tail -3 "$T/resume.log")"; fail=1; }
if cmp -s "$T/whole/adapter_model.safetensors" "$T/re/adapter_model.safetensors" &&
   ! cmp -s "$T/whole/adapter_model.safetensors" "$T/whole/checkpoint-8/adapter_model.safetensors"; then
  echo "ok   resume: the same adapter"
else echo "FAIL resume: the adapter differs from the uninterrupted run's"; fail=1; fi

# Two CPU devices, whatever ST_TEST_DEVICE is (data parallel; exactness against one device: tests/dist/data_parallel_test.cc).
out=$(cd "$T" && "$BIN" train base.yaml --devices=2 --device=cpu --stream=off --max_steps=4 --output_dir=dp 2>&1)
if grep -qE "^eval step 4  eval_loss [0-9.]+  eval_rewards/chosen" <<<"$out" && [[ -f "$T/dp/adapter_model.safetensors" ]] &&
   grep -q '"kl"' "$T/dp/metrics.jsonl" && grep -q '"eval_rewards/chosen"' "$T/dp/metrics.jsonl"; then echo "ok   devices: 2"
else echo "FAIL devices: 2: $(tail -3 <<<"$out")"; fail=1; fi

out=$(cd "$T" && "$BIN" train three.yaml --preview-data=3 2>&1)
if grep -q "^--- sample 2: .* trained, desirable (KTO)" <<<"$out" && grep -q "^--- sample 3: .* trained, undesirable (KTO)" <<<"$out"
then echo "ok   --preview-data shows the labels"; else echo "FAIL preview: $out"; fail=1; fi

printf '%s\n' '{"prompt": "what is 1?", "completion": "it is 1"}' >"$T/nolabel.jsonl"
make_pair_fixture "$T/pairs.jsonl" 4
sed 's/three.jsonl/nolabel.jsonl/' "$T/three.yaml" >"$T/nolabel.yaml"
sed 's/three.jsonl/pairs.jsonl/' "$T/three.yaml" >"$T/pairs.yaml"
expect_refusal batch-1 "rl: kto estimates its reference point .* micro_batch_size must be at least 2, got 1" -- train base.yaml --micro_batch_size=1 --output_dir=o1
expect_refusal rpo "rpo_alpha applies to rl: dpo and ipo, not kto" -- train base.yaml --rpo_alpha=1 --output_dir=o2
expect_refusal no-label "nolabel.jsonl line 1: missing field 'label' \(true: a desirable completion" -- train nolabel.yaml --output_dir=o3
expect_refusal pairs "pairs.jsonl line 1: missing field 'completion'" -- train pairs.yaml --output_dir=o4
exit $fail
