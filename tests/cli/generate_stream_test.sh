#!/usr/bin/env bash
# `streamtune generate` gives the same greedy text with the model resident and streamed from the
# RAM and disk tiers (2 and 3 buffers), and --prompts-file loads once and answers each line.
set -euo pipefail
bin=$(realpath "$1")
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
tok=tests/fixtures/tokenizers/smollm2/tokenizer.json
vocab=$(python3 -c "import json,sys; t=json.load(open(sys.argv[1])); print(max(len(t['model']['vocab']) + len(t.get('added_tokens', [])), max(t['model']['vocab'].values()) + 1))" "$tok")
"$bin" init-model --preset tiny-llama --out "$w/base" >/dev/null
python3 - "$w/base/config.json" "$w/cfg.json" "$vocab" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["num_hidden_layers"] = 5; c["vocab_size"] = int(sys.argv[3])
c["bos_token_id"] = 0; c["eos_token_id"] = 0
json.dump(c, open(sys.argv[2], "w"))
PY
"$bin" init-model --config "$w/cfg.json" --out "$w/m" --seed 3 >/dev/null
cp "$tok" "$w/m/tokenizer.json"
export XDG_CACHE_HOME="$w/cache"
gen() { "$bin" generate --model "$w/m" --prompt "The quick brown fox" --max-new-tokens 24 --device cpu "$@" 2>"$w/err"; }
ref=$(gen --stream off)
[ -n "$ref" ] || { echo "empty generation"; cat "$w/err"; exit 1; }
for v in "ram 2" "ram 3" "disk 2"; do
  set -- $v
  out=$(gen --stream $1 --stream-buffers $2)
  grep -q "streaming 5 layers" "$w/err" || { echo "$v: did not stream"; cat "$w/err"; exit 1; }
  [ "$out" = "$ref" ] || { echo "$v: differs from resident"; echo "ref: $ref"; echo "got: $out"; exit 1; }
done
printf 'The quick brown fox\n\nhello world\n' > "$w/prompts.txt"
n=$("$bin" generate --model "$w/m" --prompts-file "$w/prompts.txt" --max-new-tokens 4 --device cpu 2>/dev/null | grep -c '^> ')
[ "$n" -eq 2 ] || { echo "--prompts-file answered $n prompts, expected 2"; exit 1; }
# Hostile flags (session 23 audit): NaN sampling settings are usage errors; a KV cache that fills
# ends the generation with a note (as HF's max_length), not an error after the text.
for f in "--temperature nan" "--top-p nan" "--temperature inf"; do
  set +e; "$bin" generate --model "$w/m" --prompt hi $f --device cpu >/dev/null 2>"$w/err"; rc=$?; set -e
  [ $rc -eq 2 ] && grep -q "a finite number" "$w/err" || { echo "$f: rc $rc"; cat "$w/err"; exit 1; }
done
out=$("$bin" generate --model "$w/m" --prompt "The quick brown fox" --max-new-tokens 1000 --max-seq 12 --device cpu 2>"$w/err")
grep -q "the KV cache of --max-seq 12 is full" "$w/err" || { echo "no max-seq note"; cat "$w/err"; exit 1; }
for p in "$w" /dev/zero; do  # read as no prompts (rc 0), or one endless line, before
  set +e; "$bin" generate --model "$w/m" --prompts-file "$p" --device cpu >/dev/null 2>"$w/err"; rc=$?; set -e
  [ $rc -eq 1 ] && grep -q "not a regular file" "$w/err" || { echo "--prompts-file $p: rc $rc"; cat "$w/err"; exit 1; }
done
echo "resident == ram(2,3) == disk(2): $(echo "$ref" | head -c 60)"
