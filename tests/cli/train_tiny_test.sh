#!/usr/bin/env bash
# End to end: init-model tiny-llama, `streamtune train` 3 steps on pre-tokenized rows (CPU,
# resident). Oracles: exit 0, a PEFT adapter in output_dir, metrics.jsonl with one line per step,
# and a first loss near ln(512) (a random-init model predicts close to uniform over the vocab).
set -u
BIN="$1"
T=$(mktemp -d /tmp/st_cli_train_XXXXXX)
trap 'rm -rf "$T"' EXIT
"$BIN" init-model --preset tiny-llama --out "$T/model" --seed 1 >/dev/null || { echo "FAIL init-model"; exit 1; }
python3 - "$T/data.jsonl" <<'PY'
import json, random, sys
r = random.Random(0)
with open(sys.argv[1], "w") as f:
    for _ in range(16):
        f.write(json.dumps({"input_ids": [r.randrange(512) for _ in range(24)]}) + "\n")
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
max_steps: 3
learning_rate: 1.0e-3
lora_r: 4
output_dir: out
YAML
out=$(cd / && "$BIN" train "$T/train.yaml" 2>&1); rc=$?
if [[ $rc -ne 0 ]]; then echo "FAIL train: rc $rc: $out"; exit 1; fi
fail=0
for f in adapter_model.safetensors adapter_config.json metrics.jsonl; do
  [[ -f "$T/out/$f" ]] || { echo "FAIL missing out/$f; ls: $(ls "$T/out")"; fail=1; }
done
python3 - "$T/out/metrics.jsonl" <<'PY' || fail=1
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert [r["step"] for r in rows] == [1, 2, 3], rows
l0 = rows[0]["loss"]
assert abs(l0 - math.log(512)) < 0.3, f"first loss {l0} vs ln(512) {math.log(512):.3f}"
print(f"ok   train: 3 steps, first loss {l0:.4f} (ln 512 = {math.log(512):.4f})")
PY
# A sample longer than config.json's max_position_embeddings (tiny-llama: 256) trains, with a note
# naming both lengths; samples within it give no note (the run above).
grep -q "max_position_embeddings" <<<"$out" && { echo "FAIL note without a long sample"; fail=1; }
python3 -c 'import json, random; r = random.Random(1); print(json.dumps({"input_ids": [r.randrange(512) for _ in range(300)]}))' >"$T/long.jsonl"
sed -e 's/data.jsonl/long.jsonl/' -e 's/sequence_len: 32/sequence_len: 320/' -e 's/max_steps: 3/max_steps: 1/' \
  -e 's/output_dir: out/output_dir: out_long/' "$T/train.yaml" >"$T/long.yaml"
out=$(cd / && "$BIN" train "$T/long.yaml" 2>&1); rc=$?
if [[ $rc -ne 0 ]]; then echo "FAIL long-sample train: rc $rc: $out"; fail=1
elif grep -q "longest sample has 300 tokens, past config.json's max_position_embeddings 256" <<<"$out"; then
  echo "ok   a 300-token sample past max_position_embeddings 256: trained, with the note"
else echo "FAIL no max_position_embeddings note: $out"; fail=1; fi
exit $fail
