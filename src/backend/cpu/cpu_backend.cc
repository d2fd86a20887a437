// Placeholder so the skeleton links; replaced by the CPU backend implementation.
#include "backend/cpu/cpu_backend.h"

namespace st {
StatusOr<std::unique_ptr<Backend>> make_cpu_backend(const BackendOptions&) {
  return Unimplemented("CPU backend not built yet");
}
}  // namespace st
