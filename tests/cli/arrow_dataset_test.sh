#!/usr/bin/env bash
# Datasets saved by `datasets` (io/arrow.h Note [Arrow IPC]) through `train --preview-data`: a
# save_to_disk directory of alpaca records gives the very samples of the same records as JSON
# Lines; a saved DatasetDict's split is chosen by `split` (train by default), an absent one refused
# listing the splits; a single .arrow file (axolotl's ds_type: arrow); a cut-off .arrow refused
# naming the file. Fixtures: tests/fixtures/arrow (tools/ref/make_arrow_fixture.py).
set -u
BIN="$1"
FIX=$(cd "$(dirname "$0")/../fixtures/arrow" && pwd)
T=$(mktemp -d /tmp/st_cli_arrow_XXXXXX)
trap 'rm -rf "$T"' EXIT
"$BIN" init-model --preset tiny-llama --out "$T/model" --seed 1 >/dev/null || { echo "FAIL init-model"; exit 1; }
cp "$(dirname "$0")/../fixtures/gguf/tiny_tokenizer.json" "$T/model/tokenizer.json"
fail=0
run() {  # run NAME DATASET-LINES
  printf 'base_model: model\ndatasets:\n%b\ndevice: cpu\nsequence_len: 256\noutput_dir: out\n' "$2" >"$T/$1.yaml"
  out=$("$BIN" train "$T/$1.yaml" --preview-data=3 2>&1); rc=$?
}
run saved "  - path: $FIX/saved\n    type: alpaca"
a=$out
[[ $rc -eq 0 ]] && grep -qF "saved (alpaca): 3 samples" <<<"$a" || { echo "FAIL saved dir: rc $rc: $a"; fail=1; }
# The same records as JSON Lines (the fixture's expected rows): the same samples.
cp "$FIX/saved.expected.jsonl" "$T/saved.jsonl"
run jsonl "  - path: saved.jsonl\n    type: alpaca"
[[ "$(grep -A1000 -- '--- sample 1' <<<"$a")" == "$(grep -A1000 -- '--- sample 1' <<<"$out")" ]] ||
  { echo "FAIL arrow and jsonl samples differ"; diff <(echo "$a") <(echo "$out"); fail=1; }
run dict_train "  - path: $FIX/saved_dict\n    type: alpaca"
[[ $rc -eq 0 ]] && grep -qF "(alpaca): 2 samples" <<<"$out" && grep -qF "Add the numbers" <<<"$out" || { echo "FAIL dict train: rc $rc: $out"; fail=1; }
run dict_test "  - path: $FIX/saved_dict\n    type: alpaca\n    split: test"
[[ $rc -eq 0 ]] && grep -qF "(alpaca): 1 samples" <<<"$out" && grep -qF "Third" <<<"$out" || { echo "FAIL dict test: rc $rc: $out"; fail=1; }
run dict_val "  - path: $FIX/saved_dict\n    type: alpaca\n    split: validation"
[[ $rc -eq 2 ]] && grep -qF "(a saved DatasetDict) has no split 'validation' (splits: test, train)" <<<"$out" ||
  { echo "FAIL dict missing split: rc $rc: $out"; fail=1; }
run file "  - path: $FIX/saved/data-00000-of-00001.arrow\n    ds_type: arrow\n    type: alpaca"
[[ $rc -eq 0 ]] && grep -qF "(alpaca): 3 samples" <<<"$out" || { echo "FAIL single .arrow: rc $rc: $out"; fail=1; }
head -c 1500 "$FIX/saved/data-00000-of-00001.arrow" >"$T/cut.arrow"
run cut "  - path: cut.arrow\n    type: alpaca"
[[ $rc -ne 0 ]] && grep -qF "cut.arrow: " <<<"$out" || { echo "FAIL cut-off .arrow: rc $rc: $out"; fail=1; }
[[ $fail -eq 0 ]] && echo "ok"
exit $fail
