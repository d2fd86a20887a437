#!/usr/bin/env bash
# `streamtune train CONFIG --preview-data=N`: tokenizes the datasets without loading weights and
# prints counts and the first N samples with the trained tokens between ⟦ and ⟧. Oracles: the
# Stanford Alpaca prompt text with only the output marked, a ShareGPT record through chatml with
# only the assistant turn (and its <|im_end|>) marked, the drop count when sequence_len cuts the
# answer off, no output_dir or layer cache written, and exit 2 for a bad N. Axolotl's dataset keys
# (config_datasets.cc Note [axolotl dataset keys]): type chat_template with field_messages and
# message_property_mappings renders as the same conversation does; type completion with field,
# and overlap_len: a text past sequence_len split into windows (data/datasets.h Note [long texts]).
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
printf '%s\n' '{"dialog": [{"speaker": "user", "said": "q"}, {"speaker": "assistant", "said": "a"}]}' >"$T/ax.jsonl"
printf '%s\n' '{"body": "plain words"}' >"$T/comp.jsonl"
cat >"$T/t.yaml" <<'YAML'
base_model: model
datasets:
  - path: alpaca.json
    type: alpaca
  - path: sg.jsonl
    type: sharegpt
  - path: ax.jsonl
    type: chat_template
    field_messages: dialog
    message_property_mappings:
      role: speaker
      content: said
    roles_to_train: [assistant]
    train_on_eos: turn
    split: train
    ds_type: json
  - path: comp.jsonl
    type: completion
    field: body
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
expect "ax.jsonl (messages): 1 samples"
[[ $(grep -cF "⟦a<|im_end|>⟧" <<<"$out") -eq 2 ]] || { echo "FAIL the chat_template entry did not render as the sharegpt one"; echo "$out"; fail=1; }
expect "comp.jsonl (text): 1 samples"
expect "p⟦lain words⟧"
if grep -q "add" <<<"$out"; then echo "FAIL printed more than N=1 samples of alpaca.json"; fail=1; fi
[[ ! -e "$T/out" ]] || { echo "FAIL preview wrote output_dir"; fail=1; }
[[ -z "$(ls "$T/model" | grep -v -e config.json -e model.safetensors -e tokenizer.json -e generation_config.json)" ]] ||
  { echo "FAIL preview wrote into the model dir: $(ls "$T/model")"; fail=1; }
out=$("$BIN" train "$T/t.yaml" --preview-data --sequence_len=40 2>&1); rc=$?
[[ $rc -eq 0 ]] || { echo "FAIL preview (short) rc $rc: $out"; fail=1; }
expect "alpaca.json (alpaca): 0 samples (0 tokens, 0 trained), 2 truncated to 40, 2 dropped"
"$BIN" train "$T/t.yaml" --preview-data=0 >/dev/null 2>&1; rc=$?
[[ $rc -eq 2 ]] || { echo "FAIL --preview-data=0 exit $rc (want 2)"; fail=1; }
# axolotl's chat_template names for the tokenizer's own template: this tokenizer has none, so
# tokenizer_default is refused and tokenizer_default_fallback_chatml renders chatml.
sed 's/^chat_template: chatml/chat_template: tokenizer_default_fallback_chatml/' "$T/t.yaml" >"$T/fb.yaml"
out=$("$BIN" train "$T/fb.yaml" --preview-data=1 2>&1); rc=$?
[[ $rc -eq 0 ]] && grep -qF "<|im_start|>user" <<<"$out" || { echo "FAIL fallback chatml: rc $rc: $out"; fail=1; }
sed 's/^chat_template: chatml/chat_template: tokenizer_default/' "$T/t.yaml" >"$T/td.yaml"
out=$("$BIN" train "$T/td.yaml" --preview-data=1 2>&1); rc=$?
[[ $rc -ne 0 ]] && grep -qF "the tokenizer has no chat_template" <<<"$out" || { echo "FAIL tokenizer_default: rc $rc: $out"; fail=1; }
# A dataset entry's own template (axolotl's chat_template / legacy conversation keys): no config-level
# template and a tokenizer without one, yet the entry renders chatml; FastChat names we do not render
# are refused by name.
printf 'base_model: model\ndatasets:\n  - path: sg.jsonl\n    type: sharegpt\n    conversation: chatml\ndevice: cpu\nsequence_len: 64\noutput_dir: out\n' >"$T/conv.yaml"
out=$("$BIN" train "$T/conv.yaml" --preview-data=1 2>&1); rc=$?
[[ $rc -eq 0 ]] && grep -qF "<|im_start|>assistant" <<<"$out" || { echo "FAIL conversation: chatml: rc $rc: $out"; fail=1; }
sed 's/conversation: chatml/chat_template: tokenizer_default/' "$T/conv.yaml" >"$T/conv2.yaml"
out=$("$BIN" train "$T/conv2.yaml" --preview-data=1 2>&1); rc=$?
[[ $rc -ne 0 ]] && grep -qF "the tokenizer has no chat_template" <<<"$out" || { echo "FAIL entry tokenizer_default: rc $rc: $out"; fail=1; }
sed 's/conversation: chatml/conversation: vicuna_v1.1/' "$T/conv.yaml" >"$T/conv3.yaml"
out=$("$BIN" train "$T/conv3.yaml" --preview-data=1 2>&1); rc=$?
[[ $rc -eq 2 ]] && grep -qF "datasets.conversation: 'vicuna_v1.1': the conversation formats rendered here" <<<"$out" ||
  { echo "FAIL conversation vicuna: rc $rc: $out"; fail=1; }
# axolotl's chat_template names and chat_template_jinja: qwen_25 adds Qwen2.5's default system turn;
# chat_template: jinja renders chat_template_jinja's text (inline, or a file beside the config), an
# entry's own too; jinja without the text is refused.
sed 's/conversation: chatml/chat_template: qwen_25/' "$T/conv.yaml" >"$T/q25.yaml"
out=$("$BIN" train "$T/q25.yaml" --preview-data=1 --sequence_len=512 2>&1); rc=$?
[[ $rc -eq 0 ]] && grep -qF "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>" <<<"$out" ||
  { echo "FAIL qwen_25: rc $rc: $out"; fail=1; }
printf '{%% for m in messages %%}{{ m.role | upper }}: {{ m.content }}{%% if m.role == "assistant" %%}<|im_end|>{%% endif %%}\n{%% endfor %%}{%% if add_generation_prompt %%}ASSISTANT: {%% endif %%}' >"$T/mine.tmpl"
printf 'base_model: model\ndatasets:\n  - path: sg.jsonl\n    type: sharegpt\nchat_template: jinja\nchat_template_jinja: mine.tmpl\ndevice: cpu\nsequence_len: 64\noutput_dir: out\n' >"$T/jf.yaml"
out=$("$BIN" train "$T/jf.yaml" --preview-data=1 2>&1); rc=$?
[[ $rc -eq 0 ]] && grep -qF "USER: qASSISTANT: ⟦a<|im_end|>⟧" <<<"$out" || { echo "FAIL chat_template_jinja file: rc $rc: $out"; fail=1; }
printf 'base_model: model\ndatasets:\n  - path: sg.jsonl\n    type: sharegpt\n    chat_template: jinja\n    chat_template_jinja: "{%% for m in messages %%}<{{ m.role }}>{{ m.content }}{%% endfor %%}{%% if add_generation_prompt %%}<assistant>{%% endif %%}"\ndevice: cpu\nsequence_len: 64\noutput_dir: out\n' >"$T/ji.yaml"
out=$("$BIN" train "$T/ji.yaml" --preview-data=1 2>&1); rc=$?
[[ $rc -eq 0 ]] && grep -qF "<user>q<assistant>⟦a⟧" <<<"$out" || { echo "FAIL entry chat_template_jinja: rc $rc: $out"; fail=1; }
sed '/chat_template_jinja/d' "$T/jf.yaml" >"$T/jn.yaml"
out=$("$BIN" train "$T/jn.yaml" --preview-data=1 2>&1); rc=$?
[[ $rc -ne 0 ]] && grep -qF "chat_template: jinja needs chat_template_jinja" <<<"$out" || { echo "FAIL jinja without text: rc $rc: $out"; fail=1; }
# axolotl's named alpaca-family types (data/prompt_format.h Note [axolotl prompt strategies]):
# alpaca_chat.load_qa reads question/answer; alpaca_chat takes conversation as its prompt style.
printf '%s\n' '{"question": "Q?", "answer": "A.", "instruction": "Add", "output": "3"}' >"$T/qa.jsonl"
printf 'base_model: model\ndatasets:\n  - path: qa.jsonl\n    type: alpaca_chat.load_qa\n  - path: qa.jsonl\n    conversation: chatml\n    type: alpaca_chat\ndevice: cpu\nsequence_len: 256\noutput_dir: out\n' >"$T/qa.yaml"
out=$("$BIN" train "$T/qa.yaml" --preview-data=1 2>&1); rc=$?
[[ $rc -eq 0 ]] && grep -qF "qa.jsonl (alpaca_chat.load_qa): 1 samples" <<<"$out" && grep -qF "USER: Q?
ASSISTANT:⟦A." <<<"$out" && grep -qF "qa.jsonl (alpaca_chat): 1 samples" <<<"$out" &&
  grep -qF "<|im_start|>user
Add<|im_end|>
<|im_start|>assistant
⟦3" <<<"$out" || { echo "FAIL alpaca_chat strategies: rc $rc: $out"; fail=1; }
out=$("$BIN" train "$T/qa.yaml" --dry-run 2>&1)
grep -qF "type: alpaca_chat.load_qa" <<<"$out" && grep -qF "conversation: chatml" <<<"$out" || { echo "FAIL strategies dry-run: $out"; fail=1; }
# axolotl's user-defined prompt format (data/prompt_format.h): the record's own fields through the
# formats, the output trained; a placeholder a format may not hold is refused when the config is read.
printf '%s\n' '{"question": "Add 1 and 2", "context": "numbers", "answer": "3", "sys": "Be brief."}' \
  '{"question": "Say hi", "answer": "hi"}' >"$T/ud.jsonl"
cat >"$T/ud.yaml" <<'YAML'
base_model: model
datasets:
  - path: ud.jsonl
    type:
      field_instruction: question
      field_input: context
      field_output: answer
      field_system: sys
      system_format: "<|im_start|>system\n{system}<|im_end|>\n"
      format: "Q: {instruction} ({input})\nA: "
      no_input_format: "Q: {instruction}\nA: "
device: cpu
sequence_len: 128
output_dir: out
YAML
out=$("$BIN" train "$T/ud.yaml" --preview-data=2 2>&1); rc=$?
[[ $rc -eq 0 ]] && grep -qF "ud.jsonl (user_defined): 2 samples" <<<"$out" ||  { echo "FAIL user-defined: rc $rc: $out"; fail=1; }
plain=$(sed 's/⟦//g; s/⟧//g' <<<"$out")
grep -qF "<|im_start|>system
Be brief.<|im_end|>
Q: Add 1 and 2 (numbers)
A: 3" <<<"$plain" && grep -qF "Q: Say hi
A: hi" <<<"$plain" || { echo "FAIL user-defined prompts: $out"; fail=1; }
grep -qF "A: ⟦" <<<"$out" || { echo "FAIL user-defined: the answer is not what is trained: $out"; fail=1; }
out=$("$BIN" train "$T/ud.yaml" --dry-run 2>&1)
grep -qF "field_instruction: question" <<<"$out" || { echo "FAIL user-defined dry-run: $out"; fail=1; }
sed 's/no_input_format: "Q: {instruction}/no_input_format: "Q: {input}/' "$T/ud.yaml" >"$T/ud2.yaml"
out=$("$BIN" train "$T/ud2.yaml" --preview-data=1 2>&1); rc=$?
[[ $rc -eq 2 ]] && grep -qF "datasets.type.no_input_format: '{input}' is not a placeholder it may hold ({instruction})" <<<"$out" ||
  { echo "FAIL user-defined bad format: rc $rc: $out"; fail=1; }
# special_tokens (axolotl): eos_token set to a token the tokenizer has ends each text sample with
# it; a token it lacks, or another bos_token, is refused by name.
printf 'base_model: model\ndatasets:\n  - path: comp.jsonl\n    type: completion\n    field: body\nspecial_tokens:\n  eos_token: "<|im_end|>"\n  pad_token: "<|im_start|>"\ndevice: cpu\nsequence_len: 64\noutput_dir: out\n' >"$T/sp.yaml"
out=$("$BIN" train "$T/sp.yaml" --preview-data=1 2>&1); rc=$?
[[ $rc -eq 0 ]] && grep -qF "p⟦lain words<|im_end|>⟧" <<<"$out" || { echo "FAIL special_tokens eos: rc $rc: $out"; fail=1; }
sed 's/eos_token: "<|im_end|>"/eos_token: "<|nope|>"/' "$T/sp.yaml" >"$T/sp2.yaml"
out=$("$BIN" train "$T/sp2.yaml" --preview-data=1 2>&1); rc=$?
[[ $rc -ne 0 ]] && grep -qF "special_tokens.eos_token: '<|nope|>' is not a token of this tokenizer" <<<"$out" ||
  { echo "FAIL special_tokens unknown token: rc $rc: $out"; fail=1; }
sed 's/eos_token: "<|im_end|>"/bos_token: "<|im_end|>"/' "$T/sp.yaml" >"$T/sp3.yaml"
out=$("$BIN" train "$T/sp3.yaml" --preview-data=1 2>&1); rc=$?
[[ $rc -ne 0 ]] && grep -qF "changing the tokenizer's bos_token" <<<"$out" || { echo "FAIL special_tokens bos: rc $rc: $out"; fail=1; }
# A long completion text becomes windows: 300 words in 40-token windows, 4 tokens of overlap.
python3 -c "import json; print(json.dumps({'body': ' '.join('word%d' % i for i in range(300))}))" >"$T/long.jsonl"
printf 'base_model: model\ndatasets:\n  - path: long.jsonl\n    type: completion\n    field: body\n    overlap_len: 4\ndevice: cpu\nsequence_len: 40\noutput_dir: out\n' >"$T/long.yaml"
out=$("$BIN" train "$T/long.yaml" --preview-data=2 2>&1); rc=$?
[[ $rc -eq 0 ]] || { echo "FAIL long text rc $rc: $out"; fail=1; }
n=$(sed -n 's/.*long.jsonl (text): \([0-9]*\) samples.*/\1/p' <<<"$out")
[[ -n "$n" && "$n" -gt 10 ]] || { echo "FAIL long text gave '$n' samples: $out"; fail=1; }
expect "1 text(s) longer than 40 tokens split into $n windows (overlap 4)"
expect "--- sample 2: 40 tokens, 36 trained"
sed 's/overlap_len: 4/overlap_len: 40/' "$T/long.yaml" >"$T/long40.yaml"
out=$("$BIN" train "$T/long40.yaml" --preview-data=1 2>&1); rc=$?
[[ $rc -ne 0 ]] && grep -qF "overlap_len 40 must be >= 0 and below sequence_len 40" <<<"$out" || { echo "FAIL overlap 40: rc $rc: $out"; fail=1; }
printf 'base_model: model\ndatasets:\n  - path: sg.jsonl\n    type: sharegpt\n    overlap_len: 4\noutput_dir: out\n' >"$T/ov.yaml"
out=$("$BIN" train "$T/ov.yaml" --preview-data=1 2>&1); rc=$?
[[ $rc -ne 0 ]] && grep -qF "'overlap_len' applies to type text/completion, not to type sharegpt" <<<"$out" || { echo "FAIL overlap on sharegpt: rc $rc: $out"; fail=1; }
# A Hub dataset id is not downloaded: the message says how to fetch it (an empty cache, whatever this machine holds).
export HF_HUB_CACHE="$T/empty_hub"
sed 's|^  - path: alpaca.json|  - path: tatsu-lab/alpaca|' "$T/t.yaml" >"$T/hub.yaml"
out=$("$BIN" train "$T/hub.yaml" --preview-data=1 2>&1); rc=$?
[[ $rc -ne 0 ]] && grep -qF "huggingface-cli download --repo-type dataset tatsu-lab/alpaca" <<<"$out" ||
  { echo "FAIL hub id: rc $rc: $out"; fail=1; }
printf 'base_model: model\ndatasets:\n  - path: sg.jsonl\n    type: sharegpt\n    split: test\noutput_dir: out\n' >"$T/split.yaml"
out=$("$BIN" train "$T/split.yaml" --preview-data=1 2>&1)
grep -qF "datasets.split: 'test': a local dataset file has no splits" <<<"$out" || { echo "FAIL split: $out"; fail=1; }
[[ $fail -eq 0 ]] && echo "ok"
exit $fail
