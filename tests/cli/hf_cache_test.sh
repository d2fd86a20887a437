#!/usr/bin/env bash
# Hub ids resolved in the local Hugging Face cache (io/hf_cache.h), offline: a fake cache laid out
# as huggingface_hub writes it (refs/main, snapshots/<commit>/ linking into blobs/). Oracles:
# `train --preview-data` with base_model and a dataset named by Hub ids reads the snapshot's
# model and only the train split's records (the test split's are counted apart); `logits --model
# ID` runs; an id missing from the cache, several snapshots without refs/main and a dataset with
# several configs are refused by name; a local path of the same shape wins over the cache.
set -u
BIN="$1"
T=$(mktemp -d /tmp/st_cli_hf_XXXXXX)
trap 'rm -rf "$T"' EXIT
FIX=tests/fixtures/tokenizers
fail=0
export HF_HUB_CACHE="$T/hub"
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }

# A model repo: files in blobs/, the snapshot links to them, as huggingface_hub stores them.
"$BIN" init-model --preset tiny-llama --out "$T/tiny" --seed 1 >/dev/null || { echo "FAIL init-model"; exit 1; }
python3 - "$T/tiny/config.json" "$T/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["vocab_size"] = 1200
json.dump(c, open(sys.argv[2], "w"))
PY
"$BIN" init-model --config "$T/config.json" --out "$T/src" --seed 1 --dtype float32 >/dev/null || { echo "FAIL init-model --config"; exit 1; }
cp "$FIX/spm_gguf/tiny_spm.model" "$T/src/tokenizer.model"
repo="$T/hub/models--acme--tiny-1.5"
mkdir -p "$repo/blobs" "$repo/refs" "$repo/snapshots/0123abcd"
for f in "$T"/src/*; do
  h=$(sha256sum "$f" | cut -c1-40)
  cp "$f" "$repo/blobs/$h"
  ln -s "../../blobs/$h" "$repo/snapshots/0123abcd/$(basename "$f")"
done
echo 0123abcd >"$repo/refs/main"
mkdir -p "$repo/snapshots/ffff0000"  # an older snapshot refs/main does not point to

# A dataset repo with a train and a test split under data/.
drepo="$T/hub/datasets--acme--rows"
mkdir -p "$drepo/refs" "$drepo/snapshots/77aa/data"
python3 - "$drepo/snapshots/77aa/data" <<'PY'
import json, random, sys
r = random.Random(0)
for split, n in (("train", 7), ("test", 3)):
    with open(f"{sys.argv[1]}/{split}-00000-of-00001.jsonl", "w") as f:
        for _ in range(n):
            f.write(json.dumps({"input_ids": [r.randrange(1200) for _ in range(20)]}) + "\n")
PY
echo '{"splits": {}}' >"$drepo/snapshots/77aa/dataset_infos.json"
echo 77aa >"$drepo/refs/main"

mkdir -p "$T/run"
cat >"$T/run/t.yaml" <<'YAML'
base_model: acme/tiny-1.5
datasets:
  - path: acme/rows
    type: tokenized
device: cpu
dtype: float32
sequence_len: 32
micro_batch_size: 1
max_steps: 1
output_dir: out
YAML
out=$("$BIN" train "$T/run/t.yaml" --preview-data=1 2>&1); rc=$?
if [[ $rc -eq 0 ]] && grep -q "7 samples" <<<"$out"; then ok "preview: base_model and dataset from the cache, the train split only (7 rows)"
else bad "preview: rc $rc: $out"; fi
out=$("$BIN" train "$T/run/t.yaml" --dry-run 2>&1); rc=$?
if [[ $rc -eq 0 ]] && grep -q "snapshots/0123abcd" <<<"$out"; then ok "dry-run names the snapshot refs/main points to"
else bad "dry-run: rc $rc: $out"; fi

out=$(cd "$T" && "$BIN" logits --model acme/tiny-1.5 --ids 1,2,3 --out "$T/l.safetensors" 2>&1); rc=$?
if [[ $rc -eq 0 && -s "$T/l.safetensors" ]] && grep -q "Hugging Face cache" <<<"$out"; then ok "logits --model ID, with a note"
else bad "logits: rc $rc: $out"; fi

# A PEFT adapter repo in the cache: train one, file it as acme/tiny-lora, use it by id.
out=$(cd "$T/run" && "$BIN" train t.yaml --output_dir=lora 2>&1); rc=$?
if [[ $rc -ne 0 ]]; then bad "train: rc $rc: $out"
else
  arepo="$T/hub/models--acme--tiny-lora"
  mkdir -p "$arepo/refs" "$arepo/snapshots/aa11"
  cp "$T/run/lora/adapter_model.safetensors" "$T/run/lora/adapter_config.json" "$arepo/snapshots/aa11/"
  echo aa11 >"$arepo/refs/main"
  out=$(cd "$T" && "$BIN" logits --model acme/tiny-1.5 --adapter acme/tiny-lora --ids 1,2,3 --out "$T/la.safetensors" 2>&1); rc=$?
  if [[ $rc -eq 0 ]] && grep -q "note: --adapter" <<<"$out" && ! cmp -s "$T/l.safetensors" "$T/la.safetensors"; then
    ok "logits --adapter ID: the cached adapter applied"
  else bad "adapter by id: rc $rc: $out"; fi
fi

# A local directory of the same shape wins (relative to the working directory).
mkdir -p "$T/local/acme" && cp -r "$T/src" "$T/local/acme/tiny-1.5"
out=$(cd "$T/local" && "$BIN" logits --model acme/tiny-1.5 --ids 1,2,3 --out "$T/l2.safetensors" 2>&1); rc=$?
if [[ $rc -eq 0 ]] && ! grep -q "Hugging Face cache" <<<"$out"; then ok "a local path of the same shape wins"
else bad "local path: rc $rc: $out"; fi

# split: test of the same repo; a card's configs (README.md front matter) decide where they exist.
sed 's|    type: tokenized|    type: tokenized\n    split: test|' "$T/run/t.yaml" >"$T/run/test.yaml"
out=$("$BIN" train "$T/run/test.yaml" --preview-data=1 2>&1); rc=$?
if [[ $rc -eq 0 ]] && grep -q "3 samples" <<<"$out"; then ok "split: test reads the test split (3 rows)"
else bad "split test: rc $rc: $out"; fi
crepo="$T/hub/datasets--acme--chat"
mkdir -p "$crepo/refs" "$crepo/snapshots/c0de/data" "$crepo/snapshots/c0de/small"
echo c0de >"$crepo/refs/main"
python3 - "$crepo/snapshots/c0de" <<'PY'
import json, random, sys
r = random.Random(1)
for name, n in (("data/train_sft-00000-of-00001", 5), ("data/test_sft-00000-of-00001", 2),
                ("data/train_gen-00000-of-00001", 4), ("small/a", 3)):
    with open(f"{sys.argv[1]}/{name}.jsonl", "w") as f:
        for _ in range(n):
            f.write(json.dumps({"input_ids": [r.randrange(1200) for _ in range(12)]}) + "\n")
open(f"{sys.argv[1]}/README.md", "w").write("""---
license: mit
configs:
- config_name: default
  data_files:
  - split: train_sft
    path: data/train_sft-*
  - split: test_sft
    path: "data/test_sft-*"
- config_name: small
  data_files: small/*.jsonl
dataset_info:
  features:
  - name: input_ids
    sequence: int32
---
# A card
""")
PY
card() {  # $1: extra dataset keys (YAML lines, already indented)
  printf 'base_model: acme/tiny-1.5\ndatasets:\n  - path: acme/chat\n    type: tokenized\n%bdevice: cpu\ndtype: float32\nsequence_len: 32\nmicro_batch_size: 1\nmax_steps: 1\noutput_dir: out\n' "$1" >"$T/run/card.yaml"
  "$BIN" train "$T/run/card.yaml" --preview-data=1 2>&1
}
out=$(card '    split: train_sft\n'); rc=$?
if [[ $rc -eq 0 ]] && grep -q "5 samples" <<<"$out"; then ok "the card's split train_sft (5 rows, not train_gen's)"
else bad "card train_sft: rc $rc: $out"; fi
out=$(card ''); rc=$?
if [[ $rc -ne 0 ]] && grep -q "has no split 'train' (splits: train_sft, test_sft)" <<<"$out"; then ok "split train where the card has none: refused, listing its splits"
else bad "card no train: rc $rc: $out"; fi
out=$(card '    name: small\n'); rc=$?
if [[ $rc -eq 0 ]] && grep -q "3 samples" <<<"$out"; then ok "name: small picks the card's other config"
else bad "card name: rc $rc: $out"; fi
out=$(card '    name: nope\n'); rc=$?
if [[ $rc -ne 0 ]] && grep -q "no config 'nope' (configs: default, small)" <<<"$out"; then ok "an unknown config name: refused, listing them"
else bad "card bad name: rc $rc: $out"; fi

# A split whose files come in two formats: `datasets` reads one (the most common; a draw goes to
# jsonl over csv), and so do we -- checked against datasets 5.2 (train.csv + train.jsonl: the jsonl).
mrepo="$T/hub/datasets--acme--mixed"
mkdir -p "$mrepo/refs" "$mrepo/snapshots/m1x"
echo m1x >"$mrepo/refs/main"
printf '{"input_ids": [1, 2, 3, 4]}\n' >"$mrepo/snapshots/m1x/train.jsonl"
printf 'input_ids\n"[5, 6]"\n' >"$mrepo/snapshots/m1x/train.csv"
sed 's|  - path: acme/rows|  - path: acme/mixed|' "$T/run/t.yaml" >"$T/run/mixed.yaml"
out=$("$BIN" train "$T/run/mixed.yaml" --preview-data=1 2>&1); rc=$?
if [[ $rc -eq 0 ]] && grep -q "1 samples" <<<"$out"; then ok "csv beside jsonl: the jsonl only, as datasets"
else bad "mixed formats: rc $rc: $out"; fi
printf 'input_ids\n"[5, 6]"\n' >"$mrepo/snapshots/m1x/train-2.csv"
out=$("$BIN" train "$T/run/mixed.yaml" --preview-data=1 2>&1); rc=$?
if [[ $rc -ne 0 ]] && grep -q "train-2.csv line 2: 'input_ids' is not a list" <<<"$out"; then ok "two csv beside one jsonl: the csv (then refused: a CSV cell is text)"
else bad "mixed formats 2: rc $rc: $out"; fi

# revision: a branch the cache has under refs/, or a commit under snapshots/; one it lacks is
# refused with the download command; a local path takes none.
mkdir -p "$mrepo/snapshots/0ld0" "$mrepo/refs"
printf '{"input_ids": [1, 2]}\n{"input_ids": [3, 4]}\n{"input_ids": [5, 6]}\n' >"$mrepo/snapshots/0ld0/train.jsonl"
echo 0ld0 >"$mrepo/refs/v1"
for rev in v1 0ld0; do
  sed "s|  - path: acme/mixed|  - path: acme/mixed\n    revision: $rev|" "$T/run/mixed.yaml" >"$T/run/rev.yaml"
  out=$("$BIN" train "$T/run/rev.yaml" --preview-data=1 2>&1); rc=$?
  if [[ $rc -eq 0 ]] && grep -q "3 samples" <<<"$out"; then ok "revision: $rev reads that snapshot"
  else bad "revision $rev: rc $rc: $out"; fi
done
sed "s|  - path: acme/mixed|  - path: acme/mixed\n    revision: v9|" "$T/run/mixed.yaml" >"$T/run/rev.yaml"
out=$("$BIN" train "$T/run/rev.yaml" --preview-data=1 2>&1); rc=$?
if [[ $rc -ne 0 ]] && grep -q "huggingface-cli download --repo-type dataset --revision v9 acme/mixed" <<<"$out"; then ok "a revision the cache lacks: refused with the download command"
else bad "revision v9: rc $rc: $out"; fi

# revision_of_model (axolotl's; model_revision its alias): base_model's snapshot at a branch or a
# commit, whichever key comes first; one the cache lacks, or one for a local path, refused.
mkdir -p "$repo/snapshots/beef0001"
cp -P "$repo"/snapshots/0123abcd/* "$repo/snapshots/beef0001/"
echo beef0001 >"$repo/refs/v2"
out=$("$BIN" train "$T/run/t.yaml" --dry-run --revision_of_model=v2 2>&1); rc=$?
if [[ $rc -eq 0 ]] && grep -q "snapshots/beef0001" <<<"$out" && ! grep -q "snapshots/0123abcd" <<<"$out"; then ok "revision_of_model: v2 loads that snapshot"
else bad "revision_of_model v2: rc $rc: $out"; fi
{ echo "model_revision: beef0001"; cat "$T/run/t.yaml"; } >"$T/run/mrev.yaml"
out=$("$BIN" train "$T/run/mrev.yaml" --dry-run 2>&1); rc=$?
if [[ $rc -eq 0 ]] && grep -q "snapshots/beef0001" <<<"$out"; then ok "model_revision (before base_model): a commit under snapshots/"
else bad "model_revision: rc $rc: $out"; fi
out=$("$BIN" train "$T/run/t.yaml" --dry-run --revision_of_model=v9 2>&1); rc=$?
if [[ $rc -ne 0 ]] && grep -q "revision v9 acme/tiny-1.5" <<<"$out"; then ok "a model revision the cache lacks: refused with the download command"
else bad "revision_of_model v9: rc $rc: $out"; fi
out=$("$BIN" train "$T/run/t.yaml" --dry-run --base_model="$T/tiny" --revision_of_model=v2 2>&1); rc=$?
if [[ $rc -ne 0 ]] && grep -q "applies to a Hugging Face model id" <<<"$out"; then ok "revision_of_model with a local base_model: refused"
else bad "revision_of_model local: rc $rc: $out"; fi
rm -rf "$repo/snapshots/beef0001" "$repo/refs/v2"

# Refusals, each naming what to do.
out=$("$BIN" tokenize --model nobody/missing --text x 2>&1); rc=$?
if [[ $rc -ne 0 ]] && grep -q "huggingface-cli download nobody/missing" <<<"$out"; then ok "an id the cache lacks: refused with the download command"
else bad "missing id: rc $rc: $out"; fi
sed 's|^base_model: acme/tiny-1.5|base_model: nobody/model-x|' "$T/run/t.yaml" >"$T/run/miss.yaml"
out=$("$BIN" train "$T/run/miss.yaml" --dry-run 2>&1); rc=$?
if [[ $rc -ne 0 ]] && grep -q "huggingface-cli download nobody/model-x" <<<"$out"; then ok "a base_model id the cache lacks: refused with the download command"
else bad "missing base_model: rc $rc: $out"; fi
rm "$repo/refs/main"
out=$(cd "$T" && "$BIN" logits --model acme/tiny-1.5 --ids 1 --out "$T/l3.safetensors" 2>&1); rc=$?
if [[ $rc -ne 0 ]] && grep -q "2 snapshots" <<<"$out"; then ok "two snapshots and no refs/main: refused, naming them"
else bad "snapshots: rc $rc: $out"; fi
echo 0123abcd >"$repo/refs/main"
mkdir -p "$drepo/snapshots/77aa/main" "$drepo/snapshots/77aa/other"
mv "$drepo/snapshots/77aa/data/train-00000-of-00001.jsonl" "$drepo/snapshots/77aa/main/train.jsonl"
cp "$drepo/snapshots/77aa/main/train.jsonl" "$drepo/snapshots/77aa/other/train.jsonl"
out=$("$BIN" train "$T/run/t.yaml" --preview-data=1 2>&1); rc=$?
if [[ $rc -ne 0 ]] && grep -q "several configs" <<<"$out"; then ok "train files of two configs: refused, naming the directories"
else bad "configs: rc $rc: $out"; fi
exit $fail
