#!/usr/bin/env bash
# `streamtune train` A/B on the device: two staged builds on the same random model and data,
# interleaved, median tok/s of each run (steps after the first three). Unlike `bench` (synthetic
# batches), this goes through the data loader: padded rows, document ids, the planner of `train`.
#
#   PREV=.devbin_prev NEW=.devbin PRESET=qwen2.5-1.5b SEQ=2048 ROUNDS=2 bash tools/gpu/train_ab.sh
#
# Sample lengths are uniform in [LEN_MIN, LEN_MAX] (default 3/4 of SEQ to SEQ: padded rows); with
# PACK=true and short samples (e.g. LEN_MIN=200 LEN_MAX=800) rows hold several documents.
#
# Each of PREV / NEW is a staged .devbin (tools/cuda/perf_run.sh stage; pack.tar.xz is unpacked).
set -uo pipefail
PREV=${PREV:-.devbin_prev} NEW=${NEW:-.devbin} PRESET=${PRESET:-qwen2.5-1.5b} SEQ=${SEQ:-2048}
ROUNDS=${ROUNDS:-2} STEPS=${STEPS:-16} PACK=${PACK:-false} DEVICE=${DEVICE:-cuda} MBS=${MBS:-1} SKIP=${SKIP:-3}
for d in "$PREV" "$NEW"; do [ -f "$d/pack.tar.xz" ] && [ ! -x "$d/streamtune" ] && tar xJf "$d/pack.tar.xz" -C "$d"; done
W=${W:-/tmp/train_ab}; rm -rf "$W"; mkdir -p "$W"
LD_LIBRARY_PATH=$PWD/$NEW/lib:/usr/local/cuda/lib64 "$NEW/streamtune" init-model --preset "$PRESET" --out "$W/m" \
  --dtype bfloat16 >/dev/null || { echo "init-model failed"; exit 1; }
V=$(python3 -c "import json;print(json.load(open('$W/m/config.json'))['vocab_size'])")
python3 - "$W/data.jsonl" "$SEQ" "$V" "${LEN_MIN:-0}" "${LEN_MAX:-0}" <<'PY'
import json, random, sys
path, seq, vocab, lo, hi = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
lo, hi = lo or 3 * seq // 4, hi or seq  # default: 3/4 of the sequence to all of it (padded rows)
r = random.Random(11)
with open(path, "w") as f:
    for _ in range(64 * seq // hi):
        f.write(json.dumps({"input_ids": [r.randrange(vocab) for _ in range(r.randrange(lo, hi + 1))]}) + "\n")
PY
cat >"$W/t.yaml" <<Y
base_model: $W/m
datasets:
  - path: $W/data.jsonl
    type: tokenized
dtype: bfloat16
device: $DEVICE
lora_r: 16
lora_alpha: 32
lora_target_modules: [q_proj, v_proj]
micro_batch_size: $MBS
max_steps: $STEPS
sequence_len: $SEQ
sample_packing: $PACK
shuffle: false
cache_dir: $W/cache
Y
for round in $(seq "$ROUNDS"); do
  for tag in prev new; do
    d=$([ $tag = prev ] && echo "$PREV" || echo "$NEW")
    o=$W/out_${tag}_$round
    LD_LIBRARY_PATH=$PWD/$d/lib:/usr/local/cuda/lib64 "$d/streamtune" train "$W/t.yaml" --output_dir="$o" >"$o.log" 2>&1
    rc=$?
    tps=$(python3 -c "import json,statistics;v=[json.loads(l)['tok_s'] for l in open('$o/metrics.jsonl') if '\"loss\"' in l][$SKIP:];print(round(statistics.median(v)))" 2>/dev/null)
    loss=$(python3 -c "import json;v=[json.loads(l)['loss'] for l in open('$o/metrics.jsonl') if '\"loss\"' in l];print(v[-1])" 2>/dev/null)
    # Wall time a step (median of steps 4 on): comparable across builds whatever tok/s counts.
    sps=$(python3 -c "import json,statistics;e=[json.loads(l)['elapsed_s'] for l in open('$o/metrics.jsonl') if '\"loss\"' in l];d=[b-a for a,b in zip(e,e[1:])][$SKIP:];print('%.1f' % (1e3*statistics.median(d)))" 2>/dev/null)
    echo "train $PRESET seq $SEQ mbs $MBS pack=$PACK $tag round $round: rc=$rc median tok/s $tps, ms/step $sps, last loss $loss"
  done
done
