#!/usr/bin/env bash
# A model directory whose tokenizer is a sentencepiece tokenizer.model (no tokenizer.json), end to
# end: `tokenize`, `train` on chat-less text rows (CPU, 2 steps), `merge`, and `tokenize` on the
# merged directory. Oracles: the ids transformers 5.17 gives for the text (the spm_model fixture's
# "llama2_config" variant: Llama-2's tokenizer_config.json keys), merge copying tokenizer.model, and
# the same ids from the merged directory.
set -u
BIN="$1"
T=$(mktemp -d /tmp/st_cli_spm_XXXXXX)
trap 'rm -rf "$T"' EXIT
FIX=tests/fixtures/tokenizers
fail=0
# tiny-llama's shape with room for the 1,200 pieces of the fixture model.
"$BIN" init-model --preset tiny-llama --out "$T/tiny" --seed 1 >/dev/null || { echo "FAIL init-model"; exit 1; }
python3 - "$T/tiny/config.json" "$T/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["vocab_size"] = 1200
json.dump(c, open(sys.argv[2], "w"))
PY
"$BIN" init-model --config "$T/config.json" --out "$T/model" --seed 1 >/dev/null || { echo "FAIL init-model --config"; exit 1; }
rm -f "$T/model/tokenizer.json"
cp "$FIX/spm_gguf/tiny_spm.model" "$T/model/tokenizer.model"
python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1]))["variants"]["llama2_config"]["config"]))' \
  "$FIX/spm_model/variants.json" >"$T/model/tokenizer_config.json"

# transformers' ids for the first fixture text with add_special_tokens.
want=$(python3 - "$FIX/spm_model/llama2_config.jsonl" "$T/text.txt" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).readline())
open(sys.argv[2], "w").write(r["text"])
print(" ".join(map(str, r["ids_special"])))
PY
)
got=$("$BIN" tokenize --model "$T/model" --text-file "$T/text.txt" 2>&1)
if [[ "$got" == "$want" ]]; then echo "ok   tokenize on a tokenizer.model directory: transformers' ids"
else echo "FAIL tokenize: got '$got' want '$want'"; fail=1; fi

python3 - "$T/data.jsonl" <<'PY'
import json, sys
words = "the quick brown fox jumps over the lazy dog while a model learns its tokens".split()
with open(sys.argv[1], "w") as f:
    for i in range(12):
        f.write(json.dumps({"text": " ".join(words[i % 5:] + words[:i % 5])}) + "\n")
PY
cat >"$T/train.yaml" <<'YAML'
base_model: model
datasets:
  - path: data.jsonl
    type: completion
device: cpu
dtype: float32
stream: "off"
sequence_len: 32
micro_batch_size: 2
max_steps: 2
learning_rate: 1.0e-3
lora_r: 4
output_dir: out
YAML
out=$(cd "$T" && "$BIN" train train.yaml 2>&1); rc=$?
if [[ $rc -ne 0 ]]; then echo "FAIL train: rc $rc: $out"; exit 1; fi
[[ -f "$T/out/adapter_model.safetensors" ]] && echo "ok   train from a tokenizer.model directory" ||
  { echo "FAIL no adapter"; fail=1; }

out=$("$BIN" merge --model "$T/model" --adapter "$T/out" --out "$T/merged" 2>&1); rc=$?
if [[ $rc -ne 0 ]]; then echo "FAIL merge: rc $rc: $out"; exit 1; fi
if cmp -s "$T/model/tokenizer.model" "$T/merged/tokenizer.model" && [[ ! -e "$T/merged/tokenizer.json" ]]; then
  echo "ok   merge copies tokenizer.model"
else echo "FAIL merged dir: $(ls "$T/merged")"; fail=1; fi
got=$("$BIN" tokenize --model "$T/merged" --text-file "$T/text.txt" 2>&1)
[[ "$got" == "$want" ]] && echo "ok   the merged directory tokenizes alike" || { echo "FAIL merged tokenize: $got"; fail=1; }

# Neither file: the message names the directory and both names.
rm "$T/merged/tokenizer.model"
out=$("$BIN" tokenize --model "$T/merged" --text x 2>&1); rc=$?
if [[ $rc -ne 0 ]] && grep -q "neither tokenizer.json nor tokenizer.model" <<<"$out"; then
  echo "ok   a directory with neither file is refused by name"
else echo "FAIL no-tokenizer message: rc $rc: $out"; fail=1; fi
exit $fail
