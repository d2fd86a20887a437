// RMSNorm forward/backward: one block per row, f32 math, fixed-tree block reductions
// (deterministic: the reduction order depends only on the row length and block size).
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/ops.h"

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

}  // namespace

void launch_rmsnorm(Tensor y, Tensor rstd, Tensor x, Tensor w, float eps, cudaStream_t s) {
  const int64_t rows = x.rows(), n = x.cols();
  if (rows == 0) return;
  rmsnorm_kernel<<<static_cast<unsigned>(rows), row_threads(n), 0, s>>>(y.data, y.dtype, rstd.ptr<float>(), x.data,
                                                                         x.dtype, w.data, w.dtype, n, eps);
  CUDA_CHECK_LAUNCH();
}

void launch_rmsnorm_backward(Tensor dx, Tensor dy, Tensor x, Tensor w, Tensor rstd, cudaStream_t s) {
  const int64_t rows = x.rows(), n = x.cols();
  if (rows == 0) return;
  rmsnorm_bwd_kernel<<<static_cast<unsigned>(rows), row_threads(n), 0, s>>>(
      dx.data, dx.dtype, dy.data, dy.dtype, x.data, x.dtype, w.data, w.dtype, rstd.ptr<float>(), n);
  CUDA_CHECK_LAUNCH();
}

}  // namespace st::cuda
