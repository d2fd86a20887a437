// Opt-in op-level profiler of the CUDA backend (env STREAMTUNE_PROFILE=1). When on, every backend
// op is bracketed by timing events on the compute stream and by a host clock; per op kind and per
// (kind, shape) the device milliseconds, host milliseconds spent inside the call and call counts
// are accumulated. When off, an op pays one branch. Plain C++ header: callers need no CUDA headers.
#pragma once

#include <string>

namespace st::cuda {

bool profile_enabled();
// Drops what was collected so far (e.g. after warm-up steps).
void profile_reset();
// Table of what was collected since the last reset, per step (`steps` >= 1). `step_wall_ms` is the
// caller's measured step time (0 if unknown): the report prints the op-time sum against it.
std::string profile_report(double steps, double step_wall_ms);

}  // namespace st::cuda
