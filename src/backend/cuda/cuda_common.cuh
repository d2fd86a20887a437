// Shared helpers for the CUDA backend's kernels: the CUDA_CHECK macro, dtype-generic element
// loads/stores (f32 / bf16 / f16 storage, f32 math) and deterministic warp/block reductions.
// Internal to src/backend/cuda: model code never includes this.
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/graph_recorder.h"
#include "core/dtype.h"

namespace st::cuda {

// An experiment switch (A/B benches): whether the environment sets `name` to `value`; when it
// does, `effect` is printed once to stderr. Callers keep the answer in a function-local static.
inline bool env_switch(const char* name, const char* value, const char* effect) {
  const char* e = std::getenv(name);
  const bool on = e != nullptr && std::strcmp(e, value) == 0;
  if (on) std::fprintf(stderr, "streamtune: %s=%s: %s\n", name, value, effect);
  return on;
}

[[noreturn]] inline void cuda_fail(const char* expr, const char* file, int line, const char* what) {
  int dev = -1;
  cudaGetDevice(&dev);
  std::fprintf(stderr, "CUDA_CHECK failed: %s\n  at %s:%d on device %d: %s%s\n", expr, file, line, dev, what,
               plan_hint());
  std::abort();
}

}  // namespace st::cuda

// Unrecoverable CUDA / cuBLASLt failures: print expression, file:line and device, then abort.
#define CUDA_CHECK(expr)                                                                   \
  do {                                                                                     \
    cudaError_t st_ce_ = (expr);                                                           \
    if (st_ce_ != cudaSuccess)                                                             \
      ::st::cuda::cuda_fail(#expr, __FILE__, __LINE__, cudaGetErrorString(st_ce_));        \
  } while (0)

#define CUBLAS_CHECK(expr)                                                                 \
  do {                                                                                     \
    cublasStatus_t st_cb_ = (expr);                                                        \
    if (st_cb_ != CUBLAS_STATUS_SUCCESS)                                                   \
      ::st::cuda::cuda_fail(#expr, __FILE__, __LINE__, cublasLt_status_name(st_cb_));      \
  } while (0)

// After each launch: catches bad configurations immediately (does not synchronize).
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

namespace st::cuda {

inline const char* cublasLt_status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "cuBLAS error";
  }
}

// Element access by runtime dtype. The branch is uniform across a launch, so it costs little in
// these memory-bound kernels and keeps one kernel per op instead of one per dtype combination.
__device__ __forceinline__ float ld(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::kBF16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case DType::kF16: return __half2float(static_cast<const __half*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

__device__ __forceinline__ void st_elem(void* p, DType t, int64_t i, float v) {
  switch (t) {
    case DType::kBF16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
    case DType::kF16: static_cast<__half*>(p)[i] = __float2half_rn(v); break;
    default: static_cast<float*>(p)[i] = v; break;
  }
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block in a fixed tree (deterministic); every thread gets the result.
// `red` is __shared__ float[32]. blockDim.x must be a multiple of 32.
__device__ __forceinline__ float block_sum(float v, float* red) {
  v = warp_sum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  __syncthreads();  // red may be reused by a previous call
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float s = lane < nw ? red[lane] : 0.0f;
  return warp_sum(s);
}

__device__ __forceinline__ float block_max(float v, float* red) {
  v = warp_max(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float s = lane < nw ? red[lane] : -INFINITY;
  return warp_max(s);
}

inline unsigned grid_for(int64_t n, int threads, int64_t max_blocks = 65535LL * 16) {
  int64_t b = (n + threads - 1) / threads;
  if (b < 1) b = 1;
  return static_cast<unsigned>(b < max_blocks ? b : max_blocks);
}

}  // namespace st::cuda
