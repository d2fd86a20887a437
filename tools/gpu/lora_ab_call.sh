#!/usr/bin/env bash
# LoRA kernel plans A/B on the H200 in ONE device call (binaries staged by tools/cuda/perf_run.sh
# stage BUILD_DIR; carry .devbin): the lora_ops gputest under each plan (CPU parity), its TimingTable
# under each plan, then `streamtune bench` rows under each plan, interleaved, REPS runs each.
# A plan is a set of env knobs (backend/cuda/lora_tc.cu): STREAMTUNE_LORA_DOT_BLOCKS (row-dot K
# splits; 1 = the single-block row dot of sessions 4-8), STREAMTUNE_LORA_SUM_BLOCKS / _SUM_ROWS
# (column-sum splits), STREAMTUNE_LORA_DT_T (lora_dt's transposed B from this many outputs);
# BIN=prev runs the binaries of .devbin/prev.tar.xz (an earlier build, staged by hand) instead.
# TEST_PLANS: more plans for the parity tests only.
#   PLANS="old:DOT=1 new: ..." ROWS="qwen2.5-3b:2048:all ..." (MODEL:SEQ:qv|all) REPS=2 STEPS=4 OUT=dir
set -uo pipefail
[ -f .devbin/pack.tar.xz ] && [ ! -x .devbin/streamtune ] && tar xJf .devbin/pack.tar.xz -C .devbin
[ -f .devbin/prev.tar.xz ] && [ ! -x .devbin/prev/streamtune ] && mkdir -p .devbin/prev && tar xJf .devbin/prev.tar.xz -C .devbin/prev
export LD_LIBRARY_PATH=$PWD/.devbin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
OUT=${OUT:-/tmp/lab}; mkdir -p "$OUT"
REPS=${REPS:-2}; STEPS=${STEPS:-4}
PLANS=${PLANS:-"old:DOT=1 new:"}
ALL=q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj
# with_plan SPEC cmd...: runs cmd with the plan's knobs (DOT=, SUM=, ROWS=, DT=, BIN=prev, separated by commas).
with_plan() {
  local spec=$1; shift
  local -a env=()
  local bin=$PWD/.devbin
  IFS=, read -ra kv <<<"$spec"
  for p in "${kv[@]}"; do
    case "$p" in
      DOT=*) env+=("STREAMTUNE_LORA_DOT_BLOCKS=${p#DOT=}") ;;
      SUM=*) env+=("STREAMTUNE_LORA_SUM_BLOCKS=${p#SUM=}") ;;
      ROWS=*) env+=("STREAMTUNE_LORA_SUM_ROWS=${p#ROWS=}") ;;
      DT=*) env+=("STREAMTUNE_LORA_DT_T=${p#DT=}") ;;
      BIN=prev) bin=$PWD/.devbin/prev ;;
    esac
  done
  local cmd=$1; shift
  env "${env[@]}" timeout 600 "$bin/$cmd" "$@"
}
for plan in $PLANS ${TEST_PLANS:-}; do
  name=${plan%%:*}; spec=${plan#*:}
  with_plan "$spec" backend_cuda_lora_ops_gputest --gtest_filter=-*TimingTable* >"$OUT/test_$name.log" 2>&1
  echo "plan $name ($spec) lora_ops gputest rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/test_$name.log" | tr '\n' ' ')"
  grep -E "Failure|FAILED  \]" "$OUT/test_$name.log" | head -5
done
for plan in $PLANS; do
  name=${plan%%:*}; spec=${plan#*:}
  echo "== TimingTable, plan $name ($spec)"
  with_plan "$spec" backend_cuda_lora_ops_gputest --gtest_filter=*TimingTable* 2>&1 | grep -E "^[0-9]|shape"
done
: >"$OUT/ab.jsonl"
for row in ${ROWS:-}; do
  IFS=: read -r m s tg <<<"$row"
  targets=q_proj,v_proj; [ "$tg" = all ] && targets=$ALL
  for rep in $(seq "$REPS"); do
    for plan in $PLANS; do
      name=${plan%%:*}; spec=${plan#*:}
      with_plan "$spec" streamtune bench --preset "$m" --seq "$s" --targets "$targets" --steps "$STEPS" \
        --warmup 2 --stream off --device cuda --json --no-ceilings 2>>"$OUT/ab.err" |
        python3 -c "import json,sys; r=json.loads(sys.stdin.read()); r['plan']='$name'; r['tg']='$tg'; print(json.dumps(r))" \
        >>"$OUT/ab.jsonl" || echo "{\"model\":\"$m\",\"seq\":$s,\"tg\":\"$tg\",\"plan\":\"$name\",\"error\":1}" >>"$OUT/ab.jsonl"
    done
  done
done
python3 - "$OUT/ab.jsonl" "$PLANS" <<'PY'
import json, sys, collections
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
plans = [p.split(":")[0] for p in sys.argv[2].split()]
by = collections.OrderedDict()
for r in rows:
    by.setdefault((r["model"], r["seq"], r["tg"]), {}).setdefault(r["plan"], []).append(r)
print("| model | seq | targets | " + " | ".join("%s step ms" % p for p in plans) + " | %s vs %s (medians) |" % (plans[-1], plans[0]))
print("| --- | --- | --- | " + " | ".join("---" for _ in plans) + " | --- |")
med = lambda v: sorted(v)[len(v) // 2] if v else 0
for (m, s, tg), d in by.items():
    ms = {p: [x.get("step_ms", 0) for x in d.get(p, []) if "error" not in x] for p in plans}
    cells = [" / ".join("%.2f" % v for v in ms[p]) or "-" for p in plans]
    a, b = med(ms[plans[0]]), med(ms[plans[-1]])
    g = "%+.1f%%" % (100.0 * (a - b) / b) if a and b else "-"
    print("| %s | %s | %s | %s | %s |" % (m, s, tg, " | ".join(cells), g))
PY
