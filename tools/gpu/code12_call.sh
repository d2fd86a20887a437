#!/bin/bash
# The code12 base on the device (core/code12.h): the decoder's bits and speed (cuda_ops gputest),
# `train` bit signatures with stream_compress on and off (resident, streamed from RAM and disk),
# then bench rows side by side with --quant none and code12 (streamed from pinned RAM, and
# resident for the decode's cost), each row's floor from the link measured in the same run.
# Expects .devbin/pack.tar.xz (streamtune, gputests/, lib/). Writes $OUT/rows.jsonl.
set -u
tar xJf .devbin/pack.tar.xz -C .devbin
export LD_LIBRARY_PATH=$PWD/.devbin/lib
B=$PWD/.devbin/streamtune
.devbin/gputests/backend_cuda_cuda_ops_gputest 2>&1 | grep -E "^\[  (PASSED|FAILED)|Failure|decode_code12|Expected|Which is" | head -20
W=$(mktemp -d /tmp/c12_XXXX)
. tools/gpu/smol_fixture.sh
DROPOUT=0.1 smol_fixture $B $W
for v in "off - false" "off - true" "ram 300MiB true" "disk 300MiB true" "ram 300MiB false"; do
  set -- $v; d=$W/o_$1_$2_$3
  extra=""; [ "$2" != "-" ] && extra="--vram_budget=$2"
  $B train $W/bit.yaml --stream=$1 $extra --stream_compress=$3 --output_dir=$d > $d.log 2>&1; rc=$?
  echo "train stream=$1 budget=$2 compress=$3 rc=$rc sig=$(bit_sig $d) | $(grep -m1 '^plan:' $d.log | cut -c1-150)"
  [ $rc -ne 0 ] && tail -3 $d.log
done
: > $OUT/rows.jsonl
row() {  # MODEL SEQ STREAM QUANT [ARGS...]
  local m=$1 s=$2 st=$3 q=$4; shift 4
  local line
  line=$($B bench --preset $m --seq $s --stream $st --quant $q --steps ${STEPS:-5} --warmup 2 --device cuda --json "$@" 2>$W/err)
  if [ -n "$line" ]; then echo "$line" >> $OUT/rows.jsonl; else echo "{\"model\":\"$m\",\"seq\":$s,\"error\":\"$(tail -c 200 $W/err | tr '\"\n' "' ")\"}" >> $OUT/rows.jsonl; fi
}
for r in "qwen2.5-0.5b 2048" "qwen2.5-1.5b 2048" "qwen2.5-0.5b 512" "qwen2.5-3b 2048"; do
  set -- $r
  for q in none code12; do row $1 $2 ram $q; done
done
for q in none code12; do row llama3-8b 4096 ram $q --vram-budget 4GiB; done
for r in "qwen2.5-1.5b 2048" "qwen2.5-0.5b 512"; do
  set -- $r
  for q in none code12; do row $1 $2 off $q; done
done
python3 - $OUT/rows.jsonl <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for r in rows:
    if "error" in r:
        print("ERROR", r); continue
    gb = r["bytes_streamed_per_step"] / 1e9
    link = r.get("h2d_pinned_gbps") or 0
    floor = 1e3 * gb / link if link else 0
    print("%-13s %5d %-4s %-6s step %7.1f ms  tok/s %7.0f  streamed %6.2f GB  link %4.1f GB/s  floor %6.1f ms  loss %s  resident %s" % (
        r["model"], r["seq"], r["stream"], r["quant"], r["step_ms"], r["tok_s"], gb, link, floor,
        r.get("loss_last_exact"), r.get("resident_layers")))
PY
