#include "backend/backend.h"

#include <cstdio>
#include <string>

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

bool cuda_capability_supported(int major, int /*minor*/) { return major >= 8; }

bool cuda_available() {
#ifdef STREAMTUNE_HAVE_CUDA
  const int n = cuda_device_count();
  std::string old;  // the visible GPUs too old to use, for the note
  for (int d = 0; d < n; ++d) {
    int major = 0, minor = 0;
    std::string name;
    cuda_device_info(d, &major, &minor, &name);
    if (cuda_capability_supported(major, minor)) return true;
    old += (old.empty() ? "" : ", ") + name + " (compute capability " + std::to_string(major) + "." +
           std::to_string(minor) + ")";
  }
  static bool said = false;
  if (!old.empty() && !said) {
    said = true;
    std::fprintf(stderr, "streamtune: note: no usable GPU: %s; the CUDA kernels need compute capability 8.0 or "
                 "newer, so device: auto runs on the CPU\n", old.c_str());
  }
  return false;
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
