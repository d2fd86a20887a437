#!/usr/bin/env bash
# Builds the CUDA parity tests and the benchmark for sm_90 and stages them (plus the host libs the
# device image lacks: OpenBLAS, gfortran, quadmath, gomp) in .devbin/, which the device tool carries.
#   tools/cuda/device_run.sh stage      # here, on the dev box
#   tools/cuda/device_run.sh run        # on the device machine (run tool, carry [".devbin"])
set -euo pipefail
case "${1:-}" in
  stage)
    cmake -S . -B build-cuda -DCMAKE_CUDA_ARCHITECTURES=90 -DSTREAMTUNE_WERROR=ON >/dev/null
    cmake --build build-cuda -j2 --target backend_cuda_cuda_ops_gputest backend_cuda_cuda_attention_gputest cuda_bench
    grep -q '^/.devbin/' .git/info/exclude || echo '/.devbin/' >> .git/info/exclude
    rm -rf .devbin && mkdir -p .devbin/lib
    cp build-cuda/backend_cuda_cuda_ops_gputest build-cuda/backend_cuda_cuda_attention_gputest build-cuda/cuda_bench .devbin/
    for l in libgomp.so.1 libopenblas.so.0 libgfortran.so.5 libquadmath.so.0; do cp -L /lib/x86_64-linux-gnu/$l .devbin/lib/; done
    du -sh .devbin ;;
  run)
    export LD_LIBRARY_PATH=$PWD/.devbin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
    out=${OUT:-/tmp}
    .devbin/backend_cuda_cuda_ops_gputest --gtest_brief=1 2>&1 | tee "$out/ops.log" | tail -20
    .devbin/backend_cuda_cuda_attention_gputest --gtest_brief=1 2>&1 | tee "$out/attn.log" | tail -20
    .devbin/cuda_bench 2>&1 | tee "$out/bench.log" ;;
  *) echo "usage: $0 stage|run" >&2; exit 2 ;;
esac
