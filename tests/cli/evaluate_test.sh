#!/usr/bin/env bash
# `streamtune evaluate CONFIG` (axolotl's evaluate): the base's and the adapter's eval loss on the
# config's eval split. Oracles: the adapter's loss is the last eval_loss `train` logged for the same
# adapter and data (to the 6 digits printed); the random base model's is near ln(vocab 512); with
# no eval data the training datasets are used (said so); --no-base without an adapter and an
# adapter directory without adapter_config.json fail with exit 1, naming what is missing.
set -u
BIN="$1"
T=$(mktemp -d /tmp/st_cli_eval_XXXXXX)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/chat_fixture.sh"
make_chat_fixture "$BIN" "$T" 40 || { echo "FAIL fixture"; exit 1; }
cat >"$T/t.yaml" <<'YAML'
base_model: model
datasets:
  - path: sg.jsonl
    type: sharegpt
val_set_size: 0.2
chat_template: chatml
device: cpu
dtype: float32
stream: "off"
sequence_len: 64
micro_batch_size: 4
max_steps: 12
learning_rate: 3.0e-3
lora_r: 8
output_dir: out
YAML
# ST_TEST_DEVICE=cuda runs the same checks on a GPU; ST_TEST_STREAM=ram streams the layers there.
sed -i -e "s/^device: cpu/device: ${ST_TEST_DEVICE:-cpu}/" -e "s/^stream: \"off\"/stream: \"${ST_TEST_STREAM:-off}\"/" "$T/t.yaml"
fail=0
(cd "$T" && "$BIN" train t.yaml >train.log 2>&1) || { echo "FAIL train: $(tail -5 "$T/train.log")"; exit 1; }
out=$(cd "$T" && "$BIN" evaluate t.yaml 2>/dev/null); rc=$?
[[ $rc -eq 0 ]] || { echo "FAIL evaluate rc $rc: $out"; exit 1; }
python3 - "$T/out/metrics.jsonl" "$out" <<'PY' || fail=1
import json, math, re, sys
logged = [json.loads(l)["eval_loss"] for l in open(sys.argv[1]) if "eval_loss" in l][-1]
rows = dict(re.findall(r"^  (base|adapter) .*?eval_loss ([0-9.]+)", sys.argv[2], re.M))
assert "on the eval data (8 samples" in sys.argv[2], sys.argv[2]
assert abs(float(rows["adapter"]) - logged) < 5e-7, (rows, logged)
assert abs(float(rows["base"]) - math.log(512)) < 0.5, rows
assert float(rows["base"]) != float(rows["adapter"]), rows
print(f"ok   evaluate: adapter {rows['adapter']} = train's last eval_loss {logged:.6f}; base {rows['base']}")
PY
out=$(cd "$T" && "$BIN" evaluate t.yaml --val_set_size=0 --no-base 2>/dev/null); rc=$?
if [[ $rc -eq 0 ]] && grep -q "on the training datasets (the config has no eval data) (40 samples" <<<"$out" &&
   ! grep -q "^  base" <<<"$out" && grep -q "^  adapter" <<<"$out"; then echo "ok   no eval data: the training datasets, adapter only"
else echo "FAIL --val_set_size=0 --no-base: rc $rc: $out"; fail=1; fi
err=$(cd "$T" && "$BIN" evaluate t.yaml --no-base --output_dir=elsewhere 2>&1 >/dev/null); rc=$?
[[ $rc -eq 1 ]] && grep -q "nothing to evaluate" <<<"$err" || { echo "FAIL --no-base without an adapter: rc $rc: $err"; fail=1; }
err=$(cd "$T" && "$BIN" evaluate t.yaml --adapter "$T/model" 2>&1 >/dev/null); rc=$?
[[ $rc -eq 1 ]] && grep -q "$T/model: no adapter_config.json" <<<"$err" || { echo "FAIL a non-adapter dir: rc $rc: $err"; fail=1; }
[[ $fail -eq 0 ]] && echo "ok   evaluate refusals"
exit $fail
