// A quick measure of the device's two speeds -- host->device link and bf16 GEMM -- for the
// planner's time estimates (stream/planner.h Note [host extras plan]). ~10 ms on the H200; the
// bench's ceilings (cli/bench_device.h) are the careful versions of the same two figures.
#pragma once

#include "backend/backend.h"

namespace st {

struct DeviceSpeed {
  double link_gbps = 0;    // pinned host->device, GB/s (1e9); 0: unknown
  double gemm_tflops = 0;  // bf16 GEMM 4096^3 through Backend::gemm; 0: unknown
};

// Zeros (unknown) on the CPU backend or when a buffer cannot be had: callers then plan without
// time estimates.
DeviceSpeed probe_device_speed(Backend* be);

}  // namespace st
