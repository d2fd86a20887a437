// LoRA ops on tensor cores: lora_down / lora_dt (a row dot, t[N,r] = x · W), lora_up / lora_dx (a
// row update, y[N,C] += s · t · W) and lora_grad_a / lora_grad_b (column sums, g[r,C] += tᵀ · x) as
// mma.sync m16n8k16 kernels, for bf16 activations.
//
// Note [split LoRA products]: the SIMT kernels in lora_ops.cu are latency-bound at 10-35 us an op
// on model shapes (RESULTS session 3; a cuBLASLt GEMM per op with separate split/combine kernels
// was no better, session 4 call 2: launches and small kernels ate the gain). Tensor cores take bf16
// operands, and an f32 operand (A, B, t, dt) must not be rounded to bf16: the contract is f32 math
// from the stored values. So each f32 value v is carried as three bf16 parts
//   hi = bf16(v), mid = bf16(v - hi), lo = bf16(v - hi - mid)
// (each subtraction exact in f32; hi + mid + lo holds all 24 bits of v), split in registers as
// the operand is loaded. bf16 x bf16 products are exact in the f32 accumulators, so
//   * row dot (bf16 activation x f32 weight): x·hi, x·mid and x·lo accumulate separately and are
//     added smallest first: f32 math up to summation order.
//   * column sums (f32 t x bf16 activation): the three parts go into one f32 accumulator in turn
//     (lo, mid, hi each k-step): f32 dot-product accuracy.
//   * row update (f32 t x f32 weight): the six part pairs down to 2^-16 relative weight (lo·hi,
//     mid·mid, hi·lo, mid·hi, hi·mid, hi·hi, smallest first) go into one f32 accumulator; the
//     dropped pairs weigh < 2^-23.
// Every output element is produced by a fixed set of threads in a fixed order (grid shapes depend
// on the problem shape only): the same bits run after run, no atomics.
//
// Row dot: a block owns 16 rows; its 8 warps take the 32-column blocks of the reduction axis in
// turn (warp w: blocks w, w+8, ...), 4 blocks' loads issued before any use. The reduction axis
// is permuted within each 32-column block so a thread's x fragment is one 16-byte load per row
// (columns 8t..8t+7 feed k-steps 0 and 1); the weight fragment uses the same permutation. The
// 8 warps' partial sums meet in shared memory and are added in warp order. Where 16-row blocks
// alone leave the GPU half empty (N <= 2048), the reduction axis is also split over gridDim.y
// blocks, whose partials a second launch adds in split order (rowdot_splits). lora_dt on large
// shapes first copies B [out, r] transposed, so its weights take 16-byte loads too.
// Column sums: a block owns 64 columns and a split of the tokens (see colsum_tc_kernel and
// plan_colsum_tc).
// Row update: a warp owns a strip of 32 or 64 columns (its weight fragments split once, in
// registers) and walks row tiles of 16; the strip's output columns are permuted so y moves in
// 16-byte accesses; y is read and written once, rounded once, with lora_dx's dropout mask applied
// to the f32 product exactly as the SIMT kernel does. With LoRA dropout, lora_down and lora_grad_a
// form the dropped-out input in registers as x is loaded (dropped_input.cuh), never staged.
// Occupancy: the update and column-sum kernels are latency-bound, so their launch bounds hold
// them to 128 registers (2 and 4 blocks an SM; unbounded they took 148 / 178 registers and ran one
// and two blocks an SM: session 9 call 2, update 4096^2 24.5 -> 18.8 us).
// Plans depend on the problem shape only, never on the device, so the bits do too.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdlib>
#include <type_traits>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/dropped_input.cuh"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/ops.h"
#include "backend/dropout_rng.h"

namespace st::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kDotWarps = 8;     // warps of a row-dot block (the reduction axis is split over them)
constexpr int kDotUnroll = 4;    // 32-column blocks whose loads a warp issues before using any
constexpr int64_t kDotTargetBlocks = 264;  // ~2 blocks per SM on an H200: the row dot's K splits aim here
constexpr int kUpdWarps = 8;     // warps of a row-update block
constexpr int64_t kUpdTargetWarps = 2048;
constexpr int kSumWarps = 4;              // warps of a column-sum block (they split its tokens)
constexpr int kSumUnroll = 2;             // 16-token steps whose loads a warp issues before using any
constexpr int64_t kSumTargetBlocks = 528; // one wave of column-sum blocks on an H200 (4 a SM, 132 SMs)
constexpr int64_t kSumSplitRows = 256;    // tokens a column-sum block keeps at least (see plan_colsum_tc)
constexpr int64_t kDtTransposeMin = int64_t{1} << 23;  // lora_dt reads a transposed B from N x out this big

// STREAMTUNE_LORA_DOT_BLOCKS / _SUM_BLOCKS / _SUM_ROWS / _DT_T=<n> replace the plan constants above
// (A/B timing only: the first three change the summation order, so the bits; _DT_T (N x out) does not).
int64_t block_target(const char* name, int64_t dflt) {
  const char* e = std::getenv(name);
  if (!e || !*e) return dflt;
  const long long v = std::atoll(e);
  return v >= 1 ? v : dflt;
}
struct PlanKnobs {
  int64_t dot_blocks, sum_blocks, sum_rows, dt_transpose_min;
};
const PlanKnobs& knobs() {  // read once, at the first LoRA op
  static const PlanKnobs k{block_target("STREAMTUNE_LORA_DOT_BLOCKS", kDotTargetBlocks),
                           block_target("STREAMTUNE_LORA_SUM_BLOCKS", kSumTargetBlocks),
                           block_target("STREAMTUNE_LORA_SUM_ROWS", kSumSplitRows),
                           block_target("STREAMTUNE_LORA_DT_T", kDtTransposeMin)};
  return k;
}

// Three bf16 parts of two f32 values, as bf16x2 words (the lower k in the low half).
__device__ __forceinline__ void split_pair(float a, float b, uint32_t (&w)[3]) {
  const bf16 ah = __float2bfloat16_rn(a), bh = __float2bfloat16_rn(b);
  const float ar = __fsub_rn(a, __bfloat162float(ah)), br = __fsub_rn(b, __bfloat162float(bh));
  const bf16 am = __float2bfloat16_rn(ar), bm = __float2bfloat16_rn(br);
  const bf16 al = __float2bfloat16_rn(__fsub_rn(ar, __bfloat162float(am)));
  const bf16 bl = __float2bfloat16_rn(__fsub_rn(br, __bfloat162float(bm)));
  w[0] = static_cast<uint32_t>(__bfloat16_as_ushort(ah)) | (static_cast<uint32_t>(__bfloat16_as_ushort(bh)) << 16);
  w[1] = static_cast<uint32_t>(__bfloat16_as_ushort(am)) | (static_cast<uint32_t>(__bfloat16_as_ushort(bm)) << 16);
  w[2] = static_cast<uint32_t>(__bfloat16_as_ushort(al)) | (static_cast<uint32_t>(__bfloat16_as_ushort(bl)) << 16);
}

// out[n, j] = scale · sum_k x[n, k] · W(j, k), W(j, k) = w[j*wn + k*wk]; j < r <= 8·NT, K % 32 == 0.
// WCONTIG: wk == 1 (lora_down's A [r, K]), else lora_dt's B [K, r] (wk = r, wn = 1).
// DROP: x is read dropped out as `drop` says (lora_down with LoRA dropout: dropped_input.cuh).
// Two blocks an SM for r <= 16: the prefetched weights would otherwise take 164 registers.
template <int NT, bool WCONTIG, bool DROP>
__global__ void __launch_bounds__(kDotWarps * 32, NT <= 2 ? 2 : 1)
    rowdot_tc_kernel(float* out, const bf16* x, int64_t N, int64_t K, const float* w, int64_t wk, int64_t wn, int r,
                     float scale, float* part, InputDrop drop) {
  __shared__ float red[kDotWarps][16][8 * NT];
  const uint64_t seed = DROP ? drop.seed.for_p(drop.p) : 0;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * 16;
  const bool oka = row0 + g < N, okb = row0 + g + 8 < N;
  const bf16* xa = x + (row0 + g) * K;
  const bf16* xb = x + (row0 + g + 8) * K;
  const int64_t KB = K / 32;
  // Virtual warp vw of gridDim.y · kDotWarps takes the 32-column blocks vw, vw + stride, ...
  const int64_t vw = static_cast<int64_t>(blockIdx.y) * kDotWarps + warp, stride = kDotWarps * gridDim.y;
  float acc[3][NT][4];
#pragma unroll
  for (int p = 0; p < 3; ++p)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[p][nt][e] = 0.0f;

  // Weight values W(j = 8nt + g, k = c0 .. c0+7) of one 32-column block.
  auto load_w = [&](int64_t c0, int nt, float (&wv)[8]) {
    const int j = nt * 8 + g;
    if (j >= r) {
#pragma unroll
      for (int i = 0; i < 8; ++i) wv[i] = 0.0f;
    } else if (WCONTIG) {
      const float4 lo = __ldg(reinterpret_cast<const float4*>(w + j * wn + c0));
      const float4 hi = __ldg(reinterpret_cast<const float4*>(w + j * wn + c0 + 4));
      wv[0] = lo.x, wv[1] = lo.y, wv[2] = lo.z, wv[3] = lo.w, wv[4] = hi.x, wv[5] = hi.y, wv[6] = hi.z, wv[7] = hi.w;
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) wv[i] = __ldg(w + (c0 + i) * wk + j * wn);
    }
  };
  // Small ranks load the weights of all kDotUnroll blocks with the x loads (one latency per trip);
  // larger ones (more registers) load them block by block.
  constexpr bool kPre = NT <= 2;
  for (int64_t kb0 = vw; kb0 < KB; kb0 += stride * kDotUnroll) {
    uint4 va[kDotUnroll], vb[kDotUnroll];
    float wpre[kPre ? kDotUnroll : 1][NT][8];
#pragma unroll
    for (int u = 0; u < kDotUnroll; ++u) {
      const int64_t kb = kb0 + u * stride, c0 = kb * 32 + 8 * t;
      const bool in = kb < KB;
      va[u] = in && oka ? __ldg(reinterpret_cast<const uint4*>(xa + c0)) : make_uint4(0, 0, 0, 0);
      vb[u] = in && okb ? __ldg(reinterpret_cast<const uint4*>(xb + c0)) : make_uint4(0, 0, 0, 0);
      if constexpr (kPre) {
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          if (in) load_w(c0, nt, wpre[u][nt]);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kDotUnroll; ++u) {
      const int64_t kb = kb0 + u * stride, c0 = kb * 32 + 8 * t;
      if (kb >= KB) break;
      if constexpr (DROP) {  // rows past N hold zeros, which stay zeros
        va[u] = dropped_input8(va[u], seed, (row0 + g) * K + c0, drop.p);
        vb[u] = dropped_input8(vb[u], seed, (row0 + g + 8) * K + c0, drop.p);
      }
      const uint32_t a0[4] = {va[u].x, vb[u].x, va[u].y, vb[u].y};  // k-step 0: columns 8t..8t+3
      const uint32_t a1[4] = {va[u].z, vb[u].z, va[u].w, vb[u].w};  // k-step 1: columns 8t+4..8t+7
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        float wl[8];
        if constexpr (!kPre) load_w(c0, nt, wl);
        const float* wv = kPre ? wpre[kPre ? u : 0][nt] : wl;
        uint32_t s[4][3];
#pragma unroll
        for (int q = 0; q < 4; ++q) split_pair(wv[2 * q], wv[2 * q + 1], s[q]);
#pragma unroll
        for (int p = 0; p < 3; ++p) {
          mma16816(acc[p][nt], a0, s[0][p], s[1][p]);
          mma16816(acc[p][nt], a1, s[2][p], s[3][p]);
        }
      }
    }
  }
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      red[warp][g + (e >= 2 ? 8 : 0)][nt * 8 + 2 * t + (e & 1)] =
          __fadd_rn(__fadd_rn(acc[2][nt][e], acc[1][nt][e]), acc[0][nt][e]);
  __syncthreads();
  for (int i = threadIdx.x; i < 16 * r; i += blockDim.x) {
    const int rr = i / r, j = i % r;
    if (row0 + rr >= N) continue;
    float s = red[0][rr][j];
#pragma unroll
    for (int q = 1; q < kDotWarps; ++q) s = __fadd_rn(s, red[q][rr][j]);
    if (gridDim.y == 1) out[(row0 + rr) * r + j] = __fmul_rn(scale, s);
    else part[(static_cast<int64_t>(blockIdx.y) * N + row0 + rr) * r + j] = s;  // summed by launch_lora_sum_splits
  }
}

// y[n, c] = rnd(y + mask_or_scale(sum_k t[n, k] · W(k, c))), W(k, c) = w[k*wk + c*wc], r <= 16·KS,
// C % 8 == 0. p > 0: dropout on the f32 product (element n*C + c), as row_update_kernel; else · scale.
// A warp's strip is NTW/4 groups of 32 columns. The output columns of the mma are permuted within a
// group (upd_col) so that thread t's accumulators for one row are 8 consecutive columns: y moves in
// 16-byte loads and stores, 4 threads covering 64 contiguous bytes of a row.
__device__ __forceinline__ int upd_col(int nt, int j) { return (nt / 4) * 32 + (j / 2) * 8 + (nt % 4) * 2 + (j % 2); }

template <int KS, int NTW>
__global__ void __launch_bounds__(kUpdWarps * 32, KS == 1 ? 2 : 1) update_tc_kernel(bf16* y, const float* tm, int64_t N, int64_t C,
                                                                   const float* w, int64_t wk, int64_t wc, int r,
                                                                   int tiles_per_warp, float scale, float p,
                                                                   DropoutSeed seed_arg) {
  const uint64_t seed = seed_arg.for_p(p);
  static_assert(NTW % 4 == 0, "whole 32-column groups");
  constexpr int kGroups = NTW / 4;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int64_t c_base = static_cast<int64_t>(blockIdx.x) * (8 * NTW);
  // Weight fragments of this strip, split once: bw[part][nt][ks][b0/b1] (column j = g of n-tile nt).
  uint32_t bw[3][NTW][KS][2];
#pragma unroll
  for (int nt = 0; nt < NTW; ++nt) {
    const int64_t c = c_base + upd_col(nt, g);
#pragma unroll
    for (int ks = 0; ks < KS; ++ks)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int k = ks * 16 + 2 * t + 8 * h;
        const bool ok = c < C && k < r;  // r % 8 == 0: k < r implies k + 1 < r
        const float w0 = ok ? __ldg(w + k * wk + c * wc) : 0.0f;
        const float w1 = ok ? __ldg(w + (k + 1) * wk + c * wc) : 0.0f;
        uint32_t s[3];
        split_pair(w0, w1, s);
#pragma unroll
        for (int q = 0; q < 3; ++q) bw[q][nt][ks][h] = s[q];
      }
  }
  const float keep_scale = dropout_scale(p);
  const int64_t tile0 = (static_cast<int64_t>(blockIdx.y) * kUpdWarps + warp) * tiles_per_warp;
  for (int64_t tile = tile0; tile < tile0 + tiles_per_warp; ++tile) {
    const int64_t m0 = tile * 16;
    if (m0 >= N) break;
    const int64_t rows[2] = {m0 + g, m0 + g + 8};
    // This thread's y: rows g and g+8, columns c_base + 32·grp + 8t .. +7 (issued before the math).
    uint4 yv[2][kGroups];
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int grp = 0; grp < kGroups; ++grp) {
        const int64_t c = c_base + 32 * grp + 8 * t;
        yv[h][grp] = make_uint4(0, 0, 0, 0);
        if (rows[h] < N && c < C) yv[h][grp] = *reinterpret_cast<const uint4*>(y + rows[h] * C + c);
      }
    // A fragments of t (rows g, g+8), split: at[part][ks][4].
    uint32_t at[3][KS][4];
#pragma unroll
    for (int ks = 0; ks < KS; ++ks)
#pragma unroll
      for (int q = 0; q < 4; ++q) {  // q: (row a, k lo) (row b, k lo) (row a, k hi) (row b, k hi)
        const int64_t rr = rows[q & 1];
        const int k = ks * 16 + 2 * t + (q >= 2 ? 8 : 0);
        float2 v = make_float2(0.0f, 0.0f);
        if (rr < N && k < r) v = __ldg(reinterpret_cast<const float2*>(tm + rr * r + k));
        uint32_t sp[3];
        split_pair(v.x, v.y, sp);
#pragma unroll
        for (int pp = 0; pp < 3; ++pp) at[pp][ks][q] = sp[pp];
      }
    float acc[NTW][4];
#pragma unroll
    for (int nt = 0; nt < NTW; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[nt][e] = 0.0f;
    // Part pairs (t part, w part), smallest first.
    constexpr int kPairs[6][2] = {{2, 0}, {1, 1}, {0, 2}, {1, 0}, {0, 1}, {0, 0}};
#pragma unroll
    for (int pi = 0; pi < 6; ++pi)
#pragma unroll
      for (int ks = 0; ks < KS; ++ks)
#pragma unroll
        for (int nt = 0; nt < NTW; ++nt)
          mma16816(acc[nt], at[kPairs[pi][0]][ks], bw[kPairs[pi][1]][nt][ks][0], bw[kPairs[pi][1]][nt][ks][1]);
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int grp = 0; grp < kGroups; ++grp) {
        const int64_t c = c_base + 32 * grp + 8 * t;
        if (rows[h] >= N || c >= C) continue;
        // Column 8t + 2·(nt%4) + e of the group is acc[4·grp + nt%4][2h + e].
        __nv_bfloat162* yp = reinterpret_cast<__nv_bfloat162*>(&yv[h][grp]);
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const int64_t i = rows[h] * C + c + 2 * q;
          float v0 = acc[4 * grp + q][2 * h], v1 = acc[4 * grp + q][2 * h + 1];
          if (p > 0.0f) {
            bool k0, k1;  // i is even (C % 8 == 0): one hash for the pair
            dropout_keep2(seed, static_cast<uint64_t>(i), p, &k0, &k1);
            k0 = k0 && p < 1.0f;
            k1 = k1 && p < 1.0f;
            v0 = k0 ? v0 * keep_scale : 0.0f;
            v1 = k1 ? v1 * keep_scale : 0.0f;
          } else {
            v0 *= scale;
            v1 *= scale;
          }
          const float2 old = __bfloat1622float2(yp[q]);
          yp[q] = __floats2bfloat162_rn(old.x + v0, old.y + v1);
        }
        *reinterpret_cast<uint4*>(y + rows[h] * C + c) = yv[h][grp];
      }
  }
}

// Column sums (lora_grad_a da += dtᵀ·x, lora_grad_b db += s·dyᵀ·t): G(k, c) = sum_n T(n, k) · X(n, c)
// over the tokens of split blockIdx.y, for k < r <= 16·MT and the 64 columns of strip blockIdx.x.
// mma with M = the rank (Tᵀ, split in registers), N = columns, K = tokens. A thread's B fragments
// come from four 16-byte loads of X (rows n+2t, n+2t+1, n+2t+8, n+2t+9, columns 8g..8g+7): the
// strip's columns are permuted (logical column j of n-tile nt is physical column 8j + nt) and
// __byte_perm pairs the two rows' values of one column. One f32 accumulator takes the three parts
// (lo, mid, hi) in turn: f32 dot-product accuracy. The block's warps take the split's 16-token
// steps in turn and meet in shared memory (warp order); final: g = rnd(g + rnd(scale · sum)), else
// the split's partial goes to part[split][k][c] for launch_lora_add_splits. DROP: X is read dropped
// out as `drop` says (lora_grad_a with LoRA dropout: dropped_input.cuh).
template <int MT, bool DROP>
__global__ void __launch_bounds__(kSumWarps * 32, MT == 1 ? 4 : 1) colsum_tc_kernel(float* dst, int64_t gks, int64_t gcs,
                                                                   const float* tm, const bf16* x, int64_t N,
                                                                   int64_t C, int r, int64_t split_rows, float scale,
                                                                   int final, InputDrop drop) {
  __shared__ float red[kSumWarps][16 * MT][64];
  const uint64_t seed = DROP ? drop.seed.for_p(drop.p) : 0;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int64_t c_base = static_cast<int64_t>(blockIdx.x) * 64;
  const int64_t n_lo = static_cast<int64_t>(blockIdx.y) * split_rows, n_hi = min(N, n_lo + split_rows);
  const bool cok = c_base + 8 * g < C;  // C % 8 == 0: the thread's 8 columns are all in or all out
  const bf16* xc = x + c_base + 8 * g;
  float acc[MT][8][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][nt][e] = 0.0f;
  constexpr int kRowOff[4] = {0, 1, 8, 9};  // + 2t: the rows of b0 (0, 1) and b1 (8, 9)
  for (int64_t n00 = n_lo + warp * 16; n00 < n_hi; n00 += kSumWarps * 16 * kSumUnroll) {
    uint4 xv[kSumUnroll][4];
    float tv[kSumUnroll][MT][4][2];  // T values of a[q]'s pair, all loaded with the x rows
#pragma unroll
    for (int u = 0; u < kSumUnroll; ++u) {
      const int64_t n0 = n00 + u * kSumWarps * 16;
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int64_t n = n0 + 2 * t + kRowOff[q];
        xv[u][q] = make_uint4(0, 0, 0, 0);
        if (cok && n < n_hi) xv[u][q] = __ldg(reinterpret_cast<const uint4*>(xc + n * C));
      }
      // A = Tᵀ: a[0] (k0; rows 2t, 2t+1) a[1] (k0+8; 2t, 2t+1) a[2] (k0; 2t+8, 2t+9) a[3] (k0+8; 2t+8, 2t+9).
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const int k = 16 * mt + g + (q & 1 ? 8 : 0);
          const int64_t n = n0 + 2 * t + (q >= 2 ? 8 : 0);
          tv[u][mt][q][0] = k < r && n < n_hi ? __ldg(tm + n * r + k) : 0.0f;
          tv[u][mt][q][1] = k < r && n + 1 < n_hi ? __ldg(tm + (n + 1) * r + k) : 0.0f;
        }
    }
#pragma unroll
    for (int u = 0; u < kSumUnroll; ++u) {
      const int64_t n0 = n00 + u * kSumWarps * 16;
      if (n0 >= n_hi) break;
      if constexpr (DROP) {  // rows past the split hold zeros, which stay zeros
#pragma unroll
        for (int q = 0; q < 4; ++q)
          xv[u][q] = dropped_input8(xv[u][q], seed, (n0 + 2 * t + kRowOff[q]) * C + c_base + 8 * g, drop.p);
      }
      uint32_t b[2][8];  // b[0] = b0 (rows 2t, 2t+1), b[1] = b1 (rows 2t+8, 2t+9), per n-tile
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t* r0 = reinterpret_cast<const uint32_t*>(&xv[u][2 * h]);
        const uint32_t* r1 = reinterpret_cast<const uint32_t*>(&xv[u][2 * h + 1]);
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) b[h][nt] = __byte_perm(r0[nt / 2], r1[nt / 2], nt % 2 ? 0x7632 : 0x5410);
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        uint32_t a[3][4];
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          uint32_t sp[3];
          split_pair(tv[u][mt][q][0], tv[u][mt][q][1], sp);
#pragma unroll
          for (int pp = 0; pp < 3; ++pp) a[pp][q] = sp[pp];
        }
#pragma unroll
        for (int pp = 2; pp >= 0; --pp)
#pragma unroll
          for (int nt = 0; nt < 8; ++nt) mma16816(acc[mt][nt], a[pp], b[0][nt], b[1][nt]);
      }
    }
  }
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        red[warp][16 * mt + g + (e >= 2 ? 8 : 0)][8 * (2 * t + (e & 1)) + nt] = acc[mt][nt][e];
  __syncthreads();
  for (int i = threadIdx.x; i < 16 * MT * 64; i += blockDim.x) {
    const int k = i / 64, cc = i % 64;
    const int64_t c = c_base + cc;
    if (k >= r || c >= C) continue;
    float s = red[0][k][cc];
#pragma unroll
    for (int q = 1; q < kSumWarps; ++q) s = __fadd_rn(s, red[q][k][cc]);
    if (final) {
      float& o = dst[k * gks + c * gcs];
      o = __fadd_rn(o, __fmul_rn(scale, s));
    } else {
      dst[(static_cast<int64_t>(blockIdx.y) * r + k) * C + c] = s;
    }
  }
}

struct SumTcPlan {
  int64_t strips, splits, split_rows;
};
// Token splits: up to one wave of blocks (4 a SM: kSumTargetBlocks), but a block keeps >= ~256
// tokens once N allows 4 splits, so the partials stay small beside the activation they sum
// (session 9 calls 2-3, us: [2048, 2048] 8 splits 11.9, 16 splits 13.6; [2048, 11008] 1 split
// 36.8, 3 splits 30.8, 8 splits 42.7; [4096, 4096] 4 / 8 / 16 splits 22.5 / 22.4 / 28.8).
SumTcPlan plan_colsum_tc(int64_t N, int64_t C) {
  SumTcPlan p;
  p.strips = (C + 63) / 64;
  const int64_t step = kSumWarps * 16 * kSumUnroll;  // tokens a block takes per loop trip
  const int64_t cap = std::min(N / step, std::max<int64_t>(4, N / knobs().sum_rows));
  const int64_t want = std::clamp<int64_t>(knobs().sum_blocks / p.strips, 1, std::max<int64_t>(1, cap));
  p.split_rows = ((N + want - 1) / want + step - 1) / step * step;
  p.splits = (N + p.split_rows - 1) / p.split_rows;
  return p;
}

void colsum_tc(float* g, int64_t gks, int64_t gcs, const float* tm, const bf16* x, int64_t N, int64_t C, int r,
               float scale, float* scratch, cudaStream_t s, InputDrop drop = {}) {
  if (N == 0 || C == 0) return;
  const SumTcPlan p = plan_colsum_tc(N, C);
  const bool final = p.splits == 1;
  const dim3 grid(static_cast<unsigned>(p.strips), static_cast<unsigned>(p.splits));
  float* dst = final ? g : scratch;
  auto go = [&](auto mt, auto dropping) {
    colsum_tc_kernel<decltype(mt)::value, decltype(dropping)::value>
        <<<grid, kSumWarps * 32, 0, s>>>(dst, gks, gcs, tm, x, N, C, r, p.split_rows, scale, final, drop);
  };
  using One = std::integral_constant<int, 1>;
  using Two = std::integral_constant<int, 2>;
  if (drop.on()) r <= 16 ? go(One{}, std::true_type{}) : go(Two{}, std::true_type{});
  else r <= 16 ? go(One{}, std::false_type{}) : go(Two{}, std::false_type{});
  CUDA_CHECK(cudaGetLastError());
  if (!final) launch_lora_add_splits(g, gks, gcs, scratch, C, r, static_cast<int>(p.splits), scale, s);
}

bool tc_disabled() {
  static const bool off = env_switch("STREAMTUNE_LORA", "kernels", "LoRA ops on the SIMT kernels only");
  return off;
}

// K splits of a row dot: a block owns 16 rows, so N = 2048 gives only 128 blocks of 8 warps (one
// a SM, each warp's load-then-split trips exposed back to back); the reduction axis is split over
// gridDim.y blocks until ~kDotTargetBlocks run, each virtual warp keeping >= 1 column block.
// Depends on the shape only (not the device), so the bits do too.
int64_t rowdot_splits(int64_t N, int64_t K) {
  const int64_t row_blocks = (N + 15) / 16, KB = K / 32;
  return std::clamp<int64_t>(knobs().dot_blocks / std::max<int64_t>(row_blocks, 1), 1,
                             std::max<int64_t>(1, KB / kDotWarps));
}

template <bool WCONTIG>
void rowdot_tc(float* out, const bf16* x, int64_t N, int64_t K, const float* w, int64_t wk, int64_t wn, int r,
               float scale, float* scratch, cudaStream_t s, InputDrop drop = {}) {
  if (N == 0) return;
  const int64_t splits = rowdot_splits(N, K);
  const dim3 grid(static_cast<unsigned>((N + 15) / 16), static_cast<unsigned>(splits));
  const int threads = kDotWarps * 32;
  auto go = [&](auto nt, auto dropping) {
    rowdot_tc_kernel<decltype(nt)::value, WCONTIG, decltype(dropping)::value>
        <<<grid, threads, 0, s>>>(out, x, N, K, w, wk, wn, r, scale, scratch, drop);
  };
  auto by_rank = [&](auto dropping) {
    if (r <= 8) go(std::integral_constant<int, 1>{}, dropping);
    else if (r <= 16) go(std::integral_constant<int, 2>{}, dropping);
    else if (r <= 32) go(std::integral_constant<int, 4>{}, dropping);
    else go(std::integral_constant<int, 8>{}, dropping);
  };
  if (drop.on()) by_rank(std::true_type{});
  else by_rank(std::false_type{});
  CUDA_CHECK(cudaGetLastError());
  if (splits > 1) launch_lora_sum_splits(out, scratch, N * r, static_cast<int>(splits), scale, s);
}

template <int KS, int NTW>
void update_tc_typed(bf16* y, const float* tm, int64_t N, int64_t C, const float* w, int64_t wk, int64_t wc, int r,
                     float scale, float p, DropoutSeed seed, cudaStream_t s) {
  const int64_t strips = (C + 8 * NTW - 1) / (8 * NTW), tiles = (N + 15) / 16;
  const int64_t per_warp = std::clamp<int64_t>(strips * tiles / kUpdTargetWarps, 1, 16);
  const int64_t groups = (tiles + per_warp * kUpdWarps - 1) / (per_warp * kUpdWarps);
  const dim3 grid(static_cast<unsigned>(strips), static_cast<unsigned>(groups));
  update_tc_kernel<KS, NTW><<<grid, kUpdWarps * 32, 0, s>>>(y, tm, N, C, w, wk, wc, r, static_cast<int>(per_warp),
                                                            scale, p, seed);
  CUDA_CHECK(cudaGetLastError());
}

void update_tc(bf16* y, const float* tm, int64_t N, int64_t C, const float* w, int64_t wk, int64_t wc, int r,
               float scale, float p, DropoutSeed seed, cudaStream_t s) {
  if (r <= 16) update_tc_typed<1, 8>(y, tm, N, C, w, wk, wc, r, scale, p, seed, s);
  else if (r <= 32) update_tc_typed<2, 4>(y, tm, N, C, w, wk, wc, r, scale, p, seed, s);
  else update_tc_typed<4, 4>(y, tm, N, C, w, wk, wc, r, scale, p, seed, s);
}

// bt[j, k] = b[k, j] for b [K, r]: lora_dt's B [out, r] as rows of the reduction axis, so the row dot
// takes it with 16-byte loads (its strided path issues 8 scalar loads where this takes 2). The same
// values reach the same mma in the same order: the bits do not depend on the path.
__global__ void transpose_kr_kernel(float* bt, const float* b, int64_t K, int r) {
  const int64_t n = K * r;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = i / K, k = i % K;
    bt[i] = __ldg(b + k * r + j);
  }
}

int64_t align4(int64_t n) { return (n + 3) / 4 * 4; }
// Where the strided loads cost more than the extra launch (session 9 call 3, us: [2048, 11008]
// 45.5 -> 37.5, [4096, 4096] 29.8 -> 24.6; [512, 4864] 10.0 -> 12.1, [2048, 2048] no change).
bool dt_transposed(int64_t N, int64_t K) { return N * K >= knobs().dt_transpose_min; }

}  // namespace

bool lora_tc_rowdot_ok(const Tensor& act, int64_t r) {
  return !tc_disabled() && act.dtype == DType::kBF16 && r > 0 && r <= 64 && r % 8 == 0 && act.cols() % 32 == 0 &&
         aligned16(act.data);
}

bool lora_tc_update_ok(const Tensor& act, const Tensor& rt, int64_t r) {
  // rt (t or dt, f32 [N, r]) is read in float2 pairs.
  return !tc_disabled() && act.dtype == DType::kBF16 && r > 0 && r <= 64 && r % 8 == 0 && act.cols() % 8 == 0 &&
         aligned16(act.data) && reinterpret_cast<uintptr_t>(rt.data) % 8 == 0;
}


int64_t lora_tc_rowdot_scratch_floats(int64_t N, int64_t K, int64_t r, bool dt) {
  const int64_t splits = rowdot_splits(N, K);
  return align4(splits > 1 ? splits * N * r : 0) + (dt && dt_transposed(N, K) ? K * r : 0);
}

void launch_lora_down_tc(Tensor t, Tensor x, Tensor a, float dropout_p, DropoutSeed seed, float* scratch,
                         cudaStream_t s) {
  const int64_t in = x.cols();
  const InputDrop drop{dropout_p, seed};
  // A [r, in] rows feed float4 loads when 16-byte aligned; otherwise the strided path.
  if (aligned16(a.data))
    rowdot_tc<true>(t.ptr<float>(), x.ptr<const bf16>(), x.rows(), in, a.ptr<const float>(), /*wk=*/1, /*wn=*/in,
                    static_cast<int>(a.rows()), 1.0f, scratch, s, drop);
  else
    rowdot_tc<false>(t.ptr<float>(), x.ptr<const bf16>(), x.rows(), in, a.ptr<const float>(), /*wk=*/1, /*wn=*/in,
                     static_cast<int>(a.rows()), 1.0f, scratch, s, drop);
}

void launch_lora_dt_tc(Tensor dt, Tensor dy, Tensor b, float scale, float* scratch, cudaStream_t s) {
  const int64_t r = b.cols(), out = dy.cols();
  if (dt_transposed(dy.rows(), out)) {
    float* bt = scratch + lora_tc_rowdot_scratch_floats(dy.rows(), out, r, /*dt=*/false);
    const int64_t n = out * r;
    transpose_kr_kernel<<<static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 1024)), 256, 0, s>>>(
        bt, b.ptr<const float>(), out, static_cast<int>(r));
    CUDA_CHECK(cudaGetLastError());
    rowdot_tc<true>(dt.ptr<float>(), dy.ptr<const bf16>(), dy.rows(), out, bt, /*wk=*/1, /*wn=*/out,
                    static_cast<int>(r), scale, scratch, s);
    return;
  }
  rowdot_tc<false>(dt.ptr<float>(), dy.ptr<const bf16>(), dy.rows(), out, b.ptr<const float>(), /*wk=*/r,
                   /*wn=*/1, static_cast<int>(r), scale, scratch, s);
}

void launch_lora_up_tc(Tensor y, Tensor t, Tensor b, float scale, cudaStream_t s) {
  const int64_t r = b.cols();
  update_tc(y.ptr<bf16>(), t.ptr<const float>(), y.rows(), y.cols(), b.ptr<const float>(), /*wk=*/1, /*wc=*/r,
            static_cast<int>(r), scale, 0.0f, 0, s);
}

void launch_lora_dx_tc(Tensor dx, Tensor dt, Tensor a, float dropout_p, DropoutSeed seed, cudaStream_t s) {
  const int64_t in = dx.cols();
  update_tc(dx.ptr<bf16>(), dt.ptr<const float>(), dx.rows(), in, a.ptr<const float>(), /*wk=*/in, /*wc=*/1,
            static_cast<int>(a.rows()), 1.0f, dropout_p, seed, s);
}

bool lora_tc_colsum_ok(const Tensor& act, int64_t r) {
  return !tc_disabled() && act.dtype == DType::kBF16 && r > 0 && r <= 32 && r % 8 == 0 && act.cols() % 8 == 0 &&
         aligned16(act.data);
}

int64_t lora_tc_colsum_scratch_floats(int64_t N, int64_t C, int64_t r) {
  const SumTcPlan p = plan_colsum_tc(N, C);
  return p.splits > 1 ? p.splits * r * C : 0;
}

void launch_lora_grad_b_tc(Tensor db, Tensor dy, Tensor t, float scale, float* scratch, cudaStream_t s) {
  const int64_t r = t.cols();
  // G(k, c) = db[c, k]: the activation's columns are db's rows.
  colsum_tc(db.ptr<float>(), /*gks=*/1, /*gcs=*/r, t.ptr<const float>(), dy.ptr<const bf16>(), dy.rows(), dy.cols(),
            static_cast<int>(r), scale, scratch, s);
}

void launch_lora_grad_a_tc(Tensor da, Tensor dt, Tensor x, float dropout_p, DropoutSeed seed, float* scratch,
                           cudaStream_t s) {
  const int64_t in = x.cols();
  colsum_tc(da.ptr<float>(), /*gks=*/in, /*gcs=*/1, dt.ptr<const float>(), x.ptr<const bf16>(), x.rows(), in,
            static_cast<int>(dt.cols()), 1.0f, scratch, s, {dropout_p, seed});
}

}  // namespace st::cuda
