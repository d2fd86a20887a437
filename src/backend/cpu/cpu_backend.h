// The CPU reference backend: plain loops (OpenMP) + OpenBLAS sgemm; all math in f32.
// "Streams" are synchronous (ops run when called), events are always complete.
#pragma once

#include <memory>

#include "backend/backend.h"

namespace st {

StatusOr<std::unique_ptr<Backend>> make_cpu_backend(const BackendOptions& opts);

}  // namespace st
