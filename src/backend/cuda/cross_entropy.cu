// Fused softmax cross-entropy over a chunk of logits: one block per row computes the row's
// log-sum-exp, writes the gradient in place and its loss to scratch[row]; a single block then
// adds the row losses in index order (deterministic, no atomics).
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/ops.h"

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

}  // namespace

void launch_cross_entropy(Tensor logits, Tensor loss_sum, const int32_t* labels, float grad_scale, float* scratch,
                          cudaStream_t s) {
  const int64_t rows = logits.rows(), V = logits.cols();
  if (rows == 0) return;
  ce_row_kernel<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(logits.data, logits.dtype, scratch, labels, V,
                                                                  grad_scale);
  CUDA_CHECK_LAUNCH();
  ce_sum_kernel<<<1, 1024, 0, s>>>(loss_sum.ptr<float>(), scratch, rows);
  CUDA_CHECK_LAUNCH();
}

}  // namespace st::cuda
