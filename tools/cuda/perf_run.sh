#!/usr/bin/env bash
# Perf pass in ONE device call: GPU parity tests, then `streamtune bench` rows plain (tok/s) and
# with STREAMTUNE_PROFILE=1 (op breakdown on stderr). Binaries and host libs come from .devbin/
# (stage: tools/cuda/perf_run.sh stage BUILD_DIR, here on the dev box; carry .devbin).
# cuDNN (libcudnn.so.9 + the engines/graph libraries it dlopens, ~500 MiB) and NVRTC are NOT staged:
# the device's own are used (system cuDNN; CUDNN_LIB_DIR=dir puts another first, e.g. the torch
# venv's .../site-packages/nvidia/cudnn/lib). Where cuDNN cannot start, attention keeps its own kernels.
#   RESIDENT="name:seq ..." STREAMED="name:seq ..." PROFILE_ROWS="name:seq ..." tools/cuda/perf_run.sh run
set -uo pipefail
case "${1:-}" in
  stage)
    b=${2:?build dir}
    grep -q '^/.devbin/' .git/info/exclude || echo '/.devbin/' >> .git/info/exclude
    rm -rf .devbin && mkdir -p .devbin/lib
    cp "$b"/streamtune "$b"/backend_cuda_*_gputest .devbin/
    for l in $(ldd "$b"/streamtune "$b"/backend_cuda_cuda_ops_gputest | awk '/=> \//{print $3}' | sort -u |
               grep -E 'openblas|gfortran|quadmath|gomp|yaml|png|gtest|libz\.'); do cp -L "$l" .devbin/lib/; done
    strip .devbin/streamtune .devbin/backend_cuda_*
    # The working tree travels with a 64 MiB cap: ship the binaries and libs xz-packed (61 -> 8 MiB).
    tar cJf /tmp/st_pack.tar.xz -C .devbin . && rm -rf .devbin && mkdir .devbin && mv /tmp/st_pack.tar.xz .devbin/pack.tar.xz
    du -sh .devbin ;;
  run)
    [ -f .devbin/pack.tar.xz ] && tar xJf .devbin/pack.tar.xz -C .devbin
    export LD_LIBRARY_PATH=$PWD/.devbin/lib:${CUDNN_LIB_DIR:+$CUDNN_LIB_DIR:}/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
    out=${OUT:-/tmp}
    B=.devbin/streamtune
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
    echo "cudnn/nvrtc: $(ldd .devbin/streamtune | grep -E 'libcudnn|libnvrtc' | awk '{print $1 " -> " $3}' | tr '\n' ' ')"
    for t in cuda_ops cuda_attention attention_tc attention_cudnn; do
      .devbin/backend_cuda_${t}_gputest --gtest_brief=1 --gtest_filter=-*TimingTable* >"$out/test_$t.log" 2>&1
      echo "gputest $t rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_$t.log" | tr '\n' ' ')"
    done
    for row in ${RESIDENT:-}; do
      $B bench --preset "${row%%:*}" --seq "${row##*:}" --steps 5 --warmup 2 --stream off --device cuda --json \
        --no-ceilings >>"$out/bench.jsonl" 2>>"$out/bench.err" || echo "bench $row failed"
    done
    for row in ${STREAMED:-}; do
      $B bench --preset "${row%%:*}" --seq "${row##*:}" --steps 5 --warmup 2 --stream ram --device cuda --json \
        >>"$out/bench.jsonl" 2>>"$out/bench.err" || echo "bench $row (ram) failed"
    done
    for row in ${PROFILE_ROWS:-}; do
      STREAMTUNE_PROFILE=1 $B bench --preset "${row%%:*}" --seq "${row##*:}" --steps 3 --warmup 1 --stream off \
        --device cuda --json --no-ceilings >/dev/null 2>>"$out/profile.txt" || echo "profile $row failed"
    done
    python3 - "$out/bench.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print("%-14s seq %5d %-4s tok/s %8.0f step %8.2f ms  exposed %s  xfer floor %s" % (r.get("model"), r.get("seq"),
          r.get("stream"), r.get("tok_s", 0), r.get("step_ms", 0), r.get("exposed_copy_ms"), r.get("transfer_floor_ms")))
PY
    cat "$out/profile.txt" 2>/dev/null | head -150 ;;
  *) echo "usage: $0 stage BUILD_DIR | run" >&2; exit 2 ;;
esac
