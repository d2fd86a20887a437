#!/usr/bin/env bash
# Data-parallel scaling on one node in ONE device call (nvidia-h200-x2 or larger; binaries staged by
# tools/cuda/perf_run.sh stage; carry .devbin): for each row PRESET:SEQ:WINDOW:BUDGET, random
# bf16 weights of the preset written once (init-model), then `streamtune bench --model --devices N`
# for N in DEVICES (default "1 2"), the same global window of WINDOW micro-batches (grad-accum
# WINDOW/N per device), streamed from one shared pinned RAM store under BUDGET per GPU.
#   ROWS="qwen2.5-1.5b:2048:4:2GiB llama3-8b:2048:4:6GiB"
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
[ -f .devbin/pack.tar.xz ] && [ ! -x .devbin/streamtune ] && tar xJf .devbin/pack.tar.xz -C .devbin
export LD_LIBRARY_PATH=$PWD/.devbin/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
B=$PWD/.devbin/streamtune
OUT=${OUT:-/tmp/dp}; mkdir -p "$OUT"; W=${W:-/tmp/dpw}; mkdir -p "$W"
nvidia-smi -L
: >"$OUT/dp.jsonl"
for row in ${ROWS:-}; do
  IFS=: read -r m s win bud <<<"$row"
  t0=$(date +%s)
  [ -d "$W/$m" ] || $B init-model --preset "$m" --out "$W/$m" --dtype bfloat16 >/dev/null || { echo "init $m failed"; continue; }
  echo "== $m weights in $(( $(date +%s) - t0 )) s"
  for n in ${DEVICES:-1 2}; do
    timeout 400 $B bench --model "$W/$m" --devices "$n" --device cuda --seq "$s" --grad-accum $((win / n)) \
      --steps "${STEPS:-3}" --warmup 1 --stream ram --vram-budget "$bud" --json >>"$OUT/dp.jsonl" 2>>"$OUT/dp_${m}_${n}.err" ||
      echo "{\"model\":\"$m\",\"devices\":$n,\"error\":\"rc $?\"}" >>"$OUT/dp.jsonl"
    tail -1 "$OUT/dp.jsonl"
  done
done
python3 - "$OUT/dp.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
base = {}
print("| model | seq | devices | tokens/step | step ms | tok/s | tok/s per GPU | efficiency | loss first / last |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for r in rows:
    if "error" in r:
        print("| %s | | %s | error %s |" % (r["model"], r["devices"], r["error"])); continue
    k = (r["model"], r["seq"])
    if r["devices"] == 1: base[k] = r["tok_s"]
    eff = r["tok_s"] / (r["devices"] * base[k]) if k in base else float("nan")
    print("| %s | %d | %d | %d | %.1f | %.0f | %.0f | %.2f | %.4f / %.4f |" % (
        r["model"].split("/")[-1], r["seq"], r["devices"], r["tokens_per_step"], r["step_ms"], r["tok_s"],
        r["tok_s_per_device"], eff, r["loss_first"], r["loss_last"]))
PY
