// The device's two speeds -- host->device link and bf16 GEMM -- measured through the Backend: the
// bench's ceilings (cli/bench_device.h, long runs) and the planner's time estimates (stream/
// planner.h Note [step estimate]: probe_device_speed, ~30 ms on the H200) share these timers.
#pragma once

#include "backend/backend.h"

namespace st {

// GB/s (1e9) of one `bytes` host->device copy from pinned memory on the copy stream, median of
// `iters` after a warm-up copy.
StatusOr<double> measure_h2d_gbps(Backend* be, size_t bytes, int iters);
// TFLOP/s of an n x n x n GEMM through Backend::gemm (x W^T, as the layers; f32 accumulate) whose
// two operands are `host` (n x n elements of dtype), median of `iters` after two warm-ups and
// then more for `warmup_s` seconds.
StatusOr<double> measure_gemm_tflops_from(Backend* be, const void* host, DType dtype, int64_t n, int iters,
                                          double warmup_s = 0);

struct DeviceSpeed {
  double link_gbps = 0;    // pinned host->device, GB/s (1e9); 0: unknown
  double gemm_tflops = 0;  // bf16 GEMM 4096^3 through Backend::gemm; 0: unknown
};

// Zeros (unknown) on the CPU backend or when a buffer cannot be had: callers then plan without
// time estimates.
DeviceSpeed probe_device_speed(Backend* be);

}  // namespace st
