// The CUDA backend (cuBLASLt GEMMs, fused kernels, fused attention). Built only with nvcc.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"

namespace st {

StatusOr<std::unique_ptr<Backend>> make_cuda_backend(const BackendOptions& opts);
int cuda_device_count();  // 0 when no driver / no GPU
// Compute capability and name of device `dev` (< cuda_device_count()).
void cuda_device_info(int dev, int* major, int* minor, std::string* name);

}  // namespace st
