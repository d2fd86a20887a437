#!/usr/bin/env bash
# Dataset tokenization speed against the thread count (data/datasets.cc Note [parallel
# tokenization]): `train --preview-data=1` (tokenize, no weights) over generated JSON Lines --
# ~MB MiB of chat records (type messages, chatml) and of plain texts (type text) -- with the
# Qwen2 tokenizer of tests/fixtures, at dataset_processes = each of THREADS. Prints one line a run
# (seconds, MB/s, peak RSS) and checks that every thread count gives the same sample and token
# counts.
#   bash bench/data_load.sh [STREAMTUNE_BINARY]      (MB=50 THREADS="1 2 4 8 16" by default)
set -euo pipefail
BIN="${1:-build/streamtune}"
MB="${MB:-50}"
THREADS="${THREADS:-1 2 4 8 16}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
T=$(mktemp -d /tmp/st_data_load_XXXXXX)
trap 'rm -rf "$T"' EXIT
"$BIN" init-model --preset tiny-llama --out "$T/model" --seed 1 >/dev/null
cp "$ROOT/tests/fixtures/tokenizers/qwen2/tokenizer.json" "$T/model/"
python3 - "$T" "$MB" <<'PY'
import json, random, sys
d, mb = sys.argv[1], int(sys.argv[2])
random.seed(3)
syl = ["ka", "lo", "mi", "the", "and", "ing", "tion", "st", "pr", "ou", "ea", "ch", "sh", "qu", "re", "de", "un", " ", ", ", ". "]
say = lambda n: "".join(random.choice(syl) for _ in range(n))
with open(f"{d}/chat.jsonl", "w") as f:
    size = 0
    while size < mb << 20:
        msgs = [{"role": "system", "content": "You are helpful."}]
        for _ in range(random.randint(1, 4)):
            msgs += [{"role": "user", "content": say(random.randint(20, 200))},
                     {"role": "assistant", "content": say(random.randint(50, 600))}]
        line = json.dumps({"messages": msgs})
        f.write(line + "\n")
        size += len(line) + 1
with open(f"{d}/text.jsonl", "w") as f:
    size = 0
    while size < mb << 20:
        line = json.dumps({"text": say(random.randint(200, 3000))})
        f.write(line + "\n")
        size += len(line) + 1
PY
for kind in chat text; do
  type=$([ "$kind" = chat ] && echo messages || echo text)
  printf 'base_model: model\ndatasets:\n  - path: %s.jsonl\n    type: %s\nchat_template: chatml\ndevice: cpu\nsequence_len: 4096\noutput_dir: out\n' \
    "$kind" "$type" >"$T/$kind.yaml"
  first=""
  for n in $THREADS; do
    start=$(date +%s.%N)
    /usr/bin/time -f "%M" -o "$T/rss" "$BIN" train "$T/$kind.yaml" --preview-data=1 --dataset_processes="$n" \
      >"$T/out.txt" 2>/dev/null
    end=$(date +%s.%N)
    counts=$(grep -o "([a-z]*): [0-9]* samples ([0-9]* tokens, [0-9]* trained)" "$T/out.txt")
    [ -z "$first" ] && first="$counts"
    same=$([ "$counts" = "$first" ] && echo same || echo DIFFERENT)
    python3 -c "import sys; s=float(sys.argv[2])-float(sys.argv[1]); print(f'$kind  threads {int(sys.argv[3]):2d}  {s:6.2f} s  {$MB/s:6.1f} MB/s  rss {int(sys.argv[4])/1024:6.0f} MiB  $same: $counts')" \
      "$start" "$end" "$n" "$(cat "$T/rss")"
  done
done
