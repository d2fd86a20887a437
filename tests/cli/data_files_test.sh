#!/usr/bin/env bash
# A dataset entry's data_files (axolotl / `datasets`; io/hf_cache.h resolve_data_files) through
# `train --preview-data`: axolotl's `path: json` with data_files relative to the config; a list
# read in its order; a glob under a local directory taking the train shards only; {split: files}
# with split; .txt files a line a record (`path: text`); a Hub dataset in a fake cache with data_files instead of its card's splits; --dry-run
# printing the resolved files as data_files. Refused by name: a file missing, a glob matching nothing, data_files
# under a path that is a file, a split data_files does not list.
set -u
BIN="$1"
T=$(mktemp -d /tmp/st_cli_datafiles_XXXXXX)
trap 'rm -rf "$T"' EXIT
"$BIN" init-model --preset tiny-llama --out "$T/model" --seed 1 >/dev/null || { echo "FAIL init-model"; exit 1; }
cp "$(dirname "$0")/../fixtures/gguf/tiny_tokenizer.json" "$T/model/tokenizer.json"
export HF_HUB_CACHE="$T/hub"
fail=0
mkdir -p "$T/data/shards/zsub" "$T/data/.hidden"
text() { printf '{"text": "%s"}\n' "$2" >"$1"; }
text "$T/data/train.jsonl" "alpha words"
text "$T/data/extra.jsonl" "beta words"
printf 'text\ngamma words\n' >"$T/data/more.csv"
text "$T/data/shards/train-00000-of-00002.jsonl" "shard zero"
text "$T/data/shards/zsub/train-00001-of-00002.jsonl" "shard one"
text "$T/data/shards/test-00000-of-00001.jsonl" "test shard"
text "$T/data/.hidden/train-x.jsonl" "hidden"
run() {  # run NAME DATASET-LINES: preview of a config whose one dataset entry is DATASET-LINES
  printf 'base_model: model\ndatasets:\n%b\ndevice: cpu\nsequence_len: 64\noutput_dir: out\n' "$2" >"$T/$1.yaml"
  out=$("$BIN" train "$T/$1.yaml" --preview-data=3 2>&1); rc=$?
  out=$(sed 's/⟦//g; s/⟧//g' <<<"$out")  # the trained-token marks split words
}
order() {  # order A B: A printed before B
  local a b
  a=$(grep -n -F "$1" <<<"$out" | head -1 | cut -d: -f1); b=$(grep -n -F "$2" <<<"$out" | head -1 | cut -d: -f1)
  [[ -n "$a" && -n "$b" && "$a" -lt "$b" ]]
}
run builder '  - path: json\n    data_files: data/train.jsonl\n    type: text'
[[ $rc -eq 0 ]] && grep -qF "json (text): 1 samples" <<<"$out" && grep -qF "alpha words" <<<"$out" || { echo "FAIL path: json: rc $rc: $out"; fail=1; }
run list '  - path: json\n    data_files: [data/extra.jsonl, data/train.jsonl, data/more.csv]\n    type: text'
[[ $rc -eq 0 ]] && grep -qF "json (text): 3 samples" <<<"$out" && order "beta words" "alpha words" && order "alpha words" "gamma words" ||
  { echo "FAIL list order: rc $rc: $out"; fail=1; }
run glob '  - path: data/shards\n    data_files: "**/train-*"\n    type: text'
[[ $rc -eq 0 ]] && grep -qF "(text): 2 samples" <<<"$out" && order "shard zero" "shard one" && ! grep -qF "test shard" <<<"$out" ||
  { echo "FAIL glob: rc $rc: $out"; fail=1; }
run hidden '  - path: data\n    data_files: "**/train-*"\n    type: text'
[[ $rc -eq 0 ]] && grep -qF "(text): 2 samples" <<<"$out" && ! grep -qF "hidden" <<<"$out" || { echo "FAIL hidden dirs: rc $rc: $out"; fail=1; }
run splits '  - path: json\n    data_files:\n      train: data/train.jsonl\n      test: [data/extra.jsonl]\n    split: test\n    type: text'
[[ $rc -eq 0 ]] && grep -qF "beta words" <<<"$out" && ! grep -qF "alpha words" <<<"$out" || { echo "FAIL split dict: rc $rc: $out"; fail=1; }
# A Hub dataset whose card would choose other files: data_files decides.
snap="$T/hub/datasets--acme--rows/snapshots/99bb"
mkdir -p "$snap/data" "$T/hub/datasets--acme--rows/refs"
echo 99bb >"$T/hub/datasets--acme--rows/refs/main"
text "$snap/data/train-00000-of-00001.jsonl" "card train"
text "$snap/data/extra-00000-of-00001.jsonl" "extra rows"
run hub '  - path: acme/rows\n    data_files: data/extra-*.jsonl\n    type: text'
[[ $rc -eq 0 ]] && grep -qF "extra rows" <<<"$out" && ! grep -qF "card train" <<<"$out" || { echo "FAIL hub data_files: rc $rc: $out"; fail=1; }
out=$("$BIN" train "$T/list.yaml" --dry-run 2>&1)
grep -qF -- "- $T/data/extra.jsonl" <<<"$out" && grep -qF -- "- $T/data/more.csv" <<<"$out" ||
  { echo "FAIL dry-run: $out"; fail=1; }
# Plain text (`datasets`' text builder): a record {"text": line} a line, CRLF / CR / LF; an empty
# line is a record with nothing to train (dropped). A glob takes .txt files only when it names them.
printf 'first line\r\n\rsecond line\nthird line' >"$T/data/notes.txt"
run txt '  - path: data/notes.txt\n    type: completion'
[[ $rc -eq 0 ]] && grep -qF "notes.txt (text): 3 samples" <<<"$out" && grep -qF "1 dropped" <<<"$out" && order "first line" "second line" ||
  { echo "FAIL .txt: rc $rc: $out"; fail=1; }
run txtglob '  - path: text\n    data_files: "data/*.txt"\n    type: completion'
[[ $rc -eq 0 ]] && grep -qF "text (text): 3 samples" <<<"$out" || { echo "FAIL text glob: rc $rc: $out"; fail=1; }
run noglob '  - path: data\n    data_files: "*"\n    type: completion'
[[ $rc -eq 0 ]] && ! grep -qF "first line" <<<"$out" || { echo "FAIL '*' took a .txt: rc $rc: $out"; fail=1; }
# Refusals.
run missing '  - path: json\n    data_files: data/nope.jsonl\n    type: text'
[[ $rc -eq 2 ]] && grep -qF "data_files 'data/nope.jsonl': no such file" <<<"$out" || { echo "FAIL missing: rc $rc: $out"; fail=1; }
run nomatch '  - path: data\n    data_files: "zzz-*"\n    type: text'
[[ $rc -eq 2 ]] && grep -qF "data_files 'zzz-*': no dataset file" <<<"$out" || { echo "FAIL no match: rc $rc: $out"; fail=1; }
run file '  - path: data/train.jsonl\n    data_files: data/extra.jsonl\n    type: text'
[[ $rc -eq 2 ]] && grep -qF "is a file; data_files choose files under a directory" <<<"$out" || { echo "FAIL file path: rc $rc: $out"; fail=1; }
run nosplit '  - path: json\n    data_files:\n      train: data/train.jsonl\n    split: validation\n    type: text'
[[ $rc -eq 2 ]] && grep -qF "data_files: no split 'validation' (given: train)" <<<"$out" || { echo "FAIL split missing: rc $rc: $out"; fail=1; }
[[ $fail -eq 0 ]] && echo "ok"
exit $fail
