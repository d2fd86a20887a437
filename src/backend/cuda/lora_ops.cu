// The fused LoRA ops (backend.h "LoRA"): skinny products of a rank-r adapter, memory-bound on the
// activation they stream. Three kernel shapes cover the six ops:
//
//  * row_dot (lora_down t = x·Aᵀ, lora_dt dt = s·dy·B): out[N, r] = reduce over the long axis C.
//    A warp owns RW rows, a lane 8 consecutive columns of each (one 16-byte bf16 load per row), and
//    keeps RW x R partial sums in registers (R*RW = kDotAcc). The weight chunk [R, 256] is staged in
//    shared memory (either layout: A [r, C] or B [C, r]) and shared by the block's 4 warps. The
//    columns may be split over gridDim.y when rows alone give too few blocks; the splits' partial
//    sums then go to scratch and a second kernel adds them in split order (no atomics).
//  * row_update (lora_up y += s·t·Bᵀ, lora_dx dx += mask(dt·A)): a thread owns CPT consecutive
//    columns and holds their weights (CPT x R = 64 floats) in registers; the block walks a tile of
//    rows whose t is staged in shared memory (broadcast reads). y is read and written once, rounded
//    once. Every output is one thread's dot over k in order: the grid shape does not change bits.
//  * col_sum (lora_grad_a da += dtᵀ·x, lora_grad_b db += s·dyᵀ·t): a thread owns CPT columns of
//    the activation and sums over rows into CPT x R registers; a block's 4 row groups are added in a
//    fixed tree, N ranges (gridDim.y) write k-major partials to scratch, added in range order by a
//    second kernel. Every loop trip issues all its loads before any use (latency, not bandwidth,
//    bounded the first versions: 12-46 us for 1-8 MB on an H200, RESULTS session 3).
// R (a compile-time rank bound) is 8, 16, 32 or 64; a smaller r is zero-padded to the next one and
// a larger r is split into groups of R over gridDim.z (row_update falls back to a plain kernel).
// Grid shapes depend on the problem shape only, so results are the same run after run.
#include <algorithm>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/dropped_input.cuh"
#include "backend/cuda/ops.h"
#include "backend/cuda/vec.cuh"
#include "backend/dropout_rng.h"
#include "core/check.h"

namespace st::cuda {
namespace {

constexpr int kTargetBlocks = 528;  // ~4 blocks per SM on an H200 (132 SMs)

// C consecutive elements as one (or two) aligned vector access(es).
template <int C, class T>
struct alignas(C * sizeof(T) >= 16 ? 16 : C * sizeof(T)) Pack {
  T v[C];
};

template <int C, class T>
__device__ __forceinline__ void ld_pack(const T* p, float f[C]) {
  const Pack<C, T> u = *reinterpret_cast<const Pack<C, T>*>(p);
#pragma unroll
  for (int c = 0; c < C; ++c) f[c] = to_f(u.v[c]);
}

template <int C, class T>
__device__ __forceinline__ void st_pack(T* p, const float f[C]) {
  Pack<C, T> u;
#pragma unroll
  for (int c = 0; c < C; ++c) u.v[c] = from_f<T>(f[c]);
  *reinterpret_cast<Pack<C, T>*>(p) = u;
}

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

__device__ __forceinline__ int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// ---- row_dot --------------------------------------------------------------------------------
// kDotAcc partial sums a lane: 64 needed ~250 registers a thread (2 blocks an SM; ncu, session 3).
constexpr int kDotWarps = 4, kDotCols = 256, kDotPad = 260, kDotAcc = 64;  // padded smem row: fewer bank conflicts

// Weight element (k, c) of the row_dot operand is w[k * ks + c * cs] (A: ks = C, cs = 1; B: ks = 1,
// cs = r). out (split s) [N, r] row-major, scaled by `scale` only when writing the final result.
// drop: x is read dropped out (lora_down: dropped_input.cuh).
template <int R, class TX, bool VEC>
__global__ void __launch_bounds__(kDotWarps * 32) row_dot_kernel(float* out, const TX* x, int64_t N, int64_t C,
                                                                  const float* w, int64_t ks, int64_t cs, int r,
                                                                  int64_t split_cols, float scale, InputDrop drop) {
  constexpr int RW = kDotAcc / R;
  __shared__ __align__(16) float w_s[R][kDotPad];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int k0 = blockIdx.z * R;
  const int64_t row0 = (static_cast<int64_t>(blockIdx.x) * kDotWarps + warp) * RW;
  const int64_t c_begin = blockIdx.y * split_cols, c_end = min64(C, c_begin + split_cols);
  float acc[RW][R];
#pragma unroll
  for (int i = 0; i < RW; ++i)
#pragma unroll
    for (int k = 0; k < R; ++k) acc[i][k] = 0.0f;

  // The chunk's x rows are loaded first (in flight while the weights are staged), the weights in
  // batches, so a chunk costs a few memory latencies, not one per loop trip.
  constexpr int kFill = R * kDotCols / (kDotWarps * 32);  // weight floats per thread and chunk
  constexpr int kFillBatch = kFill < 8 ? kFill : 8;
  for (int64_t c0 = c_begin; c0 < c_end; c0 += kDotCols) {
    const int64_t col = c0 + lane * 8;
    float xv[RW][8];
#pragma unroll
    for (int i = 0; i < RW; ++i) {
      const int64_t n = row0 + i;
      if (VEC) {
        if (n < N && col < c_end) {
          load8(x + n * C + col, xv[i]);
        } else {
#pragma unroll
          for (int e = 0; e < 8; ++e) xv[i][e] = 0.0f;
        }
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) xv[i][e] = (n < N && col + e < c_end) ? to_f(x[n * C + col + e]) : 0.0f;
      }
    }
    if (drop.on()) {  // padding stays 0: a dropped-out 0 is 0
      const uint64_t seed = drop.seed.for_p(drop.p);
#pragma unroll
      for (int i = 0; i < RW; ++i)
#pragma unroll
        for (int e = 0; e < 8; ++e) xv[i][e] = dropped_input<TX>(seed, (row0 + i) * C + col + e, drop.p, xv[i][e]);
    }
    __syncthreads();  // the previous chunk's reads of w_s are done
    // The weight chunk (hot in L2) in batches of kFillBatch loads in flight; holding the whole
    // chunk in registers first cost 255 registers a thread and 12.5% occupancy (ncu, session 3).
#pragma unroll 1
    for (int j0 = 0; j0 < kFill; j0 += kFillBatch) {
      float wv[kFillBatch];
#pragma unroll
      for (int j = 0; j < kFillBatch; ++j) {
        // A (cs == 1): consecutive threads walk columns; B: they walk k (contiguous in B's rows).
        const int i = threadIdx.x + (j0 + j) * kDotWarps * 32;
        const int k = cs == 1 ? i / kDotCols : i % R, c = cs == 1 ? i % kDotCols : i / R;
        const int64_t wc = c0 + c;
        wv[j] = (k0 + k < r && wc < c_end) ? __ldg(w + (k0 + k) * ks + wc * cs) : 0.0f;
      }
#pragma unroll
      for (int j = 0; j < kFillBatch; ++j) {
        const int i = threadIdx.x + (j0 + j) * kDotWarps * 32;
        const int k = cs == 1 ? i / kDotCols : i % R, c = cs == 1 ? i % kDotCols : i / R;
        w_s[k][c] = wv[j];
      }
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < R; ++k) {
      const float4 wa = *reinterpret_cast<const float4*>(&w_s[k][lane * 8]);
      const float4 wb = *reinterpret_cast<const float4*>(&w_s[k][lane * 8 + 4]);
#pragma unroll
      for (int i = 0; i < RW; ++i) {
        float s = acc[i][k];
        s = fmaf(xv[i][0], wa.x, s);
        s = fmaf(xv[i][1], wa.y, s);
        s = fmaf(xv[i][2], wa.z, s);
        s = fmaf(xv[i][3], wa.w, s);
        s = fmaf(xv[i][4], wb.x, s);
        s = fmaf(xv[i][5], wb.y, s);
        s = fmaf(xv[i][6], wb.z, s);
        s = fmaf(xv[i][7], wb.w, s);
        acc[i][k] = s;
      }
    }
  }
  float* o = out + static_cast<int64_t>(blockIdx.y) * N * r;
#pragma unroll
  for (int i = 0; i < RW; ++i)
#pragma unroll
    for (int k = 0; k < R; ++k) {
      const float v = warp_sum(acc[i][k]);  // xor butterfly: the same order on every lane
      const int64_t n = row0 + i;
      if (lane == (k & 31) && n < N && k0 + k < r) o[n * r + k0 + k] = v * scale;
    }
}

// out[i] = scale * sum_s part[s][i], s in order.
__global__ void sum_splits_kernel(float* out, const float* part, int64_t n, int splits, float scale) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float s = 0.0f;
    for (int j = 0; j < splits; ++j) s += part[j * n + i];
    out[i] = s * scale;
  }
}

struct DotPlan {
  int R, splits;
  int64_t split_cols;
  dim3 grid;
};

DotPlan plan_row_dot(int64_t N, int64_t C, int r) {
  DotPlan p;
  p.R = r <= 8 ? 8 : r <= 16 ? 16 : 32;
  const int64_t rows_per_block = kDotWarps * (kDotAcc / p.R), row_blocks = cdiv(N, rows_per_block);
  const int64_t kgroups = cdiv(r, p.R), chunks = std::max<int64_t>(cdiv(C, kDotCols), 1);
  int64_t splits = std::clamp<int64_t>(cdiv(kTargetBlocks, row_blocks * kgroups), 1, chunks);
  const int64_t chunks_per_split = cdiv(chunks, splits);
  splits = cdiv(chunks, chunks_per_split);  // no empty split
  p.splits = static_cast<int>(splits);
  p.split_cols = chunks_per_split * kDotCols;
  p.grid = dim3(static_cast<unsigned>(row_blocks), static_cast<unsigned>(splits), static_cast<unsigned>(kgroups));
  return p;
}

template <int R, class TX>
void row_dot_typed(float* out, const TX* x, int64_t N, int64_t C, const float* w, int64_t ks, int64_t cs, int r,
                   const DotPlan& p, float scale, InputDrop drop, cudaStream_t s) {
  const bool vec = C % 8 == 0 && aligned16(x);
  if (vec)
    row_dot_kernel<R, TX, true>
        <<<p.grid, kDotWarps * 32, 0, s>>>(out, x, N, C, w, ks, cs, r, p.split_cols, scale, drop);
  else
    row_dot_kernel<R, TX, false>
        <<<p.grid, kDotWarps * 32, 0, s>>>(out, x, N, C, w, ks, cs, r, p.split_cols, scale, drop);
  CUDA_CHECK_LAUNCH();
}

// out[N, r] = scale * x[N, C] · W (W(k, c) = w[k*ks + c*cs]).
void row_dot(float* out, Tensor x, const float* w, int64_t ks, int64_t cs, int r, float scale, float* scratch,
             cudaStream_t s, InputDrop drop = {}) {
  const int64_t N = x.rows(), C = x.cols();
  if (N == 0 || r == 0) return;
  const DotPlan p = plan_row_dot(N, C, r);
  float* dst = p.splits > 1 ? scratch : out;
  const float sc = p.splits > 1 ? 1.0f : scale;
  auto go = [&](auto tag) {
    using TX = decltype(tag);
    const TX* xp = static_cast<const TX*>(x.data);
    if (p.R == 8) row_dot_typed<8>(dst, xp, N, C, w, ks, cs, r, p, sc, drop, s);
    else if (p.R == 16) row_dot_typed<16>(dst, xp, N, C, w, ks, cs, r, p, sc, drop, s);
    else row_dot_typed<32>(dst, xp, N, C, w, ks, cs, r, p, sc, drop, s);
  };
  if (x.dtype == DType::kBF16) go(__nv_bfloat16{});
  else go(float{});
  if (p.splits > 1) launch_lora_sum_splits(out, scratch, N * r, p.splits, scale, s);
}

// ---- row_update ------------------------------------------------------------------------------
constexpr int kUpdThreads = 128, kUpdBatch = 4;

// y[n, c] = rnd(y + post(sum_k t[n, k] * W(k, c))), W(k, c) = w[k*ks + c*cs]; post: scale * v
// (p <= 0) or dropout_apply(seed, n*C + c, p, v).
template <int R, class TY, bool VEC>
__global__ void __launch_bounds__(kUpdThreads) row_update_kernel(TY* y, const float* t, int64_t N, int64_t C,
                                                                   const float* w, int64_t ks, int64_t cs, int r,
                                                                   int rows_per_block, float scale, float p,
                                                                   DropoutSeed seed_arg) {
  const uint64_t seed = seed_arg.for_p(p);
  constexpr int CPT = R >= 64 ? 1 : 64 / R > 8 ? 8 : 64 / R;
  __shared__ __align__(16) float t_s[64][R];
  const int64_t col = (static_cast<int64_t>(blockIdx.x) * kUpdThreads + threadIdx.x) * CPT;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * rows_per_block;
  const int rows = static_cast<int>(min64(rows_per_block, N - row0));
  constexpr int kTFill = 64 * R / kUpdThreads;  // t floats per thread: loads first, then stores
  float tv[kTFill];
#pragma unroll
  for (int j = 0; j < kTFill; ++j) {
    const int i = threadIdx.x + j * kUpdThreads, rr = i / R, k = i % R;
    tv[j] = (rr < rows && k < r) ? __ldg(t + (row0 + rr) * r + k) : 0.0f;
  }
#pragma unroll
  for (int j = 0; j < kTFill; ++j) {
    const int i = threadIdx.x + j * kUpdThreads;
    t_s[i / R][i % R] = tv[j];
  }
  float wr[CPT][R];
#pragma unroll
  for (int c = 0; c < CPT; ++c)
#pragma unroll
    for (int k = 0; k < R; ++k) wr[c][k] = (k < r && col + c < C) ? w[k * ks + (col + c) * cs] : 0.0f;
  __syncthreads();
  if (col >= C) return;
  const float keep_scale = dropout_scale(p);
  // Rows go in batches of kUpdBatch whose y loads are all issued first (one memory latency per
  // batch); each output is still one thread's dot over k in order, so the bits do not change.
  for (int rb = 0; rb < rows; rb += kUpdBatch) {
    float yv[kUpdBatch][CPT];
    if (VEC) {
#pragma unroll
      for (int j = 0; j < kUpdBatch; ++j)
        if (rb + j < rows) ld_pack<CPT>(y + (row0 + rb + j) * C + col, yv[j]);
    }
#pragma unroll
    for (int j = 0; j < kUpdBatch; ++j) {
      const int rr = rb + j;
      if (rr >= rows) break;
      float acc[CPT];
#pragma unroll
      for (int c = 0; c < CPT; ++c) acc[c] = 0.0f;
#pragma unroll
      for (int k = 0; k < R; k += 4) {
        const float4 tv = *reinterpret_cast<const float4*>(&t_s[rr][k]);
#pragma unroll
        for (int c = 0; c < CPT; ++c) {
          acc[c] = fmaf(tv.x, wr[c][k], acc[c]);
          acc[c] = fmaf(tv.y, wr[c][k + 1], acc[c]);
          acc[c] = fmaf(tv.z, wr[c][k + 2], acc[c]);
          acc[c] = fmaf(tv.w, wr[c][k + 3], acc[c]);
        }
      }
      const int64_t base = (row0 + rr) * C + col;
#pragma unroll
      for (int c = 0; c < CPT; ++c) {
        if (p > 0.0f) {
          // dropout_apply, spelled out so the scale is computed once: the same bits.
          const bool keep = p < 1.0f && dropout_keep(seed, static_cast<uint64_t>(base + c), p);
          acc[c] = keep ? acc[c] * keep_scale : 0.0f;
        } else {
          acc[c] *= scale;
        }
      }
      if (VEC) {
#pragma unroll
        for (int c = 0; c < CPT; ++c) yv[j][c] += acc[c];
        st_pack<CPT>(y + base, yv[j]);
      } else {
#pragma unroll
        for (int c = 0; c < CPT; ++c)
          if (col + c < C) y[base + c] = from_f<TY>(to_f(y[base + c]) + acc[c]);
      }
    }
  }
}

// Any r (the fallback above 64): one thread per element, k in order.
template <class TY>
__global__ void row_update_plain_kernel(TY* y, const float* t, int64_t N, int64_t C, const float* w, int64_t ks,
                                        int64_t cs, int r, float scale, float p, DropoutSeed seed_arg) {
  const uint64_t seed = seed_arg.for_p(p);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < N * C;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t n = i / C, c = i % C;
    float acc = 0.0f;
    for (int k = 0; k < r; ++k) acc = fmaf(t[n * r + k], w[k * ks + c * cs], acc);
    acc = p > 0.0f ? dropout_apply(seed, static_cast<uint64_t>(i), p, acc) : acc * scale;
    y[i] = from_f<TY>(to_f(y[i]) + acc);
  }
}

template <int R, class TY>
void row_update_typed(TY* y, const float* t, int64_t N, int64_t C, const float* w, int64_t ks, int64_t cs, int r,
                      float scale, float p, DropoutSeed seed, cudaStream_t s) {
  constexpr int CPT = R >= 64 ? 1 : 64 / R > 8 ? 8 : 64 / R;
  const int64_t col_blocks = cdiv(C, static_cast<int64_t>(kUpdThreads) * CPT);
  int rows = 64;  // more rows per block reuse the register-held weights more; fewer fill the GPU
  while (rows > 8 && col_blocks * cdiv(N, rows) < 2 * kTargetBlocks / 4) rows /= 2;
  const dim3 grid(static_cast<unsigned>(col_blocks), static_cast<unsigned>(cdiv(N, rows)));
  const bool vec = C % CPT == 0 && (reinterpret_cast<uintptr_t>(y) % std::min<size_t>(16, CPT * sizeof(TY))) == 0;
  if (vec)
    row_update_kernel<R, TY, true><<<grid, kUpdThreads, 0, s>>>(y, t, N, C, w, ks, cs, r, rows, scale, p, seed);
  else
    row_update_kernel<R, TY, false><<<grid, kUpdThreads, 0, s>>>(y, t, N, C, w, ks, cs, r, rows, scale, p, seed);
  CUDA_CHECK_LAUNCH();
}

void row_update(Tensor y, const float* t, const float* w, int64_t ks, int64_t cs, int r, float scale, float p,
                DropoutSeed seed, cudaStream_t s) {
  const int64_t N = y.rows(), C = y.cols();
  if (N == 0 || C == 0) return;
  auto go = [&](auto tag) {
    using TY = decltype(tag);
    TY* yp = static_cast<TY*>(y.data);
    if (r <= 8) row_update_typed<8>(yp, t, N, C, w, ks, cs, r, scale, p, seed, s);
    else if (r <= 16) row_update_typed<16>(yp, t, N, C, w, ks, cs, r, scale, p, seed, s);
    else if (r <= 32) row_update_typed<32>(yp, t, N, C, w, ks, cs, r, scale, p, seed, s);
    else if (r <= 64) row_update_typed<64>(yp, t, N, C, w, ks, cs, r, scale, p, seed, s);
    else {
      row_update_plain_kernel<TY><<<grid_for(N * C, 256), 256, 0, s>>>(yp, t, N, C, w, ks, cs, r, scale, p, seed);
      CUDA_CHECK_LAUNCH();
    }
  };
  if (y.dtype == DType::kBF16) go(__nv_bfloat16{});
  else go(float{});
}

// ---- col_sum ---------------------------------------------------------------------------------
// A block is kSumGroups row groups of kSumThreads column threads. Per tile of kSumTile rows each
// group takes kGroupRows consecutive rows, issuing all their loads at once (one memory latency per
// tile); the groups' sums are added in a fixed tree at the end, (g0 + g2) + (g1 + g3).
constexpr int kSumThreads = 64, kSumGroups = 4, kGroupRows = 8, kSumTile = kSumGroups * kGroupRows;
constexpr int kSumMinSplitRows = 64;  // a split's partial (r x C f32) stays <= half its x (bf16, r 16)

template <int R>
constexpr int sum_cpt() { return R >= 64 ? 1 : 64 / R > 8 ? 8 : 64 / R; }

// G(k, c) (+)= sum over rows n of [n_begin, n_end) of t[n, k] * x[n, c], k in [k0, k0+R) ∩ [0, r).
// final: g[k*gks + c*gcs] = g + scale * sum; else the split's partial goes to part[split][k][c]
// (k-major, coalesced whatever g's layout). drop: x is read dropped out (lora_grad_a).
template <int R, class TX, bool VEC>
__global__ void __launch_bounds__(kSumThreads* kSumGroups) col_sum_kernel(float* g, int64_t gks, int64_t gcs,
                                                                          const float* t, const TX* x, int64_t N,
                                                                          int64_t C, int r, int64_t split_rows,
                                                                          float scale, bool final, InputDrop drop) {
  constexpr int CPT = sum_cpt<R>();
  constexpr int kTFill = kSumTile * R / (kSumThreads * kSumGroups);
  __shared__ __align__(16) float t_s[kSumTile][R];
  __shared__ __align__(16) float red_s[2][R][kSumThreads * CPT];
  const int tid = threadIdx.x % kSumThreads, grp = threadIdx.x / kSumThreads;
  const int k0 = blockIdx.z * R;
  const int64_t col = (static_cast<int64_t>(blockIdx.x) * kSumThreads + tid) * CPT;
  const int64_t n_begin = blockIdx.y * split_rows, n_end = min64(N, n_begin + split_rows);
  float acc[CPT][R];
#pragma unroll
  for (int c = 0; c < CPT; ++c)
#pragma unroll
    for (int k = 0; k < R; ++k) acc[c][k] = 0.0f;
  for (int64_t n0 = n_begin; n0 < n_end; n0 += kSumTile) {
    float xv[kGroupRows][CPT];
#pragma unroll
    for (int j = 0; j < kGroupRows; ++j) {
      const int64_t n = n0 + grp * kGroupRows + j, base = n * C + col;
      if (VEC) {
        if (n < n_end && col < C) {
          ld_pack<CPT>(x + base, xv[j]);
        } else {
#pragma unroll
          for (int c = 0; c < CPT; ++c) xv[j][c] = 0.0f;
        }
      } else {
#pragma unroll
        for (int c = 0; c < CPT; ++c) xv[j][c] = (n < n_end && col + c < C) ? to_f(x[base + c]) : 0.0f;
      }
    }
    if (drop.on()) {  // padding stays 0: a dropped-out 0 is 0
      const uint64_t seed = drop.seed.for_p(drop.p);
#pragma unroll
      for (int j = 0; j < kGroupRows; ++j)
#pragma unroll
        for (int c = 0; c < CPT; ++c)
          xv[j][c] = dropped_input<TX>(seed, (n0 + grp * kGroupRows + j) * C + col + c, drop.p, xv[j][c]);
    }
    float tv[kTFill];
#pragma unroll
    for (int j = 0; j < kTFill; ++j) {
      const int i = threadIdx.x + j * kSumThreads * kSumGroups, rr = i / R, k = i % R;
      tv[j] = (n0 + rr < n_end && k0 + k < r) ? __ldg(t + (n0 + rr) * r + k0 + k) : 0.0f;
    }
    __syncthreads();  // the previous tile's reads of t_s are done
#pragma unroll
    for (int j = 0; j < kTFill; ++j) {
      const int i = threadIdx.x + j * kSumThreads * kSumGroups;
      t_s[i / R][i % R] = tv[j];
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kGroupRows; ++j) {  // rows in order: the sum's order is fixed
      const int rr = grp * kGroupRows + j;
#pragma unroll
      for (int k = 0; k < R; k += 4) {
        const float4 tq = *reinterpret_cast<const float4*>(&t_s[rr][k]);
#pragma unroll
        for (int c = 0; c < CPT; ++c) {
          acc[c][k] = fmaf(tq.x, xv[j][c], acc[c][k]);
          acc[c][k + 1] = fmaf(tq.y, xv[j][c], acc[c][k + 1]);
          acc[c][k + 2] = fmaf(tq.z, xv[j][c], acc[c][k + 2]);
          acc[c][k + 3] = fmaf(tq.w, xv[j][c], acc[c][k + 3]);
        }
      }
    }
  }
  // (g0 + g2) + (g1 + g3), through shared memory.
  auto red = [&](int slot, int k, int c) -> float& { return red_s[slot][k][tid * CPT + c]; };
  if (grp >= 2) {
#pragma unroll
    for (int c = 0; c < CPT; ++c)
#pragma unroll
      for (int k = 0; k < R; ++k) red(grp - 2, k, c) = acc[c][k];
  }
  __syncthreads();
  if (grp < 2) {
#pragma unroll
    for (int c = 0; c < CPT; ++c)
#pragma unroll
      for (int k = 0; k < R; ++k) acc[c][k] += red(grp, k, c);
  }
  __syncthreads();
  if (grp == 1) {
#pragma unroll
    for (int c = 0; c < CPT; ++c)
#pragma unroll
      for (int k = 0; k < R; ++k) red(0, k, c) = acc[c][k];
  }
  __syncthreads();
  if (grp != 0 || col >= C) return;
  float* part = g + static_cast<int64_t>(blockIdx.y) * r * C;
#pragma unroll
  for (int c = 0; c < CPT; ++c)
#pragma unroll
    for (int k = 0; k < R; ++k) {
      if (col + c >= C || k0 + k >= r) continue;
      const float v = acc[c][k] + red(0, k, c);
      if (final) {
        float& o = g[(k0 + k) * gks + (col + c) * gcs];
        o = __fadd_rn(o, __fmul_rn(scale, v));  // no fma: backend.h
      } else {
        part[(k0 + k) * C + col + c] = v;
      }
    }
}

// g[k*gks + c*gcs] = g + scale * sum_s part[s][k*C + c] (s in order; two roundings, as backend.h asks).
__global__ void add_splits_kernel(float* g, int64_t gks, int64_t gcs, const float* part, int64_t C, int64_t n,
                                  int splits, float scale) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float s = 0.0f;
    for (int j = 0; j < splits; ++j) s += part[j * n + i];
    float& o = g[(i / C) * gks + (i % C) * gcs];
    o = __fadd_rn(o, __fmul_rn(scale, s));
  }
}

struct SumPlan {
  int64_t col_blocks, kgroups, splits, split_rows;
};

SumPlan plan_col_sum(int64_t N, int64_t C, int r, int R, int cpt) {
  SumPlan p;
  p.col_blocks = cdiv(C, static_cast<int64_t>(kSumThreads) * cpt);
  p.kgroups = cdiv(r, R);
  const int64_t tiles = cdiv(N, kSumTile);
  // ~2 blocks of 256 threads per SM, but no split under kSumMinSplitRows rows.
  int64_t splits = std::clamp<int64_t>(cdiv(kTargetBlocks / 2, p.col_blocks * p.kgroups), 1,
                                       std::max<int64_t>(1, N / kSumMinSplitRows));
  const int64_t tiles_per_split = cdiv(tiles, splits);
  p.splits = cdiv(tiles, tiles_per_split);
  p.split_rows = tiles_per_split * kSumTile;
  return p;
}

int rank_bound(int r) { return r <= 8 ? 8 : r <= 16 ? 16 : r <= 32 ? 32 : 64; }
int cpt_of(int R) { return R >= 64 ? 1 : std::min(64 / R, 8); }

template <int R, class TX>
void col_sum_typed(float* g, int64_t gks, int64_t gcs, const float* t, const TX* x, int64_t N, int64_t C, int r,
                   float scale, float* scratch, InputDrop drop, cudaStream_t s) {
  constexpr int CPT = sum_cpt<R>();
  const SumPlan p = plan_col_sum(N, C, r, R, CPT);
  const bool final = p.splits == 1;
  float* dst = final ? g : scratch;
  const dim3 grid(static_cast<unsigned>(p.col_blocks), static_cast<unsigned>(p.splits),
                  static_cast<unsigned>(p.kgroups));
  const int threads = kSumThreads * kSumGroups;
  const bool vec = C % CPT == 0 && (reinterpret_cast<uintptr_t>(x) % std::min<size_t>(16, CPT * sizeof(TX))) == 0;
  if (vec)
    col_sum_kernel<R, TX, true>
        <<<grid, threads, 0, s>>>(dst, gks, gcs, t, x, N, C, r, p.split_rows, scale, final, drop);
  else
    col_sum_kernel<R, TX, false>
        <<<grid, threads, 0, s>>>(dst, gks, gcs, t, x, N, C, r, p.split_rows, scale, final, drop);
  CUDA_CHECK_LAUNCH();
  if (!final) launch_lora_add_splits(g, gks, gcs, scratch, C, r, static_cast<int>(p.splits), scale, s);
}

void col_sum(float* g, int64_t gks, int64_t gcs, const float* t, Tensor x, int r, float scale, float* scratch,
             cudaStream_t s, InputDrop drop = {}) {
  const int64_t N = x.rows(), C = x.cols();
  if (N == 0 || C == 0 || r == 0) return;
  auto go = [&](auto tag) {
    using TX = decltype(tag);
    const TX* xp = static_cast<const TX*>(x.data);
    if (r <= 8) col_sum_typed<8>(g, gks, gcs, t, xp, N, C, r, scale, scratch, drop, s);
    else if (r <= 16) col_sum_typed<16>(g, gks, gcs, t, xp, N, C, r, scale, scratch, drop, s);
    else if (r <= 32) col_sum_typed<32>(g, gks, gcs, t, xp, N, C, r, scale, scratch, drop, s);
    else col_sum_typed<64>(g, gks, gcs, t, xp, N, C, r, scale, scratch, drop, s);
  };
  if (x.dtype == DType::kBF16) go(__nv_bfloat16{});
  else go(float{});
}

}  // namespace

int64_t lora_scratch_floats(int64_t N, int64_t C, int64_t r, LoraScratchOp op) {
  if (N == 0 || C == 0 || r == 0) return 0;
  if (op == LoraScratchOp::kRowDot) {
    const DotPlan p = plan_row_dot(N, C, static_cast<int>(r));
    return p.splits > 1 ? p.splits * N * r : 0;
  }
  // col_sum: the same plan as col_sum_typed, for the R that r maps to.
  const int R = rank_bound(static_cast<int>(r));
  const SumPlan p = plan_col_sum(N, C, static_cast<int>(r), R, cpt_of(R));
  return p.splits > 1 ? p.splits * r * C : 0;
}

void launch_lora_sum_splits(float* out, const float* part, int64_t n, int splits, float scale, cudaStream_t s) {
  if (n == 0) return;
  sum_splits_kernel<<<grid_for(n, 256), 256, 0, s>>>(out, part, n, splits, scale);
  CUDA_CHECK_LAUNCH();
}

void launch_lora_add_splits(float* g, int64_t gks, int64_t gcs, const float* part, int64_t C, int64_t r, int splits,
                            float scale, cudaStream_t s) {
  const int64_t n = r * C;
  if (n == 0) return;
  add_splits_kernel<<<grid_for(n, 256), 256, 0, s>>>(g, gks, gcs, part, C, n, splits, scale);
  CUDA_CHECK_LAUNCH();
}

void launch_lora_down(Tensor t, Tensor x, Tensor a, float dropout_p, DropoutSeed seed, float* scratch, cudaStream_t s) {
  const int64_t in = x.cols();
  row_dot(t.ptr<float>(), x, a.ptr<const float>(), /*ks=*/in, /*cs=*/1, static_cast<int>(a.rows()), 1.0f, scratch,
          s, {dropout_p, seed});
}

void launch_lora_dt(Tensor dt, Tensor dy, Tensor b, float scale, float* scratch, cudaStream_t s) {
  const int64_t r = b.cols();
  row_dot(dt.ptr<float>(), dy, b.ptr<const float>(), /*ks=*/1, /*cs=*/r, static_cast<int>(r), scale, scratch, s);
}

void launch_lora_up(Tensor y, Tensor t, Tensor b, float scale, cudaStream_t s) {
  const int64_t r = b.cols();
  row_update(y, t.ptr<const float>(), b.ptr<const float>(), /*ks=*/1, /*cs=*/r, static_cast<int>(r), scale, 0.0f, 0,
             s);
}

void launch_lora_dx(Tensor dx, Tensor dt, Tensor a, float dropout_p, DropoutSeed seed, cudaStream_t s) {
  const int64_t in = dx.cols();
  row_update(dx, dt.ptr<const float>(), a.ptr<const float>(), /*ks=*/in, /*cs=*/1, static_cast<int>(a.rows()), 1.0f,
             dropout_p, seed, s);
}

void launch_lora_grad_b(Tensor db, Tensor dy, Tensor t, float scale, float* scratch, cudaStream_t s) {
  const int64_t r = t.cols();
  // G(k, c) = db[c, k]: the activation's columns are db's rows.
  col_sum(db.ptr<float>(), /*gks=*/1, /*gcs=*/r, t.ptr<const float>(), dy, static_cast<int>(r), scale, scratch, s);
}

void launch_lora_grad_a(Tensor da, Tensor dt, Tensor x, float dropout_p, DropoutSeed seed, float* scratch,
                        cudaStream_t s) {
  const int64_t in = x.cols();
  col_sum(da.ptr<float>(), /*gks=*/in, /*gcs=*/1, dt.ptr<const float>(), x, static_cast<int>(dt.cols()), 1.0f,
          scratch, s, {dropout_p, seed});
}

}  // namespace st::cuda
