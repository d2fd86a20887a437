// Vocabulary-chunked cross-entropy (backend.h: ce_chunk / ce_finish; model/head.cc Note
// [vocab-chunked head]). The softmax state (m, s, target) lives in f32 per row across chunks.
//
// ce_chunk: one block per row. Pass 1 keeps a per-thread online (max, sum) pair, so the chunk is
// read once for both; the pairs meet in a fixed-shape tree (deterministic). Thread 0 folds the
// chunk into the row state. Training adds pass 2 (p = exp(l - m') in place; for C <= 16384 the row
// stays in registers between the passes, so it is read once) and rescales the acc row, skipped
// when the max did not move (factor exactly 1).
// ce_finish: one single-block kernel adds the row losses in a fixed order (no atomics), then an
// elementwise kernel (a block per row) writes dx.
#include <type_traits>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/ops.h"
#include "backend/cuda/vec.cuh"

namespace st::cuda {
namespace {

constexpr int kIgnoreIndex = -100;
constexpr int kGenericThreads = 256;
constexpr int kVecThreads = 512;
// Groups of 8 a thread keeps in registers between the passes: C <= 8 * 4 * 512 = 16384 columns.
constexpr int kCacheGroups = 4;

struct ChunkArgs {
  void* logits;
  DType lt;
  int64_t C, col0;
  float* acc;  // nullptr: inference (no p written, no acc)
  int64_t H;
  bool acc_vec;  // acc rows are float4-addressable
  float *m, *s, *target;
  const int32_t* labels;
  bool first;
};

// Folds x into a running (max, sum of exp(. - max)) pair. -inf adds nothing (never exp(-inf+inf));
// NaN poisons the sum, as it does on the CPU.
__device__ __forceinline__ void online_add(float& m, float& s, float x) {
  if (x > m) {
    s = s * expf(m - x) + 1.0f;
    m = x;
  } else if (x != -INFINITY) {
    s += expf(x - m);
  }
}

__device__ __forceinline__ void lse_combine(float& m, float& s, float m2, float s2) {
  const float mx = fmaxf(m, m2);
  if (mx == -INFINITY) {  // both empty (or all -inf): keep (-inf, 0)
    m = mx;
    s = 0.0f;
    return;
  }
  s = s * expf(m - mx) + s2 * expf(m2 - mx);
  m = mx;
}

// Every thread gets the block's (max, sum); the tree is fixed, so the result is deterministic.
// Contains __syncthreads: everything each thread read before the call is read before any thread
// writes after it.
__device__ __forceinline__ void block_lse(float& m, float& s, float* red_m, float* red_s) {
  for (int o = 16; o > 0; o >>= 1)
    lse_combine(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  if (lane == 0) {
    red_m[warp] = m;
    red_s[warp] = s;
  }
  __syncthreads();
  m = lane < nw ? red_m[lane] : -INFINITY;
  s = lane < nw ? red_s[lane] : 0.0f;
  for (int o = 16; o > 0; o >>= 1)
    lse_combine(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
}

// Folds a group of 8 into the thread's pair with one rescale per group.
__device__ __forceinline__ void fold8(float& m, float& s, const float f[8]) {
  float lm = f[0];
#pragma unroll
  for (int k = 1; k < 8; ++k) lm = fmaxf(lm, f[k]);
  if (lm > m) {
    s *= expf(m - lm);
    m = lm;
  }
#pragma unroll
  for (int k = 0; k < 8; ++k) s += f[k] == -INFINITY ? 0.0f : expf(f[k] - m);
}

__device__ __forceinline__ void exp8(float f[8], float m) {
#pragma unroll
  for (int k = 0; k < 8; ++k) f[k] = expf(f[k] - m);
}

// Reduces the threads' (max, sum) pairs and folds the chunk into the row state (thread 0 writes
// m, s, target). Returns m'. The barrier inside block_lse orders every thread's reads of the row
// state and of the logits (thread 0's target included) before any write after this call.
__device__ __forceinline__ float fold_chunk(const ChunkArgs& a, int64_t r, float m, float s, float m_old, float tgt,
                                           float* red_m, float* red_s) {
  block_lse(m, s, red_m, red_s);
  const float m_new = fmaxf(m_old, m);
  if (threadIdx.x == 0) {
    const float rescale = m_old == -INFINITY ? 0.0f : expf(m_old - m_new);
    const float chunk = s == 0.0f ? 0.0f : s * expf(m - m_new);
    const float s_old = a.first ? 0.0f : a.s[r];
    a.s[r] = s_old * rescale + chunk;
    a.m[r] = m_new;
    a.target[r] = tgt;
  }
  return m_new;
}

// acc[r,:] *= exp(m_old - m'), not on the first chunk. x * 1.0f == x bit for bit, so skipping the
// common "max unchanged" case changes nothing.
__device__ __forceinline__ void rescale_acc(const ChunkArgs& a, int64_t r, float m_old, float m_new) {
  const float rescale = m_old == -INFINITY ? 0.0f : expf(m_old - m_new);
  if (a.first || rescale == 1.0f) return;
  float* arow = a.acc + r * a.H;
  if (a.acc_vec) {
    float4* a4 = reinterpret_cast<float4*>(arow);
    for (int64_t i = threadIdx.x; i < a.H / 4; i += blockDim.x) {
      float4 x = a4[i];
      x.x *= rescale;
      x.y *= rescale;
      x.z *= rescale;
      x.w *= rescale;
      a4[i] = x;
    }
  } else {
    for (int64_t i = threadIdx.x; i < a.H; i += blockDim.x) arow[i] *= rescale;
  }
}

// T = void: any dtype, any C (scalar). T = __nv_bfloat16 / float: 16-byte groups of 8 (C % 8 == 0,
// aligned); kG > 0 keeps the thread's groups in registers between the passes (needs
// C / 8 <= kG * blockDim.x), so training reads the row from memory once.
template <class T, int kG>
__global__ void __launch_bounds__(kVecThreads) ce_chunk_kernel(ChunkArgs a) {
  __shared__ float red_m[32], red_s[32];
  const int64_t r = blockIdx.x;
  const int64_t base = r * a.C;
  const float m_old = a.first ? -INFINITY : a.m[r];
  float tgt = 0.0f;
  if (threadIdx.x == 0) {
    if (!a.first) tgt = a.target[r];
    const int64_t label = a.labels[r];
    if (label >= a.col0 && label < a.col0 + a.C) tgt = ld(a.logits, a.lt, base + (label - a.col0));
  }
  const bool train = a.acc != nullptr;
  float m = -INFINITY, s = 0.0f, m_new;
  if constexpr (std::is_void_v<T>) {
    for (int64_t i = threadIdx.x; i < a.C; i += blockDim.x) online_add(m, s, ld(a.logits, a.lt, base + i));
    m_new = fold_chunk(a, r, m, s, m_old, tgt, red_m, red_s);
    if (train)
      for (int64_t i = threadIdx.x; i < a.C; i += blockDim.x)
        st_elem(a.logits, a.lt, base + i, expf(ld(a.logits, a.lt, base + i) - m_new));
  } else if constexpr (kG > 0) {
    T* row = static_cast<T*>(a.logits) + base;
    const int64_t nv = a.C / 8;
    float f[kG][8];
#pragma unroll
    for (int g = 0; g < kG; ++g) {
      const int64_t v = threadIdx.x + static_cast<int64_t>(g) * blockDim.x;
      if (v < nv) {
        load8(row + v * 8, f[g]);
        fold8(m, s, f[g]);
      }
    }
    m_new = fold_chunk(a, r, m, s, m_old, tgt, red_m, red_s);
    if (train) {
#pragma unroll
      for (int g = 0; g < kG; ++g) {
        const int64_t v = threadIdx.x + static_cast<int64_t>(g) * blockDim.x;
        if (v < nv) {
          exp8(f[g], m_new);
          store8(row + v * 8, f[g]);
        }
      }
    }
  } else {
    T* row = static_cast<T*>(a.logits) + base;
    const int64_t nv = a.C / 8;
    for (int64_t v = threadIdx.x; v < nv; v += blockDim.x) {
      float f[8];
      load8(row + v * 8, f);
      fold8(m, s, f);
    }
    m_new = fold_chunk(a, r, m, s, m_old, tgt, red_m, red_s);
    if (train)
      for (int64_t v = threadIdx.x; v < nv; v += blockDim.x) {
        float f[8];
        load8(row + v * 8, f);
        exp8(f, m_new);
        store8(row + v * 8, f);
      }
  }
  if (train) rescale_acc(a, r, m_old, m_new);
}

// One block: fixed thread-to-row mapping and a fixed tree, so the sum is deterministic.
__global__ void ce_finish_loss_kernel(float* loss_sum, const float* m, const float* s, const float* target,
                                      const int32_t* labels, int64_t R) {
  __shared__ float red[32];
  float acc = 0.0f;
  for (int64_t r = threadIdx.x; r < R; r += blockDim.x)
    if (labels[r] != kIgnoreIndex) acc += m[r] + logf(s[r]) - target[r];
  acc = block_sum(acc, red);
  if (threadIdx.x == 0) loss_sum[0] += acc;
}

// dx[r,:] = g * (acc[r,:] / s[r] - w[r,:]) (0 for ignored rows), g = grad_scale (x row_scale[r]
// when given); a block per row.
// TD/TW = storage types for the 8-wide path (H % 8 == 0, aligned); void/void = generic.
template <class TD, class TW>
__global__ void ce_finish_dx_kernel(void* dx, DType dt, const void* w, DType wt, const float* acc, const float* s,
                                    const int32_t* labels, int64_t H, float grad_scale, const float* row_scale) {
  const int64_t r = blockIdx.x;
  const bool counted = labels[r] != kIgnoreIndex;
  if (row_scale) grad_scale *= row_scale[r];
  const float inv_s = counted ? 1.0f / s[r] : 0.0f;
  const float* arow = acc + r * H;
  if constexpr (std::is_void_v<TD>) {
    for (int64_t i = threadIdx.x; i < H; i += blockDim.x) {
      const float d = counted ? grad_scale * (arow[i] * inv_s - ld(w, wt, r * H + i)) : 0.0f;
      st_elem(dx, dt, r * H + i, d);
    }
  } else {
    TD* drow = static_cast<TD*>(dx) + r * H;
    const TW* wrow = static_cast<const TW*>(w) + r * H;
    for (int64_t v = threadIdx.x; v < H / 8; v += blockDim.x) {
      float d[8];
      if (counted) {
        float a8[8], w8[8];
        load8(arow + v * 8, a8);
        load8(wrow + v * 8, w8);
#pragma unroll
        for (int k = 0; k < 8; ++k) d[k] = grad_scale * (a8[k] * inv_s - w8[k]);
      } else {
#pragma unroll
        for (int k = 0; k < 8; ++k) d[k] = 0.0f;
      }
      store8(drow + v * 8, d);
    }
  }
}

// Threads for a block that walks `items` per row: enough warps to cover them, at most `cap`.
int row_threads(int64_t items, int cap) {
  const int64_t t = (items + 31) / 32 * 32;
  return static_cast<int>(t < 32 ? 32 : t > cap ? cap : t);
}

template <class TD, class TW>
void launch_dx(Tensor dx, Tensor w, Tensor acc, Tensor s, const int32_t* labels, float grad_scale,
               const float* row_scale, int64_t R, int64_t H, cudaStream_t st) {
  const int threads = row_threads(std::is_void_v<TD> ? H : H / 8, 256);
  ce_finish_dx_kernel<TD, TW><<<static_cast<unsigned>(R), threads, 0, st>>>(
      dx.data, dx.dtype, w.data, w.dtype, acc.ptr<float>(), s.ptr<float>(), labels, H, grad_scale, row_scale);
}

}  // namespace

void launch_ce_chunk(Tensor logits, Tensor acc, Tensor m, Tensor s, Tensor target, const int32_t* labels,
                     int64_t col0, cudaStream_t st) {
  const int64_t R = logits.rows(), C = logits.cols();
  if (R == 0 || C == 0) return;
  ChunkArgs a{};
  a.logits = logits.data;
  a.lt = logits.dtype;
  a.C = C;
  a.col0 = col0;
  a.acc = acc.empty() ? nullptr : acc.ptr<float>();
  a.H = acc.empty() ? 0 : acc.cols();
  a.acc_vec = !acc.empty() && a.H % 4 == 0 && aligned16(acc.data);
  a.m = m.ptr<float>();
  a.s = s.ptr<float>();
  a.target = target.ptr<float>();
  a.labels = labels;
  a.first = col0 == 0;
  const unsigned grid = static_cast<unsigned>(R);
  const bool vec = C % 8 == 0 && aligned16(logits.data) && vec_dtype(logits.dtype);
  if (!vec) {
    ce_chunk_kernel<void, 0><<<grid, row_threads(C, kGenericThreads), 0, st>>>(a);
  } else {
    const int threads = row_threads(C / 8, kVecThreads);
    const bool cached = C / 8 <= static_cast<int64_t>(kCacheGroups) * threads;
    const bool bf = logits.dtype == DType::kBF16;
    if (cached && bf) ce_chunk_kernel<__nv_bfloat16, kCacheGroups><<<grid, threads, 0, st>>>(a);
    else if (cached) ce_chunk_kernel<float, kCacheGroups><<<grid, threads, 0, st>>>(a);
    else if (bf) ce_chunk_kernel<__nv_bfloat16, 0><<<grid, threads, 0, st>>>(a);
    else ce_chunk_kernel<float, 0><<<grid, threads, 0, st>>>(a);
  }
  CUDA_CHECK_LAUNCH();
}

void launch_ce_finish(Tensor dx, Tensor loss_sum, Tensor acc, Tensor m, Tensor s, Tensor target, Tensor w_label,
                      const int32_t* labels, float grad_scale, const float* row_scale, cudaStream_t st) {
  const int64_t R = m.numel();
  if (R == 0) return;
  ce_finish_loss_kernel<<<1, 1024, 0, st>>>(loss_sum.ptr<float>(), m.ptr<float>(), s.ptr<float>(),
                                            target.ptr<float>(), labels, R);
  CUDA_CHECK_LAUNCH();
  if (dx.empty()) return;
  const int64_t H = dx.cols();
  if (H == 0) return;
  const bool vec = H % 8 == 0 && aligned16(dx.data, w_label.data, acc.data) && vec_dtype(dx.dtype) &&
                   vec_dtype(w_label.dtype);
  const bool dbf = dx.dtype == DType::kBF16, wbf = w_label.dtype == DType::kBF16;
  if (!vec) {
    launch_dx<void, void>(dx, w_label, acc, s, labels, grad_scale, row_scale, R, H, st);
  } else if (dbf && wbf) {
    launch_dx<__nv_bfloat16, __nv_bfloat16>(dx, w_label, acc, s, labels, grad_scale, row_scale, R, H, st);
  } else if (dbf) {
    launch_dx<__nv_bfloat16, float>(dx, w_label, acc, s, labels, grad_scale, row_scale, R, H, st);
  } else if (wbf) {
    launch_dx<float, __nv_bfloat16>(dx, w_label, acc, s, labels, grad_scale, row_scale, R, H, st);
  } else {
    launch_dx<float, float>(dx, w_label, acc, s, labels, grad_scale, row_scale, R, H, st);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace st::cuda
