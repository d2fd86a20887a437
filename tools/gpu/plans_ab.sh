#!/usr/bin/env bash
# Launch plans A/B in ONE device call (binaries from .devbin): `streamtune bench` per row with
# plans on (default) and off (STREAMTUNE_GRAPHS=off), interleaved, REPS times; prints tok/s and
# the ratio on/off per row.   ROWS="model:seq[:recompute] ..."  REPS=2  OUT=dir
set -uo pipefail
[ -f .devbin/pack.tar.xz ] && [ ! -x .devbin/streamtune ] && tar xJf .devbin/pack.tar.xz -C .devbin
export LD_LIBRARY_PATH=$PWD/.devbin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
B=${BIN:-$PWD/.devbin/streamtune}
OUT=${OUT:-/tmp/plans_ab}; mkdir -p "$OUT"
ROWS=${ROWS:-"qwen2.5-0.5b:512 qwen2.5-1.5b:512 qwen2.5-3b:2048 llama3-8b:4096 llama3-8b:4096:full"}
for rep in $(seq "${REPS:-2}"); do
  for row in $ROWS; do
    IFS=: read -r m s rc <<<"$row"
    for g in on off; do
      env $([ $g = off ] && echo STREAMTUNE_GRAPHS=off) "$B" bench --preset "$m" --seq "$s" --steps 5 --warmup 2 \
        --stream off --device cuda --recompute "${rc:-auto}" --no-ceilings --json 2>>"$OUT/ab.err" |
        python3 -c "import json,sys; r=json.loads(sys.stdin.read()); r['plans']='$g'; r['row']='$row'; print(json.dumps(r))" \
        >>"$OUT/ab.jsonl" || echo "{\"row\":\"$row\",\"plans\":\"$g\",\"error\":1}" >>"$OUT/ab.jsonl"
    done
  done
done
python3 - "$OUT/ab.jsonl" <<'PY'
import json, sys, collections
runs = collections.defaultdict(lambda: {"on": [], "off": []})
extra = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("error"): print("error:", r["row"], r["plans"]); continue
    runs[r["row"]][r["plans"]].append(r["tok_s"])
    if r["plans"] == "on": extra[r["row"]] = (r.get("plan_replays_per_step"), r.get("eager_visits_per_step"))
print("| row | plans on tok/s | plans off tok/s | on/off (best) | replayed / eager visits a step |")
print("| --- | --- | --- | --- | --- |")
for row, d in runs.items():
    on, off = d["on"], d["off"]
    q = max(on) / max(off) if on and off else 0
    print("| %s | %s | %s | %.3f | %s |" % (row, " / ".join("%.0f" % x for x in on), " / ".join("%.0f" % x for x in off), q, extra.get(row)))
PY
