// The DoRA ops (backend.h "DoRA"): the row norm of W + s·B·A, the forward's per-column scale and
// add, and the backward's magnitude gradient with the scaled pass-through. Deterministic: every
// sum runs in an order fixed by the problem shape (never by the grid's timing), no atomics.
//
//  * norm: a block owns kNormRows rows of W and walks their columns in chunks of kNormCols; a
//    thread owns 4 rows x 8 columns of a chunk (columns cg*4+{0..3} and 128+cg*4+{0..3}: a warp's
//    A reads are one conflict-free 128-byte line). The chunk's A tile [KC, kNormCols] and the
//    block's B tile [KC, kNormRows] are staged in shared memory, so W streams from memory once and
//    A is read from L2 once a block. (B·A)[o,i] is an f32 fma chain over k in order, e = W + s·BA,
//    e² summed per thread in column order, then across the row's 32 threads in a fixed tree. Rows
//    alone giving too few blocks, the columns split over gridDim.y: partial sums to scratch, added
//    in split order by a second kernel (which also takes the sqrt and the scale).
//  * combine: elementwise, 8 elements a thread where y (and residual) share bf16/f32 and are
//    16-byte aligned with out % 8 == 0, else one by one; products and sums unfused (__fmul_rn /
//    __fadd_rn), in the reference's order, so the result is the CPU's bits.
//  * backward: a block owns a column tile and a range of rows (a split of N); warp w takes rows
//    w, w+8, ... of the range, each thread reads dy and v of its columns, sums dy·v (f32 fma in row
//    order) and writes g = scale·dy at the same element right after reading it (g may alias dy or
//    v: no other thread touches that element). The 8 warps' sums are added in warp order, the
//    splits' in split order (a second kernel when N is split). The split plan depends on (N, out)
//    only and both the vector and the scalar kernel use it, so alignment never changes the bits.
#include <algorithm>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/ops.h"
#include "backend/cuda/vec.cuh"

namespace st::cuda {
namespace {

// Blocks resident at once on an H200: 132 SMs x 2 (both kernels need ~128 registers a thread).
// A constant, not the device's count: the plans, hence the bits, are the same on every GPU.
constexpr int64_t kSlots = 264;

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

__device__ __forceinline__ int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// ---- norm -----------------------------------------------------------------------------------
constexpr int kNormThreads = 256, kNormRows = 32, kNormCols = 256, kNormRowPad = kNormRows + 4;

// 4 consecutive elements (one 8- or 16-byte access).
template <class T>
struct alignas(4 * sizeof(T)) Quad {
  T v[4];
};

// 8 consecutive elements as stored (one or two 16-byte accesses), converted at use: the loads in
// flight hold half the registers for bf16.
template <class T>
struct alignas(16) Oct {
  T v[8];
};

// Columns of W handled per split, a multiple of kNormCols.
struct NormPlan {
  int KC;  // rank chunk staged at a time (8, 16 or 32)
  int64_t splits, split_cols;
  dim3 grid;
};

// The split count with the fewest (waves x chunks a block), a block's fixed costs counted as a
// quarter chunk: 11008 x 2048 -> 2 splits (688 blocks), 2048 x 2048 -> 4 (256 blocks).
NormPlan plan_norm(int64_t out, int64_t in, int64_t r) {
  constexpr int64_t kMaxSplits = 64;
  NormPlan p;
  p.KC = r <= 8 ? 8 : r <= 16 ? 16 : 32;
  const int64_t row_blocks = cdiv(out, kNormRows), chunks = std::max<int64_t>(cdiv(in, kNormCols), 1);
  int64_t best_cps = chunks;
  double best = 1e300;
  for (int64_t s = 1; s <= std::min(chunks, kMaxSplits); ++s) {
    const int64_t cps = cdiv(chunks, s), splits = cdiv(chunks, cps);
    const double cost = static_cast<double>(cdiv(row_blocks * splits, kSlots)) * (static_cast<double>(cps) + 0.25);
    if (cost < best) best = cost, best_cps = cps;
  }
  p.splits = cdiv(chunks, best_cps);  // no empty split
  p.split_cols = best_cps * kNormCols;
  p.grid = dim3(static_cast<unsigned>(row_blocks), static_cast<unsigned>(p.splits));
  return p;
}

// dst[split * out + o] = Σ_i e[o,i]² over the split's columns (final: norm = sqrt, scale = mag/norm).
// VEC: in % 4 == 0 and w aligned to 4 elements (a thread's 4-column groups are whole).
template <int KC, class TW, bool VEC>
__global__ void __launch_bounds__(kNormThreads, 2)
    dora_norm_kernel(float* dst, float* scale, const TW* w, const float* a, const float* b, const float* mag,
                     int64_t out, int64_t in, int r, float s, int64_t split_cols, bool final) {
  __shared__ __align__(16) float a_s[KC][kNormCols];
  __shared__ __align__(16) float b_s[KC][kNormRowPad];
  __shared__ float red_s[4][kNormRows];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int rg = (warp >> 2) * 4 + (lane >> 3);  // row group 0..7: rows rg*4 + {0..3}
  const int cg = (warp & 3) * 8 + (lane & 7);    // column group 0..31
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kNormRows;
  const int64_t c_begin = static_cast<int64_t>(blockIdx.y) * split_cols, c_end = min64(in, c_begin + split_cols);
  const int kchunks = (r + KC - 1) / KC;

  // B rows [row0, row0 + kNormRows), ranks [k0, k0 + KC) as b_s[k][row]; zero past out / r.
  auto stage_b = [&](int k0) {
    constexpr int kFill = KC * kNormRows / kNormThreads;
#pragma unroll
    for (int j = 0; j < kFill; ++j) {
      const int i = tid + j * kNormThreads, k = i % KC, row = i / KC;
      b_s[k][row] = (row0 + row < out && k0 + k < r) ? __ldg(b + (row0 + row) * r + k0 + k) : 0.0f;
    }
  };
  if (kchunks == 1) stage_b(0);  // the same tile for every column chunk (made visible by the loop's sync)

  float sq[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int64_t c0 = c_begin; c0 < c_end; c0 += kNormCols) {
    // The chunk's W, kept as stored (in flight while A is staged), zero outside [row < out,
    // col < c_end).
    Quad<TW> wq[4][2];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t row = row0 + rg * 4 + i;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t col = c0 + h * 128 + cg * 4;
        if (VEC) {
          if (row < out && col < c_end) {
            wq[i][h] = *reinterpret_cast<const Quad<TW>*>(w + row * in + col);
          } else {
#pragma unroll
            for (int e = 0; e < 4; ++e) wq[i][h].v[e] = from_f<TW>(0.0f);
          }
        } else {
#pragma unroll
          for (int e = 0; e < 4; ++e)
            wq[i][h].v[e] = (row < out && col + e < c_end) ? w[row * in + col + e] : from_f<TW>(0.0f);
        }
      }
    }
    float ba[4][8];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) ba[i][j] = 0.0f;
    for (int kc = 0; kc < kchunks; ++kc) {
      const int k0 = kc * KC;
      __syncthreads();  // the previous chunk's reads of a_s / b_s are done
      // A's rows [k0, k0 + KC) (hot in L2), in batches of loads issued before their stores.
      constexpr int kFill = KC * kNormCols / kNormThreads, kBatch = kFill < 8 ? kFill : 8;
#pragma unroll 1
      for (int j0 = 0; j0 < kFill; j0 += kBatch) {
        float av[kBatch];
#pragma unroll
        for (int j = 0; j < kBatch; ++j) {
          const int i = tid + (j0 + j) * kNormThreads, k = i / kNormCols, c = i % kNormCols;
          av[j] = (k0 + k < r && c0 + c < c_end) ? __ldg(a + static_cast<int64_t>(k0 + k) * in + c0 + c) : 0.0f;
        }
#pragma unroll
        for (int j = 0; j < kBatch; ++j) {
          const int i = tid + (j0 + j) * kNormThreads;
          a_s[i / kNormCols][i % kNormCols] = av[j];
        }
      }
      if (kchunks > 1) stage_b(k0);
      __syncthreads();
      // Unrolled by 2, not KC: hoisting every operand load of the chunk spilled (ptxas -v).
#pragma unroll 2
      for (int k = 0; k < KC; ++k) {
        const float4 a0 = *reinterpret_cast<const float4*>(&a_s[k][cg * 4]);
        const float4 a1 = *reinterpret_cast<const float4*>(&a_s[k][128 + cg * 4]);
        const float4 bq = *reinterpret_cast<const float4*>(&b_s[k][rg * 4]);
        const float av8[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
        const float bv4[4] = {bq.x, bq.y, bq.z, bq.w};
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < 8; ++j) ba[i][j] = fmaf(bv4[i], av8[j], ba[i][j]);
      }
    }
    // Padding (rows past out, columns past c_end, ranks past r) is zero in W, A and B: e = 0 there,
    // and adding 0 leaves the sum's bits alone.
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float e = fmaf(s, ba[i][j], to_f(wq[i][j >> 2].v[j & 3]));
        sq[i] = fmaf(e, e, sq[i]);
      }
  }
  // A row's 32 column groups: 8 lanes of a warp (xor butterfly: every lane gets the same bits),
  // then the 4 warps sharing the row group, in warp order.
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float v = sq[i];
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    v += __shfl_xor_sync(0xffffffffu, v, 2);
    v += __shfl_xor_sync(0xffffffffu, v, 4);
    if ((lane & 7) == 0) red_s[warp & 3][rg * 4 + i] = v;
  }
  __syncthreads();
  if (tid >= kNormRows || row0 + tid >= out) return;
  const float total = ((red_s[0][tid] + red_s[1][tid]) + red_s[2][tid]) + red_s[3][tid];
  const int64_t o = row0 + tid;
  if (!final) {
    dst[static_cast<int64_t>(blockIdx.y) * out + o] = total;
    return;
  }
  const float n = sqrtf(total);
  dst[o] = n;
  if (scale != nullptr) scale[o] = mag[o] / n;
}

// norm[o] = sqrt(Σ_s part[s][o]) (s in order); scale[o] = mag[o] / norm[o] when scale is given.
__global__ void dora_norm_finish_kernel(float* norm, float* scale, const float* mag, const float* part, int64_t out,
                                        int splits) {
  for (int64_t o = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; o < out;
       o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float t = 0.0f;
    for (int j = 0; j < splits; ++j) t += part[j * out + o];
    const float n = sqrtf(t);
    norm[o] = n;
    if (scale != nullptr) scale[o] = mag[o] / n;
  }
}

template <int KC, class TW>
void norm_typed(const NormPlan& p, float* dst, float* scale, const TW* w, const float* a, const float* b,
                const float* mag, int64_t out, int64_t in, int r, float s, cudaStream_t st) {
  const bool final = p.splits == 1;
  const bool vec = in % 4 == 0 && reinterpret_cast<uintptr_t>(w) % (4 * sizeof(TW)) == 0;
  if (vec)
    dora_norm_kernel<KC, TW, true><<<p.grid, kNormThreads, 0, st>>>(dst, scale, w, a, b, mag, out, in, r, s,
                                                                     p.split_cols, final);
  else
    dora_norm_kernel<KC, TW, false><<<p.grid, kNormThreads, 0, st>>>(dst, scale, w, a, b, mag, out, in, r, s,
                                                                      p.split_cols, final);
  CUDA_CHECK_LAUNCH();
}

// ---- combine --------------------------------------------------------------------------------
constexpr int kThreads = 256;

#define ST_DORA_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

// rnd(scale·y + bias + res), unfused, in the reference's order (bias / res: nullptr when absent).
__device__ __forceinline__ float combine1(float y, float sc, const void* bias, DType bt, int64_t o, bool has_res,
                                          float res) {
  float v = __fmul_rn(sc, y);
  if (bias != nullptr) v = __fadd_rn(v, ld(bias, bt, o));
  if (has_res) v = __fadd_rn(v, res);
  return v;
}

// y, res: one dtype T, 16-byte aligned, out % 8 == 0 (8 elements share a row).
template <class T>
__global__ void dora_combine_vec_kernel(T* y, const float* scale, const void* bias, DType bt, const T* res,
                                        int64_t groups, int64_t out) {
  ST_DORA_GRID_STRIDE(v, groups) {
    const int64_t i = v * 8, o = i % out;
    float f[8], rv[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    load8(y + i, f);
    if (res != nullptr) load8(res + i, rv);
#pragma unroll
    for (int c = 0; c < 8; ++c) f[c] = combine1(f[c], scale[o + c], bias, bt, o + c, res != nullptr, rv[c]);
    store8(y + i, f);
  }
}

__global__ void dora_combine_kernel(void* y, DType yt, const float* scale, const void* bias, DType bt,
                                    const void* res, DType rt, int64_t n, int64_t out) {
  ST_DORA_GRID_STRIDE(i, n) {
    const int64_t o = i % out;
    const float rv = res != nullptr ? ld(res, rt, i) : 0.0f;
    st_elem(y, yt, i, combine1(ld(y, yt, i), scale[o], bias, bt, o, res != nullptr, rv));
  }
}

// ---- backward -------------------------------------------------------------------------------
constexpr int kBwdWarps = 8, kBwdThreads = kBwdWarps * 32, kBwdUnroll = 4;
constexpr int kBwdTileCols = 256;       // the plan's nominal column tile (the vector kernel's)
constexpr int64_t kBwdWaves = 4;  // blocks: at most 4 waves of kSlots (a short last wave costs little)
constexpr int64_t kBwdMinSplitRows = 64;

struct BwdPlan {
  int64_t splits, split_rows;
};

// Depends on (N, out) only: the vector and the scalar kernels sum every column in the same order.
BwdPlan plan_bwd(int64_t N, int64_t out) {
  const int64_t tiles = cdiv(out, kBwdTileCols);
  int64_t splits = std::clamp<int64_t>(kBwdWaves * kSlots / tiles, 1, std::max<int64_t>(1, N / kBwdMinSplitRows));
  int64_t rows = cdiv(cdiv(N, splits), kBwdWarps) * kBwdWarps;  // every warp gets as many rows
  rows = std::max<int64_t>(rows, kBwdWarps);
  BwdPlan p;
  p.split_rows = rows;
  p.splits = std::max<int64_t>(cdiv(N, rows), 1);
  return p;
}

// The block's 8 warp sums of CPT columns (acc), added in warp order, then to dmag (final) or to the
// split's partial row. red_s: [kBwdWarps][32 * CPT].
template <int CPT>
__device__ __forceinline__ void bwd_reduce(float (&acc)[CPT], float* red_s, int64_t col, int64_t out, float* dst,
                                           const float* norm, bool final) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int c = 0; c < CPT; ++c) red_s[warp * 32 * CPT + c * 32 + lane] = acc[c];  // column-major: no conflicts
  __syncthreads();
  if (warp != 0) return;
#pragma unroll
  for (int c = 0; c < CPT; ++c) {
    if (col + c >= out) continue;
    float t = red_s[c * 32 + lane];
    for (int w = 1; w < kBwdWarps; ++w) t += red_s[w * 32 * CPT + c * 32 + lane];
    if (final) dst[col + c] = __fadd_rn(dst[col + c], __fdiv_rn(t, norm[col + c]));
    else dst[static_cast<int64_t>(blockIdx.y) * out + col + c] = t;
  }
}

// g, dy, v: one dtype T, 16-byte aligned, out % 8 == 0. No __restrict__ / __ldg: g may alias dy or v.
template <class T>
__global__ void __launch_bounds__(kBwdThreads, 2)
    dora_bwd_vec_kernel(T* g, float* dst, const T* dy, const T* v, const float* scale, const float* norm, int64_t N,
                        int64_t out, int64_t split_rows, bool final) {
  __shared__ float red_s[kBwdWarps * 32 * 8];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t col = (static_cast<int64_t>(blockIdx.x) * 32 + lane) * 8;
  const int64_t n_begin = static_cast<int64_t>(blockIdx.y) * split_rows, n_end = min64(N, n_begin + split_rows);
  float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  if (col < out) {
    float sc[8];
#pragma unroll
    for (int c = 0; c < 8; ++c) sc[c] = scale[col + c];
    // Rows n_begin + warp + 8j in order; kBwdUnroll rows' loads issued before any use.
    for (int64_t n0 = n_begin + warp; n0 < n_end; n0 += kBwdWarps * kBwdUnroll) {
      Oct<T> dv[kBwdUnroll], vv[kBwdUnroll];
#pragma unroll
      for (int u = 0; u < kBwdUnroll; ++u) {
        const int64_t n = n0 + u * kBwdWarps;
        if (n < n_end) {
          dv[u] = *reinterpret_cast<const Oct<T>*>(dy + n * out + col);
          vv[u] = *reinterpret_cast<const Oct<T>*>(v + n * out + col);
        }
      }
#pragma unroll
      for (int u = 0; u < kBwdUnroll; ++u) {
        const int64_t n = n0 + u * kBwdWarps;
        if (n >= n_end) break;
        float gv[8];
#pragma unroll
        for (int c = 0; c < 8; ++c) {
          const float d = to_f(dv[u].v[c]);
          acc[c] = fmaf(d, to_f(vv[u].v[c]), acc[c]);
          gv[c] = sc[c] * d;
        }
        store8(g + n * out + col, gv);
      }
    }
  }
  bwd_reduce<8>(acc, red_s, col, out, dst, norm, final);
}

// Any dtypes, alignment and width: one column a thread, the same rows and order as the vector kernel.
__global__ void __launch_bounds__(kBwdThreads)
    dora_bwd_kernel(void* g, DType gt, float* dst, const void* dy, DType dyt, const void* v, DType vt,
                    const float* scale, const float* norm, int64_t N, int64_t out, int64_t split_rows, bool final) {
  __shared__ float red_s[kBwdWarps * 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * 32 + lane;
  const int64_t n_begin = static_cast<int64_t>(blockIdx.y) * split_rows, n_end = min64(N, n_begin + split_rows);
  float acc[1] = {0.0f};
  if (col < out) {
    const float sc = scale[col];
    for (int64_t n = n_begin + warp; n < n_end; n += kBwdWarps) {
      const int64_t i = n * out + col;
      const float d = ld(dy, dyt, i), x = ld(v, vt, i);
      acc[0] = fmaf(d, x, acc[0]);
      st_elem(g, gt, i, sc * d);
    }
  }
  bwd_reduce<1>(acc, red_s, col, out, dst, norm, final);
}

// dmag[o] = rnd(dmag[o] + rnd(rnd(Σ_s part[s][o]) / norm[o])), s in order.
__global__ void dora_dmag_finish_kernel(float* dmag, const float* part, const float* norm, int64_t out, int splits) {
  ST_DORA_GRID_STRIDE(o, out) {
    float t = 0.0f;
    for (int j = 0; j < splits; ++j) t += part[j * out + o];
    dmag[o] = __fadd_rn(dmag[o], __fdiv_rn(t, norm[o]));
  }
}

}  // namespace

int64_t dora_norm_scratch_floats(int64_t out, int64_t in, int64_t r) {
  if (out == 0) return 0;
  const NormPlan p = plan_norm(out, in, r);
  return p.splits > 1 ? p.splits * out : 0;
}

int64_t dora_backward_scratch_floats(int64_t N, int64_t out) {
  if (N == 0 || out == 0) return 0;
  const BwdPlan p = plan_bwd(N, out);
  return p.splits > 1 ? p.splits * out : 0;
}

void launch_dora_norm(Tensor norm, Tensor scale, Tensor w, Tensor a, Tensor b, Tensor mag, float s, float* scratch,
                      cudaStream_t st) {
  const int64_t out = w.rows(), in = w.cols(), r = a.rows();
  if (out == 0) return;
  const NormPlan p = plan_norm(out, in, r);
  float* dst = p.splits > 1 ? scratch : norm.ptr<float>();
  float* sc = scale.empty() ? nullptr : scale.ptr<float>();
  const float* m = scale.empty() ? nullptr : mag.ptr<const float>();
  const float* ap = a.ptr<const float>();
  const float* bp = b.ptr<const float>();
  auto go = [&](auto tag) {
    using TW = decltype(tag);
    const TW* wp = static_cast<const TW*>(w.data);
    const int ri = static_cast<int>(r);
    if (p.KC == 8) norm_typed<8>(p, dst, sc, wp, ap, bp, m, out, in, ri, s, st);
    else if (p.KC == 16) norm_typed<16>(p, dst, sc, wp, ap, bp, m, out, in, ri, s, st);
    else norm_typed<32>(p, dst, sc, wp, ap, bp, m, out, in, ri, s, st);
  };
  if (w.dtype == DType::kBF16) go(__nv_bfloat16{});
  else go(float{});
  if (p.splits > 1) {
    dora_norm_finish_kernel<<<grid_for(out, kThreads), kThreads, 0, st>>>(norm.ptr<float>(), sc, m, scratch, out,
                                                                           static_cast<int>(p.splits));
    CUDA_CHECK_LAUNCH();
  }
}

void launch_dora_combine(Tensor y, Tensor scale, Tensor bias, Tensor residual, cudaStream_t s) {
  const int64_t n = y.numel(), out = y.cols();
  if (n == 0) return;
  const void* bp = bias.empty() ? nullptr : bias.data;
  const bool has_res = !residual.empty();
  const bool vec = vec_dtype(y.dtype) && out % 8 == 0 && aligned16(y.data) &&
                   (!has_res || (residual.dtype == y.dtype && aligned16(residual.data)));
  if (vec) {
    const int64_t groups = n / 8;
    auto go = [&](auto tag) {
      using T = decltype(tag);
      dora_combine_vec_kernel<T><<<grid_for(groups, kThreads), kThreads, 0, s>>>(
          static_cast<T*>(y.data), scale.ptr<const float>(), bp, bias.dtype,
          has_res ? static_cast<const T*>(residual.data) : nullptr, groups, out);
    };
    if (y.dtype == DType::kBF16) go(__nv_bfloat16{});
    else go(float{});
  } else {
    dora_combine_kernel<<<grid_for(n, kThreads), kThreads, 0, s>>>(y.data, y.dtype, scale.ptr<const float>(), bp,
                                                                    bias.dtype, has_res ? residual.data : nullptr,
                                                                    residual.dtype, n, out);
  }
  CUDA_CHECK_LAUNCH();
}

void launch_dora_backward(Tensor g, Tensor dmag, Tensor dy, Tensor v, Tensor scale, Tensor norm, float* scratch,
                          cudaStream_t s) {
  const int64_t N = dy.rows(), out = dy.cols();
  if (out == 0) return;  // N == 0 still runs: dmag += 0 / norm, as the reference does
  const BwdPlan p = plan_bwd(N, out);
  const bool final = p.splits == 1;
  float* dst = final ? dmag.ptr<float>() : scratch;
  const bool vec = vec_dtype(dy.dtype) && v.dtype == dy.dtype && g.dtype == dy.dtype && out % 8 == 0 &&
                   aligned16(g.data, dy.data, v.data);
  if (vec) {
    const dim3 grid(static_cast<unsigned>(cdiv(out, 32 * 8)), static_cast<unsigned>(p.splits));
    auto go = [&](auto tag) {
      using T = decltype(tag);
      dora_bwd_vec_kernel<T><<<grid, kBwdThreads, 0, s>>>(static_cast<T*>(g.data), dst,
                                                          static_cast<const T*>(dy.data),
                                                          static_cast<const T*>(v.data), scale.ptr<const float>(),
                                                          norm.ptr<const float>(), N, out, p.split_rows, final);
    };
    if (dy.dtype == DType::kBF16) go(__nv_bfloat16{});
    else go(float{});
  } else {
    const dim3 grid(static_cast<unsigned>(cdiv(out, 32)), static_cast<unsigned>(p.splits));
    dora_bwd_kernel<<<grid, kBwdThreads, 0, s>>>(g.data, g.dtype, dst, dy.data, dy.dtype, v.data, v.dtype,
                                                 scale.ptr<const float>(), norm.ptr<const float>(), N, out,
                                                 p.split_rows, final);
  }
  CUDA_CHECK_LAUNCH();
  if (!final) {
    dora_dmag_finish_kernel<<<grid_for(out, kThreads), kThreads, 0, s>>>(dmag.ptr<float>(), scratch,
                                                                          norm.ptr<const float>(), out,
                                                                          static_cast<int>(p.splits));
    CUDA_CHECK_LAUNCH();
  }
}

}  // namespace st::cuda
