#!/usr/bin/env bash
# CSV and TSV dataset files (io/csv.h Note [CSV as datasets reads it]) through `train
# --preview-data`: an alpaca CSV as a spreadsheet exports it (quoted commas, a multi-line answer,
# empty inputs) gives the same prompts as the same records in JSON Lines; a TSV of
# prompt/completion; a .csv.gz; a directory of CSV shards in name order; axolotl's ds_type: csv.
# Refused with the file and line named: a row with too many fields, a quote never closed, and
# ds_type: csv on a file not named .csv / .tsv.
set -u
BIN="$1"
T=$(mktemp -d /tmp/st_cli_csv_XXXXXX)
trap 'rm -rf "$T"' EXIT
"$BIN" init-model --preset tiny-llama --out "$T/model" --seed 1 >/dev/null || { echo "FAIL init-model"; exit 1; }
cp "$(dirname "$0")/../fixtures/gguf/tiny_tokenizer.json" "$T/model/tokenizer.json"
fail=0
printf 'instruction,input,output\r\n"Add, please","1, 2",3\r\nSay hi,,"He said ""hi""\r\ntwice"\r\n' >"$T/alpaca.csv"
cat >"$T/alpaca.jsonl" <<'JSON'
{"instruction": "Add, please", "input": "1, 2", "output": "3"}
{"instruction": "Say hi", "input": "", "output": "He said \"hi\"\r\ntwice"}
JSON
yaml() {  # yaml FILE PATH TYPE [extra dataset lines]
  printf 'base_model: model\ndatasets:\n  - path: %s\n    type: %s\n%bdevice: cpu\nsequence_len: 256\noutput_dir: out\n' \
    "$2" "$3" "${4:-}" >"$T/$1"
}
yaml csv.yaml alpaca.csv alpaca "    ds_type: csv\n"
yaml jsonl.yaml alpaca.jsonl alpaca
a=$("$BIN" train "$T/csv.yaml" --preview-data=2 2>&1); rc=$?
[[ $rc -eq 0 ]] || { echo "FAIL csv rc $rc: $a"; exit 1; }
b=$("$BIN" train "$T/jsonl.yaml" --preview-data=2 2>&1)
grep -qF "alpaca.csv (alpaca): 2 samples" <<<"$a" || { echo "FAIL csv count: $a"; fail=1; }
# The samples themselves (after each file's header line) are the JSON Lines ones, token for token.
[[ "$(grep -A1000 -- '--- sample 1' <<<"$a")" == "$(grep -A1000 -- '--- sample 1' <<<"$b")" ]] ||
  { echo "FAIL csv and jsonl samples differ"; diff <(echo "$a") <(echo "$b"); fail=1; }
grep -qF "### Input:
1, 2" <<<"$a" || { echo "FAIL quoted comma: $a"; fail=1; }
# TSV, and gzip of it.
printf 'prompt\tcompletion\nQ: 2+2?\t 4\n"tab\there"\t done\n' >"$T/pc.tsv"
gzip -c "$T/pc.tsv" >"$T/pc2.tsv.gz"
yaml tsv.yaml pc.tsv prompt_completion
out=$("$BIN" train "$T/tsv.yaml" --preview-data=2 2>&1)
grep -qF "pc.tsv (prompt_completion): 2 samples" <<<"$out" || { echo "FAIL tsv: $out"; fail=1; }
yaml gz.yaml pc2.tsv.gz prompt_completion
out=$("$BIN" train "$T/gz.yaml" --preview-data=2 2>&1)
grep -qF "pc2.tsv.gz (prompt_completion): 2 samples" <<<"$out" || { echo "FAIL tsv.gz: $out"; fail=1; }
# A directory of shards: both files, in name order.
mkdir "$T/shards"
printf 'text\nfirst shard\n' >"$T/shards/train-00000-of-00002.csv"
printf 'text\nsecond shard\n' >"$T/shards/train-00001-of-00002.csv"
yaml dir.yaml shards text
out=$("$BIN" train "$T/dir.yaml" --preview-data=2 2>&1)
grep -qF "shards (text): 2 samples" <<<"$out" && [[ $(grep -n 'irst shard' <<<"$out" | cut -d: -f1) -lt $(grep -n 'econd shard' <<<"$out" | cut -d: -f1) ]] ||
  { echo "FAIL csv directory: $out"; fail=1; }
# A directory holding two formats: one builder's files, as `datasets` (two jsonl outnumber a csv).
mkdir "$T/mixed"
printf 'text\nfrom the csv\n' >"$T/mixed/a.csv"
printf '{"text": "jsonl one"}\n' >"$T/mixed/b.jsonl"
printf '{"text": "jsonl two"}\n' >"$T/mixed/c.jsonl"
yaml mixed.yaml mixed text
out=$("$BIN" train "$T/mixed.yaml" --preview-data=2 2>&1)
grep -qF "mixed (text): 2 samples" <<<"$out" && ! grep -qF "rom the csv" <<<"$out" || { echo "FAIL mixed directory: $out"; fail=1; }
# Refusals.
printf 'text,label\nfine,1\nbad,2,3\n' >"$T/wide.csv"
yaml wide.yaml wide.csv text
out=$("$BIN" train "$T/wide.yaml" --preview-data=1 2>&1); rc=$?
[[ $rc -ne 0 ]] && grep -qF "wide.csv line 3: 3 fields, but the header names 2 columns" <<<"$out" || { echo "FAIL wide row: rc $rc: $out"; fail=1; }
printf 'text\n"never closed\nmore\n' >"$T/open.csv"
yaml open.yaml open.csv text
out=$("$BIN" train "$T/open.yaml" --preview-data=1 2>&1); rc=$?
[[ $rc -ne 0 ]] && grep -qF "open.csv line 2: column 1: a quoted field opened here is never closed" <<<"$out" || { echo "FAIL open quote: rc $rc: $out"; fail=1; }
printf 'text\n,\n' >"$T/empty.csv"
yaml empty.yaml empty.csv text
out=$("$BIN" train "$T/empty.yaml" --preview-data=1 2>&1); rc=$?
[[ $rc -ne 0 ]] && grep -qF "empty.csv line 2: 2 fields, but the header names 1 columns" <<<"$out" || { echo "FAIL empty row: rc $rc: $out"; fail=1; }
printf 'text,x\n,1\n' >"$T/null.csv"
yaml null.yaml null.csv text
out=$("$BIN" train "$T/null.yaml" --preview-data=1 2>&1); rc=$?
[[ $rc -ne 0 ]] && grep -qF "null.csv line 2: field 'text' is empty (null)" <<<"$out" || { echo "FAIL null text: rc $rc: $out"; fail=1; }
cp "$T/alpaca.csv" "$T/alpaca.txt"
yaml txt.yaml alpaca.txt alpaca "    ds_type: csv\n"
out=$("$BIN" train "$T/txt.yaml" --preview-data=1 2>&1); rc=$?
[[ $rc -eq 2 ]] && grep -qF "is not named .csv or .tsv" <<<"$out" || { echo "FAIL ds_type csv on .txt: rc $rc: $out"; fail=1; }
[[ $fail -eq 0 ]] && echo "ok"
exit $fail
