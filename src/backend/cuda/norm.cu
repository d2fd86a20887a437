// RMSNorm forward/backward: one block per row, f32 math, fixed-tree block reductions
// (deterministic: the reduction order depends only on the row length and block size).
#include <algorithm>
#include <initializer_list>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/ops.h"
#include "backend/cuda/vec.cuh"

namespace st::cuda {
namespace {

int row_threads(int64_t n) { return n >= 1024 ? 256 : (n >= 256 ? 128 : 64); }

__global__ void rmsnorm_kernel(void* y, DType yt, float* rstd_out, const void* x, DType xt, const void* w,
                               DType wt, int64_t n, float eps) {
  __shared__ float red[32];
  const int64_t base = blockIdx.x * n;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = ld(x, xt, base + i);
    ss += v * v;
  }
  ss = block_sum(ss, red);
  const float rstd = 1.0f / sqrtf(ss / static_cast<float>(n) + eps);
  if (threadIdx.x == 0) rstd_out[blockIdx.x] = rstd;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    st_elem(y, yt, base + i, ld(x, xt, base + i) * rstd * ld(w, wt, i));
}

// dx = rstd*w*dy - x * rstd^3 * mean(dy*w*x)
__global__ void rmsnorm_bwd_kernel(void* dx, DType dxt, const void* dy, DType dyt, const void* x, DType xt,
                                   const void* w, DType wt, const float* rstd_in, int64_t n) {
  __shared__ float red[32];
  const int64_t base = blockIdx.x * n;
  float dot = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    dot += ld(dy, dyt, base + i) * ld(w, wt, i) * ld(x, xt, base + i);
  dot = block_sum(dot, red);
  const float r = rstd_in[blockIdx.x];
  const float c = r * r * r * dot / static_cast<float>(n);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    st_elem(dx, dxt, base + i, r * ld(w, wt, i) * ld(dy, dyt, base + i) - ld(x, xt, base + i) * c);
}

// ---- 16-byte vector paths: x, y/dy/dx and w all bf16 (or all f32), n % 8 == 0, aligned rows ----
template <class T>
__global__ void vrmsnorm_kernel(T* y, float* rstd_out, const T* x, const T* w, int64_t n, float eps) {
  __shared__ float red[32];
  const T* xr = x + blockIdx.x * n;
  T* yr = y + blockIdx.x * n;
  const int64_t nv = n / 8;
  float ss = 0.0f;
  for (int64_t v = threadIdx.x; v < nv; v += blockDim.x) {
    float f[8];
    load8(xr + v * 8, f);
#pragma unroll
    for (int k = 0; k < 8; ++k) ss += f[k] * f[k];
  }
  ss = block_sum(ss, red);
  const float rstd = 1.0f / sqrtf(ss / static_cast<float>(n) + eps);
  if (threadIdx.x == 0) rstd_out[blockIdx.x] = rstd;
  for (int64_t v = threadIdx.x; v < nv; v += blockDim.x) {
    float f[8], g[8];
    load8(xr + v * 8, f);
    load8(w + v * 8, g);
#pragma unroll
    for (int k = 0; k < 8; ++k) f[k] = f[k] * rstd * g[k];
    store8(yr + v * 8, f);
  }
}

// The value a store to T and a load back give (rounding to bf16; f32 unchanged).
__device__ __forceinline__ float through(float v, const __nv_bfloat16*) { return __bfloat162float(__float2bfloat16_rn(v)); }
__device__ __forceinline__ float through(float v, const float*) { return v; }

// res (may be null): dx = rnd(rnd(norm gradient) + res), the bits of the backward followed by add.
template <class T>
__global__ void vrmsnorm_bwd_kernel(T* dx, const T* dy, const T* x, const T* w, const float* rstd_in, int64_t n,
                                    const T* res) {
  __shared__ float red[32];
  const int64_t off = blockIdx.x * n, nv = n / 8;
  float dot = 0.0f;
  for (int64_t v = threadIdx.x; v < nv; v += blockDim.x) {
    float fd[8], fw[8], fx[8];
    load8(dy + off + v * 8, fd);
    load8(w + v * 8, fw);
    load8(x + off + v * 8, fx);
#pragma unroll
    for (int k = 0; k < 8; ++k) dot += fd[k] * fw[k] * fx[k];
  }
  dot = block_sum(dot, red);
  const float r = rstd_in[blockIdx.x];
  const float c = r * r * r * dot / static_cast<float>(n);
  for (int64_t v = threadIdx.x; v < nv; v += blockDim.x) {
    float fd[8], fw[8], fx[8];
    load8(dy + off + v * 8, fd);
    load8(w + v * 8, fw);
    load8(x + off + v * 8, fx);
#pragma unroll
    for (int k = 0; k < 8; ++k) fd[k] = r * fw[k] * fd[k] - fx[k] * c;
    if (res != nullptr) {
      float fr[8];
      load8(res + off + v * 8, fr);
#pragma unroll
      for (int k = 0; k < 8; ++k) fd[k] = through(fd[k], dx) + fr[k];
    }
    store8(dx + off + v * 8, fd);
  }
}

// One warp per 256 elements of the row, 32..256 threads.
int vec_threads(int64_t n) {
  const int64_t w = (n / 8 + 31) / 32;
  return static_cast<int>(std::min<int64_t>(8, std::max<int64_t>(1, w)) * 32);
}

bool vec_ok(int64_t n, std::initializer_list<const Tensor*> ts) {
  if (n % 8 != 0) return false;
  const DType t = (*ts.begin())->dtype;
  if (!vec_dtype(t)) return false;
  for (const Tensor* x : ts)
    if (x->dtype != t || !aligned16(x->data)) return false;
  return true;
}

}  // namespace

void launch_rmsnorm(Tensor y, Tensor rstd, Tensor x, Tensor w, float eps, cudaStream_t s) {
  const int64_t rows = x.rows(), n = x.cols();
  if (rows == 0) return;
  if (vec_ok(n, {&x, &y, &w})) {
    if (x.dtype == DType::kBF16)
      vrmsnorm_kernel<<<static_cast<unsigned>(rows), vec_threads(n), 0, s>>>(
          y.ptr<__nv_bfloat16>(), rstd.ptr<float>(), x.ptr<__nv_bfloat16>(), w.ptr<__nv_bfloat16>(), n, eps);
    else
      vrmsnorm_kernel<<<static_cast<unsigned>(rows), vec_threads(n), 0, s>>>(y.ptr<float>(), rstd.ptr<float>(),
                                                                               x.ptr<float>(), w.ptr<float>(), n, eps);
    CUDA_CHECK_LAUNCH();
    return;
  }
  rmsnorm_kernel<<<static_cast<unsigned>(rows), row_threads(n), 0, s>>>(y.data, y.dtype, rstd.ptr<float>(), x.data,
                                                                         x.dtype, w.data, w.dtype, n, eps);
  CUDA_CHECK_LAUNCH();
}

void launch_rmsnorm_backward(Tensor dx, Tensor dy, Tensor x, Tensor w, Tensor rstd, cudaStream_t s, Tensor res) {
  const int64_t rows = x.rows(), n = x.cols();
  if (rows == 0) return;
  const bool has_res = !res.empty();
  if (vec_ok(n, {&x, &dx, &dy, &w}) && (!has_res || (res.dtype == dx.dtype && aligned16(res.data)))) {
    using bf = __nv_bfloat16;
    if (x.dtype == DType::kBF16)
      vrmsnorm_bwd_kernel<<<static_cast<unsigned>(rows), vec_threads(n), 0, s>>>(
          dx.ptr<bf>(), dy.ptr<bf>(), x.ptr<bf>(), w.ptr<bf>(), rstd.ptr<float>(), n, has_res ? res.ptr<bf>() : nullptr);
    else
      vrmsnorm_bwd_kernel<<<static_cast<unsigned>(rows), vec_threads(n), 0, s>>>(
          dx.ptr<float>(), dy.ptr<float>(), x.ptr<float>(), w.ptr<float>(), rstd.ptr<float>(), n,
          has_res ? res.ptr<float>() : nullptr);
    CUDA_CHECK_LAUNCH();
    return;
  }
  if (has_res) {  // the generic kernel, then the add
    launch_rmsnorm_backward(dx, dy, x, w, rstd, s);
    launch_add(dx, dx, res, s);
    return;
  }
  rmsnorm_bwd_kernel<<<static_cast<unsigned>(rows), row_threads(n), 0, s>>>(
      dx.data, dx.dtype, dy.data, dy.dtype, x.data, x.dtype, w.data, w.dtype, rstd.ptr<float>(), n);
  CUDA_CHECK_LAUNCH();
}

}  // namespace st::cuda
