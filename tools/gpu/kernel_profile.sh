#!/bin/bash
# Kernel times of one eager resident step under Nsight Compute (gpu__time_duration only, caches and
# clocks left alone): per kernel summed ($OUT/ncu_<model>.csv) and per launch in order ($OUT/seq.csv),
# plus every GEMM shape's cuBLASLt candidates timed (STREAMTUNE_GEMM_TUNE=log, $OUT/tune.log).
# bench/RESULTS.md session 21 calls 4-5. ROW="qwen2.5-3b 2048" by default; .devbin/pack.tar.xz as usual.
set -u
tar xJf .devbin/pack.tar.xz -C .devbin
export LD_LIBRARY_PATH=$PWD/.devbin/lib
B=$PWD/.devbin/streamtune
set -- ${ROW:-qwen2.5-3b 2048}
timeout 400 /usr/local/cuda/bin/ncu --metrics gpu__time_duration.sum --cache-control none --clock-control none \
  --csv --print-summary per-kernel $B bench --preset $1 --seq $2 --steps 1 --warmup 0 --stream off --no-ceilings > $OUT/ncu_$1.csv 2> $OUT/ncu_$1.err
echo "per-kernel rc=$?"
timeout 200 /usr/local/cuda/bin/ncu --metrics gpu__time_duration.sum --cache-control none --clock-control none \
  --csv --print-summary none --launch-count 700 $B bench --preset $1 --seq $2 --steps 1 --warmup 0 --stream off --no-ceilings > $OUT/seq.csv 2> $OUT/seq.err
echo "per-launch rc=$?"
STREAMTUNE_GEMM_TUNE=log $B bench --preset $1 --seq $2 --steps 4 --warmup 2 --stream off --no-ceilings > $OUT/tune.log 2>&1
grep -E "tok/s" $OUT/tune.log
$B bench --preset $1 --seq $2 --steps 4 --warmup 2 --stream off --no-ceilings 2>&1 | grep -E "tok/s"
