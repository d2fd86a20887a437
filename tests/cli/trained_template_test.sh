#!/usr/bin/env bash
# The chat template travels with the adapter (train/train_data.h save_train_tokenizer): `train`
# with chat_template: chatml on a base whose tokenizer has none saves the tokenizer beside the
# adapter, the template in tokenizer_config.json and chat_template.jinja (the same text);
# `generate --adapter --chat` renders with it (and --chat-template overrides); `merge` gives the
# merged model the adapter's tokenizer files. A base whose template is a chat_template.jinja
# sidecar (transformers >= 4.47's layout) trains with it and passes it on as it is.
set -u
BIN="$1"
T=$(mktemp -d /tmp/st_cli_tmpl_XXXXXX)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/chat_fixture.sh"
make_chat_fixture "$BIN" "$T" 4 || { echo "FAIL fixture"; exit 1; }
cat >"$T/t.yaml" <<'YAML'
base_model: model
datasets:
  - path: sg.jsonl
    type: sharegpt
chat_template: chatml
device: cpu
dtype: float32
stream: "off"
sequence_len: 64
micro_batch_size: 2
max_steps: 2
save_steps: 1
lora_r: 4
output_dir: out
YAML
fail=0
out=$(cd "$T" && "$BIN" train t.yaml 2>&1); rc=$?
[[ $rc -eq 0 ]] || { echo "FAIL train rc $rc: $out"; exit 1; }
if grep -q "^tokenizer  saved to .*/out (.* chat_template chatml)" <<<"$out"; then echo "ok   train: tokenizer saved with chat_template chatml"
else echo "FAIL no tokenizer line: $(grep -i tokenizer <<<"$out")"; fail=1; fi
python3 - "$T/out" <<'PY' || fail=1
import json, os, sys
d = sys.argv[1]
cfg = json.load(open(os.path.join(d, "tokenizer_config.json"), encoding="utf-8"))
side = open(os.path.join(d, "chat_template.jinja"), encoding="utf-8").read()
assert cfg["chat_template"] == side, "tokenizer_config.json and chat_template.jinja differ"
assert "<|im_start|>" in side and "add_generation_prompt" in side, side
assert open(os.path.join(d, "tokenizer.json"), "rb").read() == open(os.path.join(d, "..", "model", "tokenizer.json"), "rb").read()
print("ok   out/: tokenizer.json as the base's, the chatml template in both files")
PY
gen() { "$BIN" generate --model "$T/model" --chat --prompt hi --max-new-tokens 2 --device cpu "$@"; }
err=$(gen --adapter "$T/out" 2>&1 >/dev/null); rc=$?
if [[ $rc -eq 0 ]] && grep -q "chat template: $T/out/chat_template.jinja (saved with the adapter)" <<<"$err"; then
  echo "ok   generate --adapter --chat: the adapter's template"
else echo "FAIL generate with the adapter: rc $rc: $err"; fail=1; fi
err=$(gen 2>&1 >/dev/null); rc=$?
if [[ $rc -ne 0 ]] && grep -q "has no chat_template" <<<"$err"; then echo "ok   generate --chat without it: the base has no template (refused)"
else echo "FAIL generate without the adapter: rc $rc: $err"; fail=1; fi
gen --chat-template chatml >/dev/null 2>&1 || { echo "FAIL --chat-template chatml"; fail=1; }
err=$(gen --chat-template nosuch 2>&1 >/dev/null); rc=$?
[[ $rc -ne 0 ]] && grep -q "nosuch" <<<"$err" || { echo "FAIL --chat-template nosuch: rc $rc: $err"; fail=1; }
err=$("$BIN" generate --model "$T/model" --prompt hi --chat-template chatml --device cpu 2>&1); rc=$?
[[ $rc -eq 2 ]] || { echo "FAIL --chat-template without --chat: rc $rc: $err"; fail=1; }
out=$("$BIN" merge --model "$T/model" --adapter "$T/out" --out "$T/merged" 2>&1); rc=$?
if [[ $rc -eq 0 ]] && cmp -s "$T/out/chat_template.jinja" "$T/merged/chat_template.jinja" &&
   cmp -s "$T/out/tokenizer_config.json" "$T/merged/tokenizer_config.json"; then
  echo "ok   merge: the adapter's tokenizer files"
else echo "FAIL merge: rc $rc: $out; $(ls "$T/merged" 2>&1)"; fail=1; fi
# A checkpoint's adapter: the tokenizer saved in its output_dir.
err=$(gen --adapter "$T/out/checkpoint-1" 2>&1 >/dev/null); rc=$?
if [[ $rc -eq 0 ]] && grep -q "chat template: $T/out/chat_template.jinja (saved with the adapter)" <<<"$err"; then
  echo "ok   generate --adapter out/checkpoint-1: output_dir's template"
else echo "FAIL generate with a checkpoint adapter: rc $rc: $err"; fail=1; fi
out=$("$BIN" merge --model "$T/model" --adapter "$T/out/checkpoint-1/" --out "$T/merged1" 2>&1); rc=$?
if [[ $rc -eq 0 ]] && cmp -s "$T/out/chat_template.jinja" "$T/merged1/chat_template.jinja"; then
  echo "ok   merge of a checkpoint: output_dir's tokenizer files"
else echo "FAIL merge of a checkpoint: rc $rc: $out"; fail=1; fi
# A base with a chat_template.jinja sidecar: the run renders with it and passes it on unchanged.
cp -r "$T/model" "$T/model2"
printf '%s' "{% for m in messages %}{{ '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' }}{% endfor %}" >"$T/model2/chat_template.jinja"
sed -e 's/^base_model: model/base_model: model2/' -e '/^chat_template:/d' -e 's/output_dir: out/output_dir: out2/' "$T/t.yaml" >"$T/t2.yaml"
prev=$(cd "$T" && "$BIN" train t2.yaml --preview-data=1 2>&1); rc=$?
if [[ $rc -eq 0 ]] && grep -q "<|im_start|>user" <<<"$prev"; then echo "ok   a chat_template.jinja sidecar is the base's template"
else echo "FAIL sidecar preview rc $rc: $prev"; fail=1; fi
out=$(cd "$T" && "$BIN" train t2.yaml 2>&1); rc=$?
if [[ $rc -eq 0 ]] && cmp -s "$T/model2/chat_template.jinja" "$T/out2/chat_template.jinja" &&
   grep -q "^tokenizer  saved to .*/out2 (.* the base's chat template)" <<<"$out"; then
  echo "ok   train on the sidecar base: chat_template.jinja passed on as it is"
else echo "FAIL sidecar train rc $rc: $(grep -i tokenizer <<<"$out"); $(ls "$T/out2" 2>&1)"; fail=1; fi
exit $fail
