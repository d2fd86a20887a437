#!/usr/bin/env bash
# rl: ipo, orpo and simpo end to end (train/preference_loss.h Note [reference-free and
# length-normalized losses]) on the tiny chat fixture's pairs "what is i?" -> "it is i" / "it is
# not i". Oracles:
#  - IPO with a fresh adapter is at its reference: the first step's loss is 1 / (4 beta^2) = 1;
#  - each loss falls over training (IPO's by 30%) and the eval prefers the chosen replies (margins > 0);
#  - independently of the training path: the loss, rewards and log-probabilities `evaluate`
#    reports for one pair equal those computed in numpy from `streamtune logits` of the adapter
#    (and of the base: IPO's reference), with TRL's definitions -- mean log-probs over the reply's
#    tokens; ORPO's NLL over every token of the chosen sequence, prompt included; SimPO's over the
#    chosen reply's tokens;
#  - rpo_alpha adds the chosen reply's NLL to DPO (TRL's RPO); dpo_loss_type apo_zero (one of
#    DPOTrainer's other loss types) trains and evaluates as TRL writes it;
#  - orpo_alpha is ORPO's beta where rl_beta is not written (axolotl); ORPO with DoRA trains too;
#  - refusals name the key: label smoothing with ORPO, dpo_loss_type: ipo with rl: orpo.
set -u
BIN="$1"
T=$(mktemp -d /tmp/st_cli_pref_XXXXXX)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/chat_fixture.sh"
make_chat_fixture "$BIN" "$T" 1 || { echo "FAIL fixture"; exit 1; }
make_pair_fixture "$T/pairs.jsonl" 40
export PYTHONPATH="$(cd "$(dirname "$0")" && pwd):${PYTHONPATH:-}"  # st_logits.py
head -1 "$T/pairs.jsonl" >"$T/one.jsonl"
cat >"$T/base.yaml" <<'YAML'
base_model: model
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
max_steps: 16
learning_rate: 1.0e-2
lora_r: 8
YAML
sed -i -e "s/^device: cpu/device: ${ST_TEST_DEVICE:-cpu}/" -e "s/^stream: \"off\"/stream: \"${ST_TEST_STREAM:-off}\"/" "$T/base.yaml"
{ cat "$T/base.yaml"; printf 'rl: ipo\nrl_beta: 0.5\noutput_dir: ipo\n'; } >"$T/ipo.yaml"
{ cat "$T/base.yaml"; printf 'rl: orpo\norpo_alpha: 0.2\noutput_dir: orpo\n'; } >"$T/orpo.yaml"
{ cat "$T/base.yaml"; printf 'rl: simpo\nrl_beta: 2.0\nsimpo_gamma: 0.5\ncpo_alpha: 0.5\noutput_dir: simpo\n'; } >"$T/simpo.yaml"
{ cat "$T/base.yaml"; printf 'rl: dpo\nrl_beta: 0.5\nrpo_alpha: 0.5\noutput_dir: rpo\n'; } >"$T/rpo.yaml"
{ cat "$T/base.yaml"; printf 'rl: dpo\ndpo_loss_type: apo_zero\nrl_beta: 0.5\noutput_dir: apo_zero\n'; } >"$T/apo_zero.yaml"
# DoRA with a loss that needs no reference (a DoRA adapter with B = 0 still rescales the base, so
# DPO and IPO refuse it).
{ cat "$T/base.yaml"; printf 'rl: orpo\norpo_alpha: 0.2\nuse_dora: true\noutput_dir: orpo_dora\n'; } >"$T/orpo_dora.yaml"
fail=0
prompt=$'<|im_start|>user\nwhat is 1?<|im_end|>\n<|im_start|>assistant\n'
"$BIN" tokenize --model "$T/model" --no-special --text "$prompt" >"$T/prompt.ids" || { echo "FAIL tokenize"; exit 1; }
for r in chosen rejected; do
  reply="it is 1"; [[ $r == rejected ]] && reply="it is not 1"
  # The whole rendered conversation (the template's newline after the reply's end included).
  "$BIN" tokenize --model "$T/model" --no-special --text "$prompt$reply<|im_end|>"$'\n' >"$T/$r.ids" ||
    { echo "FAIL tokenize"; exit 1; }
  "$BIN" tokenize --model "$T/model" --no-special --text "$prompt$reply<|im_end|>" >"$T/$r.trained" ||
    { echo "FAIL tokenize"; exit 1; }
  ids=$(tr ' ' ',' <"$T/$r.ids")
  "$BIN" logits --model "$T/model" --ids "$ids" --out "$T/$r.base.st" --device cpu --dtype float32 >/dev/null 2>&1 ||
    { echo "FAIL logits $r base"; exit 1; }
done
for kind in ipo rpo apo_zero orpo simpo orpo_dora; do
  (cd "$T" && "$BIN" train $kind.yaml >$kind.log 2>&1) || { echo "FAIL train $kind: $(tail -5 "$T/$kind.log")"; fail=1; continue; }
  sed 's/pairs.jsonl/one.jsonl/; s/^val_set_size: 0.2/val_set_size: 0/' "$T/$kind.yaml" >"$T/$kind.one.yaml"
  (cd "$T" && "$BIN" evaluate $kind.one.yaml --no-base --adapter $kind >$kind.eval 2>&1) ||
    { echo "FAIL evaluate $kind: $(cat "$T/$kind.eval")"; fail=1; continue; }
  for r in chosen rejected; do
    ids=$(tr ' ' ',' <"$T/$r.ids")
    "$BIN" logits --model "$T/model" --adapter "$T/$kind" --ids "$ids" --out "$T/$r.$kind.st" --device cpu \
      --dtype float32 >/dev/null 2>&1 || { echo "FAIL logits $r $kind"; exit 1; }
  done
  python3 - "$T" "$kind" <<'PY' || fail=1
import json, math, re, sys
import numpy as np
import st_logits
from st_logits import load_logits, token_logps
t, kind = sys.argv[1], sys.argv[2]
def ids(name): return [int(x) for x in open(f"{t}/{name}").read().split()]
P = len(ids("prompt.ids"))
def seq_logps(r, m):  # log p of token k given tokens < k, for k = 1 .. len-1
    return st_logits.token_logps(load_logits(f"{t}/{r}.{m}.st"), ids(f"{r}.ids"))
def reply(r, m):  # sum and count over the trained reply: tokens P .. end of turn
    lp = seq_logps(r, m)[P - 1 : len(ids(f"{r}.trained")) - 1]
    return sum(lp), len(lp)
lsig = lambda z: -math.log1p(math.exp(-z)) if z >= 0 else z - math.log1p(math.exp(z))
(pc, nc), (pr, nr) = reply("chosen", kind), reply("rejected", kind)
ac, ar = pc / nc, pr / nr
extra = {}
if kind == "ipo":
    beta = 0.5
    (rc, _), (rr, _) = reply("chosen", "base"), reply("rejected", "base")
    h = (ac - rc / nc) - (ar - rr / nr)
    loss = (h - 1 / (2 * beta)) ** 2
    rw = (beta * (ac - rc / nc), beta * (ar - rr / nr))
elif kind == "rpo":  # DPO + rpo_alpha x the chosen reply's mean NLL (TRL's RPO); DPO logs sums
    beta, alpha = 0.5, 0.5
    (rc, _), (rr, _) = reply("chosen", "base"), reply("rejected", "base")
    nll = -pc / nc
    loss = -lsig(beta * ((pc - rc) - (pr - rr))) + alpha * nll
    rw = (beta * (pc - rc), beta * (pr - rr))
    ac, ar = pc, pr
    extra = {"nll_loss": nll}
elif kind == "apo_zero":  # DPOTrainer's loss_type apo_zero on the summed log-ratios
    beta = 0.5
    (rc, _), (rr, _) = reply("chosen", "base"), reply("rejected", "base")
    sg = lambda z: 1 / (1 + math.exp(-z))
    loss = 1 - sg(beta * (pc - rc)) + sg(beta * (pr - rr))
    rw = (beta * (pc - rc), beta * (pr - rr))
    ac, ar = pc, pr
elif kind.startswith("orpo"):
    beta = 0.2
    lo = (ac - ar) - (math.log1p(-math.exp(ac)) - math.log1p(-math.exp(ar)))
    nll = -np.mean(seq_logps("chosen", kind))  # every token of the chosen sequence
    loss = nll - beta * lsig(lo)
    rw = (beta * ac, beta * ar)
    extra = {"nll_loss": nll, "log_odds_ratio": lsig(lo), "log_odds_chosen": lo}
else:
    beta, gamma, alpha = 2.0, 0.5, 0.5
    nll = -pc / nc  # the chosen reply's tokens
    loss = -lsig(beta * (ac - ar) - gamma) + alpha * nll
    rw = (beta * ac, beta * ar)
    extra = {"nll_loss": nll}
out = open(f"{t}/{kind}.eval").read()
m = re.search(r"eval_loss ([0-9.]+) \(" + {"rpo": "dpo", "orpo_dora": "orpo"}.get(kind, kind) + r", 1 pairs\)(.*)", out)
assert m, out
got = {"loss": float(m.group(1))}
for k, v in re.findall(r"([a-z_/]+) (-?[0-9.]+)", m.group(2)): got[k] = float(v)
want = {"loss": loss, "rewards/chosen": rw[0], "rewards/rejected": rw[1], "logps/chosen": ac, "logps/rejected": ar, **extra}
for k, v in want.items():
    tol = 1e-5 * max(1, abs(v)) if k == "loss" else 2e-4 * max(1, abs(v))
    assert abs(got[k] - v) < tol, (kind, k, got[k], v)
metrics = [json.loads(l) for l in open(f"{t}/{kind}/metrics.jsonl")]
steps = [l for l in metrics if "loss" in l]
evals = [l for l in metrics if "eval_loss" in l]
if kind == "ipo":
    assert steps[0]["loss"] == 1.0, steps[0]  # (0 - 1 / (2 x 0.5))^2 at the reference
    assert steps[-1]["loss"] < 0.7 * steps[0]["loss"], (steps[0], steps[-1])
assert steps[-1]["loss"] < steps[0]["loss"], (steps[0], steps[-1])  # ORPO / SimPO: their NLL of random text falls slowly
assert evals[-1]["eval_rewards/margins"] > 0, evals[-1]
for k in extra: assert k in steps[0] and "eval_" + k in evals[-1], (k, steps[0], evals[-1])
print(f"ok   {kind}: loss {steps[0]['loss']:.4f} -> {steps[-1]['loss']:.4f}; one pair = numpy "
      f"(loss {loss:.6f}, logps {ac:.4f} / {ar:.4f}{'; nll %.4f' % extra['nll_loss'] if 'nll_loss' in extra else ''})")
PY
done
# The same pair as whole conversations (TRL's implicit prompt; axolotl's chat_template.argilla_chat)
# evaluates to the same numbers as its prompt / reply form: the same tokens, the same labels.
printf '%s\n' '{"chosen": [{"role": "user", "content": "what is 1?"}, {"role": "assistant", "content": "it is 1"}], "rejected": [{"role": "user", "content": "what is 1?"}, {"role": "assistant", "content": "it is not 1"}]}' >"$T/implicit.jsonl"
sed 's/one.jsonl/implicit.jsonl/; s/type: chat_template$/type: chat_template.argilla_chat/' "$T/orpo.one.yaml" >"$T/implicit.yaml"
a=$(cd "$T" && "$BIN" evaluate orpo.one.yaml --no-base --adapter orpo 2>/dev/null | grep -o 'eval_loss.*' | sed -E 's/  \([0-9.]+ s\)$//')  # the seconds vary
b=$(cd "$T" && "$BIN" evaluate implicit.yaml --no-base --adapter orpo 2>/dev/null | grep -o 'eval_loss.*' | sed -E 's/  \([0-9.]+ s\)$//')  # the seconds vary
if [[ -n "$a" && "$a" == "$b" ]]; then echo "ok   implicit prompt: the same eval as the prompt / reply form"
else echo "FAIL implicit prompt: '$a' vs '$b'"; fail=1; fi
# Model cards: the trainer's tag (TRL's: dpo for every DPOTrainer loss type) and the loss by name.
if grep -qx -- "- orpo" "$T/orpo/README.md" && grep -q "by ORPO on preference pairs" "$T/orpo/README.md" &&
   grep -qx -- "- dpo" "$T/apo_zero/README.md" && grep -q "by DPO (apo_zero) on preference pairs" "$T/apo_zero/README.md"; then
  echo "ok   model cards"
else echo "FAIL model cards: $(head -12 "$T/apo_zero/README.md")"; fail=1; fi
# axolotl's dpo_norm_loss: DPO on mean log-probs, TRL's sigmoid_norm.
out=$(cd "$T" && "$BIN" train rpo.yaml --dpo_norm_loss=true --max_steps=1 --output_dir=norm 2>&1)
if grep -q "sigmoid_norm DPO (sigmoid_norm): beta 0.5" <<<"$out"; then echo "ok   dpo_norm_loss"
else echo "FAIL dpo_norm_loss: $(grep -iE 'norm|error' <<<"$out")"; fail=1; fi
grep -q "orpo       ORPO: NLL of the chosen sequence + beta 0.2 x odds-ratio loss" "$T/orpo.log" ||
  { echo "FAIL orpo banner (orpo_alpha as beta): $(grep -i orpo "$T/orpo.log")"; fail=1; }

expect_refusal smoothing "dpo_label_smoothing applies to rl: dpo \(sigmoid, robust, exo_pair\) and simpo, not orpo" -- train orpo.yaml --dpo_label_smoothing=0.1 --output_dir=o2
expect_refusal rpo-simpo "rpo_alpha applies to rl: dpo and ipo, not simpo \(SimPO's NLL weight is cpo_alpha\)" -- train simpo.yaml --rpo_alpha=1 --output_dir=o4
expect_refusal ipo-type "dpo_loss_type: ipo applies to rl: dpo, not rl: orpo" -- train orpo.yaml --dpo_loss_type=ipo --output_dir=o3
exit $fail
