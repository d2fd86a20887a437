#!/usr/bin/env bash
# `streamtune train CONFIG --preview-data=N`: tokenizes the datasets without loading weights and
# prints counts and the first N samples with the trained tokens between ⟦ and ⟧. Oracles: the
# Stanford Alpaca prompt text with only the output marked, a ShareGPT record through chatml with
# only the assistant turn (and its <|im_end|>) marked, the drop count when sequence_len cuts the
# answer off, no output_dir or layer cache written, and exit 2 for a bad N.
set -u
BIN="$1"
T=$(mktemp -d /tmp/st_cli_preview_XXXXXX)
trap 'rm -rf "$T"' EXIT
"$BIN" init-model --preset tiny-llama --out "$T/model" --seed 1 >/dev/null || { echo "FAIL init-model"; exit 1; }
cp "$(dirname "$0")/../fixtures/gguf/tiny_tokenizer.json" "$T/model/tokenizer.json"
cat >"$T/alpaca.json" <<'JSON'
[{"instruction": "say hi", "input": "", "output": "hi there"},
 {"instruction": "add", "input": "1 1", "output": "2"}]
JSON
printf '%s\n' '{"conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]}' >"$T/sg.jsonl"
cat >"$T/t.yaml" <<'YAML'
base_model: model
datasets:
  - path: alpaca.json
    type: alpaca
  - path: sg.jsonl
    type: sharegpt
chat_template: chatml
device: cpu
sequence_len: 512
output_dir: out
YAML
fail=0
out=$("$BIN" train "$T/t.yaml" --preview-data=1 2>&1); rc=$?
[[ $rc -eq 0 ]] || { echo "FAIL preview rc $rc: $out"; exit 1; }
expect() { grep -qF -- "$1" <<<"$out" || { echo "FAIL missing: $1"; echo "$out"; fail=1; }; }
expect "alpaca.json (alpaca): 2 samples"
expect "### Instruction:
say hi

### Response:
⟦hi there⟧"
expect "sg.jsonl (sharegpt): 1 samples"
expect "<|im_start|>user
q<|im_end|>
<|im_start|>assistant
⟦a<|im_end|>⟧"
if grep -q "add" <<<"$out"; then echo "FAIL printed more than N=1 samples of alpaca.json"; fail=1; fi
[[ ! -e "$T/out" ]] || { echo "FAIL preview wrote output_dir"; fail=1; }
[[ -z "$(ls "$T/model" | grep -v -e config.json -e model.safetensors -e tokenizer.json -e generation_config.json)" ]] ||
  { echo "FAIL preview wrote into the model dir: $(ls "$T/model")"; fail=1; }
out=$("$BIN" train "$T/t.yaml" --preview-data --sequence_len=40 2>&1); rc=$?
[[ $rc -eq 0 ]] || { echo "FAIL preview (short) rc $rc: $out"; fail=1; }
expect "alpaca.json (alpaca): 0 samples (0 tokens, 0 trained), 2 truncated to 40, 2 dropped"
"$BIN" train "$T/t.yaml" --preview-data=0 >/dev/null 2>&1; rc=$?
[[ $rc -eq 2 ]] || { echo "FAIL --preview-data=0 exit $rc (want 2)"; fail=1; }
[[ $fail -eq 0 ]] && echo "ok"
exit $fail
