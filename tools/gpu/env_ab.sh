#!/usr/bin/env bash
# `streamtune bench` A/B over environment switches in ONE device call, interleaved rounds, one
# binary (staged by tools/cuda/perf_run.sh stage BUILD_DIR; carry .devbin). A variant is
# name:VAR=value[,VAR=value...] (an empty spec = the defaults). A row is
# PRESET:SEQ[:PROMPT_LEN[:DOC_LEN]] (bench --prompt-len / --doc-len; empty or 0 = none).
#   VARIANTS="trained: all:STREAMTUNE_HEAD_ROWS=all" ROWS="qwen2.5-0.5b:2048:1024" ROUNDS=2 \
#   STEPS=5 BENCH_ARGS="--recompute full" OUT=dir bash tools/gpu/env_ab.sh
# Prints one line per run (step ms, tok/s) and a median summary per (row, variant).
set -uo pipefail
[ -f .devbin/pack.tar.xz ] && [ ! -x .devbin/streamtune ] && tar xJf .devbin/pack.tar.xz -C .devbin
export LD_LIBRARY_PATH=$PWD/.devbin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
OUT=${OUT:-/tmp/env_ab}; mkdir -p "$OUT"
VARIANTS=${VARIANTS:?VARIANTS="name:VAR=v,... ..."} ROWS=${ROWS:?ROWS="preset:seq[:prompt_len] ..."}
ROUNDS=${ROUNDS:-2} STEPS=${STEPS:-5} WARMUP=${WARMUP:-2}
for round in $(seq 1 "$ROUNDS"); do
  for row in $ROWS; do
    IFS=: read -r preset seq prompt doc <<<"$row"
    [ "${prompt:-0}" = 0 ] && prompt=
    [ "${doc:-0}" = 0 ] && doc=
    for v in $VARIANTS; do
      name=${v%%:*}; spec=${v#*:}
      IFS=, read -ra env <<<"$spec"
      env "${env[@]}" timeout 300 .devbin/streamtune bench --preset "$preset" --seq "$seq" \
        ${prompt:+--prompt-len "$prompt"} ${doc:+--doc-len "$doc"} --steps "$STEPS" --warmup "$WARMUP" --no-ceilings --json ${BENCH_ARGS:-} \
        >"$OUT/run.json" 2>>"$OUT/stderr.log" || { echo "FAILED $row $name"; continue; }
      python3 - "$OUT/run.json" "$row" "$name" "$round" <<'PY' | tee -a "$OUT/runs.tsv"
import json, sys
r = json.loads(open(sys.argv[1]).read())
print("%s\t%s\t%s\t%.2f\t%.0f\t%.4f" % (sys.argv[2], sys.argv[3], sys.argv[4], r["step_ms"], r["tok_s"], r["loss_last"]))
PY
    done
  done
done
python3 - "$OUT/runs.tsv" <<'PY'
import statistics, sys, collections
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    row, name, _, ms, tok, _ = line.split("\t")
    runs[(row, name)].append((float(ms), float(tok)))
for (row, name), v in runs.items():
    print("median %-24s %-10s step %8.2f ms  tok/s %9.0f  (%d runs)" % (row, name, statistics.median(m for m, _ in v),
          statistics.median(t for _, t in v), len(v)))
PY
