// Fused softmax cross-entropy over a chunk of logits: one block per row computes the row's
// log-sum-exp, writes the gradient in place and its loss to scratch[row]; a single block then
// adds the row losses in index order (deterministic, no atomics).
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/ops.h"
#include "backend/cuda/vec.cuh"

namespace st::cuda {
namespace {

constexpr int kIgnoreIndex = -100;
constexpr int kThreads = 256;

__global__ void ce_row_kernel(void* logits, DType lt, float* row_loss, const int32_t* labels, int64_t V,
                              float grad_scale) {
  __shared__ float red[32];
  const int64_t base = blockIdx.x * V;
  const int label = labels[blockIdx.x];
  if (label == kIgnoreIndex || label < 0 || label >= V) {
    // Ignored (or out-of-range) rows: zero gradient, no loss.
    for (int64_t i = threadIdx.x; i < V; i += blockDim.x) st_elem(logits, lt, base + i, 0.0f);
    if (threadIdx.x == 0) row_loss[blockIdx.x] = 0.0f;
    return;
  }
  float mx = -INFINITY;
  for (int64_t i = threadIdx.x; i < V; i += blockDim.x) mx = fmaxf(mx, ld(logits, lt, base + i));
  mx = block_max(mx, red);
  float se = 0.0f;
  for (int64_t i = threadIdx.x; i < V; i += blockDim.x) se += expf(ld(logits, lt, base + i) - mx);
  se = block_sum(se, red);
  const float lse = mx + logf(se);
  const float target = ld(logits, lt, base + label);
  __syncthreads();  // every thread has read logits[label] before it is overwritten
  for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
    const float p = expf(ld(logits, lt, base + i) - lse);
    st_elem(logits, lt, base + i, grad_scale * (p - (i == label ? 1.0f : 0.0f)));
  }
  if (threadIdx.x == 0) row_loss[blockIdx.x] = lse - target;
}

__global__ void ce_sum_kernel(float* loss_sum, const float* row_loss, int64_t rows) {
  __shared__ float red[32];
  float acc = 0.0f;
  for (int64_t i = threadIdx.x; i < rows; i += blockDim.x) acc += row_loss[i];
  acc = block_sum(acc, red);
  if (threadIdx.x == 0) loss_sum[0] += acc;
}

// ---- bf16 fast path: 16-byte loads, one pass for max and sum (online softmax), 512 threads ----
// Used when the logits are bf16, V % 8 == 0 and the chunk is 16-byte aligned (every real vocab).
constexpr int kVecThreads = 512;

__device__ __forceinline__ void lse_combine(float& m, float& s, float m2, float s2) {
  const float mx = fmaxf(m, m2);
  if (mx == -INFINITY) {  // both empty (or all -inf): keep (−inf, 0)
    m = mx;
    s = 0.0f;
    return;
  }
  s = s * expf(m - mx) + s2 * expf(m2 - mx);
  m = mx;
}

__global__ void ce_row_bf16_kernel(__nv_bfloat16* logits, float* row_loss, const int32_t* labels, int64_t V,
                                   float grad_scale) {
  __shared__ float red_m[32], red_s[32];
  __nv_bfloat16* row = logits + blockIdx.x * V;
  const int label = labels[blockIdx.x];
  const int64_t nv = V / 8;
  if (label == kIgnoreIndex || label < 0 || label >= V) {
    const float z[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t v = threadIdx.x; v < nv; v += blockDim.x) store8(row + v * 8, z);
    if (threadIdx.x == 0) row_loss[blockIdx.x] = 0.0f;
    return;
  }
  float m = -INFINITY, s = 0.0f;
  for (int64_t v = threadIdx.x; v < nv; v += blockDim.x) {
    float f[8];
    load8(row + v * 8, f);
    float lm = f[0];
#pragma unroll
    for (int k = 1; k < 8; ++k) lm = fmaxf(lm, f[k]);
    if (lm > m) {
      s *= expf(m - lm);
      m = lm;
    }
#pragma unroll
    for (int k = 0; k < 8; ++k) s += expf(f[k] - m);
  }
  // Fixed-tree reduction of (max, sum) pairs: warp shuffles, then warp 0 over the warps.
  for (int o = 16; o > 0; o >>= 1) lse_combine(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  if (lane == 0) {
    red_m[warp] = m;
    red_s[warp] = s;
  }
  __syncthreads();
  m = lane < nw ? red_m[lane] : -INFINITY;
  s = lane < nw ? red_s[lane] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) lse_combine(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
  const float lse = m + logf(s);
  const float target = __bfloat162float(row[label]);
  __syncthreads();  // every thread has read logits[label] before it is overwritten
  for (int64_t v = threadIdx.x; v < nv; v += blockDim.x) {
    float f[8];
    load8(row + v * 8, f);
#pragma unroll
    for (int k = 0; k < 8; ++k) f[k] = grad_scale * (expf(f[k] - lse) - (v * 8 + k == label ? 1.0f : 0.0f));
    store8(row + v * 8, f);
  }
  if (threadIdx.x == 0) row_loss[blockIdx.x] = lse - target;
}

}  // namespace

void launch_cross_entropy(Tensor logits, Tensor loss_sum, const int32_t* labels, float grad_scale, float* scratch,
                          cudaStream_t s) {
  const int64_t rows = logits.rows(), V = logits.cols();
  if (rows == 0) return;
  if (logits.dtype == DType::kBF16 && V % 8 == 0 && aligned16(logits.data)) {
    ce_row_bf16_kernel<<<static_cast<unsigned>(rows), kVecThreads, 0, s>>>(logits.ptr<__nv_bfloat16>(), scratch,
                                                                           labels, V, grad_scale);
  } else {
    ce_row_kernel<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(logits.data, logits.dtype, scratch, labels, V,
                                                                  grad_scale);
  }
  CUDA_CHECK_LAUNCH();
  ce_sum_kernel<<<1, 1024, 0, s>>>(loss_sum.ptr<float>(), scratch, rows);
  CUDA_CHECK_LAUNCH();
}

}  // namespace st::cuda
