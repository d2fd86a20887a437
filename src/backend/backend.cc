#include "backend/backend.h"

#include "backend/cpu/cpu_backend.h"
#ifdef STREAMTUNE_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace st {

const char* device_kind_name(DeviceKind k) { return k == DeviceKind::kCpu ? "cpu" : "cuda"; }

StatusOr<std::unique_ptr<Backend>> make_backend(DeviceKind kind, const BackendOptions& opts) {
  if (kind == DeviceKind::kCpu) return make_cpu_backend(opts);
#ifdef STREAMTUNE_HAVE_CUDA
  return make_cuda_backend(opts);
#else
  return Unimplemented("this build of streamtune has no CUDA backend (nvcc was not found at build time)");
#endif
}

bool cuda_available() {
#ifdef STREAMTUNE_HAVE_CUDA
  return cuda_device_count() > 0;
#else
  return false;
#endif
}

std::string compiled_backends() {
#ifdef STREAMTUNE_HAVE_CUDA
  std::string archs = ST_CUDA_ARCHS;
  std::string pretty;
  size_t start = 0;
  while (start <= archs.size()) {
    size_t end = archs.find(',', start);
    if (end == std::string::npos) end = archs.size();
    if (end > start) pretty += (pretty.empty() ? "sm_" : " sm_") + archs.substr(start, end - start);
    start = end + 1;
  }
  return "cpu, cuda (" + pretty + ")";
#else
  return "cpu";
#endif
}

}  // namespace st
