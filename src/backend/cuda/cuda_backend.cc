// Placeholder so the skeleton links; replaced by the CUDA backend implementation.
#include "backend/cuda/cuda_backend.h"

namespace st {
StatusOr<std::unique_ptr<Backend>> make_cuda_backend(const BackendOptions&) {
  return Unimplemented("CUDA backend not built yet");
}
int cuda_device_count() { return 0; }
}  // namespace st
