// The LoRA ops as cuBLASLt GEMMs on exact bf16 splits of their f32 operands (lora_split.h Note
// [split LoRA products]). Two small kernels around each GEMM: pack (f32 -> stacked bf16 parts) and
// combine (f32 partial sums of the three parts -> the op's f32 output, scaled / accumulated).
#include "backend/cuda/lora_split.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/gemm.h"

namespace st::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 1024;

// The parts each operand is stacked into. Three parts: hi, mid, lo (a bf16 x f32 product). Six:
// the pairs (hi,hi) (hi,mid) (mid,hi) (hi,lo) (mid,mid) (lo,hi) of an f32 x f32 product, left
// operand's part first (kPairLeft) or right's (kPairRight).
struct Parts {
  int n;
  uint8_t p[6];
};
constexpr Parts kParts3{3, {0, 1, 2}};
constexpr Parts kPairLeft{6, {0, 0, 1, 0, 1, 2}};
constexpr Parts kPairRight{6, {0, 1, 0, 2, 1, 0}};

// One f32 matrix src [rows, cols] to pack: along_cols stacks the parts within each row (dst
// [rows, n*cols]); otherwise as row blocks (dst [n*rows, cols]).
struct PackJob {
  bf16* dst;
  const float* src;
  int64_t rows, cols;
  int along_cols;
  Parts parts;
};

__device__ __forceinline__ void split3(float v, bf16 out[3]) {
  out[0] = __float2bfloat16_rn(v);
  const float r1 = __fsub_rn(v, __bfloat162float(out[0]));  // exact: v and hi share the top bits
  out[1] = __float2bfloat16_rn(r1);
  out[2] = __float2bfloat16_rn(__fsub_rn(r1, __bfloat162float(out[1])));
}

// Two jobs per launch (blockIdx.y): an f32 x f32 op packs both operands at once.
__global__ void pack_kernel(PackJob j0, PackJob j1) {
  const PackJob& j = blockIdx.y == 0 ? j0 : j1;
  const int64_t n = j.rows * j.cols;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e / j.cols, c = e % j.cols;
    bf16 part[3];
    split3(j.src[e], part);
    for (int p = 0; p < j.parts.n; ++p) {
      const int64_t at = j.along_cols ? (i * j.parts.n + p) * j.cols + c : (p * j.rows + i) * j.cols + c;
      j.dst[at] = part[j.parts.p[p]];
    }
  }
}

// out[R, C] (=|+=) rnd(scale · ((lo + mid) + hi)) from the f32 partial sums of the three parts in
// P: [R, 3C] (along_cols) or [3R, C]. __f*_rn: no contraction into an FMA, so accumulating gives the
// bits of computing into zero and adding afterwards (backend.h, dist Note [exact reduction]).
__global__ void combine_kernel(float* out, const float* P, int64_t R, int64_t C, int along_cols, float scale,
                               int accumulate) {
  const int64_t n = R * C;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e / C, c = e % C;
    float v[3];
    for (int p = 0; p < 3; ++p) v[p] = along_cols ? P[(i * 3 + p) * C + c] : P[(p * R + i) * C + c];
    const float s = __fmul_rn(scale, __fadd_rn(__fadd_rn(v[2], v[1]), v[0]));
    out[e] = accumulate ? __fadd_rn(out[e], s) : s;
  }
}

unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks));
}

void pack(const PackJob& a, const PackJob* b, cudaStream_t s) {
  const int64_t n = std::max(a.rows * a.cols, b ? b->rows * b->cols : 0);
  if (n == 0) return;
  pack_kernel<<<dim3(blocks_for(n), b ? 2 : 1), kThreads, 0, s>>>(a, b ? *b : a);
  CUDA_CHECK(cudaGetLastError());
}

void combine(Tensor out, const float* P, bool along_cols, float scale, bool accumulate, cudaStream_t s) {
  const int64_t R = out.rows(), C = out.cols();
  if (R * C == 0) return;
  combine_kernel<<<blocks_for(R * C), kThreads, 0, s>>>(out.ptr<float>(), P, R, C, along_cols, scale, accumulate);
  CUDA_CHECK(cudaGetLastError());
}

// Scratch carve: P (f32 partial sums), then two bf16 pack regions, each 256-byte aligned.
struct Sizes {
  int64_t p_floats, u_elems, v_elems;
};
Sizes sizes_of(LoraSplitOp op, int64_t N, int64_t in, int64_t out, int64_t r) {
  switch (op) {
    case LoraSplitOp::kDown: return {N * 3 * r, 3 * r * in, 0};
    case LoraSplitOp::kUp: return {0, N * 6 * r, out * 6 * r};
    case LoraSplitOp::kGradB: return {out * 3 * r, N * 3 * r, 0};
    case LoraSplitOp::kDt: return {N * 3 * r, out * 3 * r, 0};
    case LoraSplitOp::kGradA: return {3 * r * in, N * 3 * r, 0};
    case LoraSplitOp::kDx: return {0, N * 6 * r, 6 * r * in};
  }
  return {0, 0, 0};
}
constexpr int64_t kAlignFloats = 64;
int64_t round_up(int64_t v) { return (v + kAlignFloats - 1) / kAlignFloats * kAlignFloats; }

struct Carve {
  float* p;
  bf16* u;
  bf16* v;
};
Carve carve(float* scratch, const Sizes& z) {
  float* u = scratch + round_up(z.p_floats);
  float* v = u + round_up((z.u_elems + 1) / 2);
  return {scratch, reinterpret_cast<bf16*>(u), reinterpret_cast<bf16*>(v)};
}

PackJob job(bf16* dst, const Tensor& src, bool along_cols, Parts parts) {
  return {dst, src.ptr<const float>(), src.rows(), src.cols(), along_cols ? 1 : 0, parts};
}

bool kernels_forced() {
  static const bool forced = [] {
    const char* e = std::getenv("STREAMTUNE_LORA");
    const bool k = e != nullptr && std::strcmp(e, "kernels") == 0;
    if (k) std::fprintf(stderr, "streamtune: STREAMTUNE_LORA=kernels: LoRA ops on the SIMT kernels\n");
    return k;
  }();
  return forced;
}

}  // namespace

bool lora_split_eligible(const Tensor& act, int64_t r) {
  return act.dtype == DType::kBF16 && r > 0 && r % 8 == 0 && act.cols() % 8 == 0 && !kernels_forced();
}

int64_t lora_split_scratch_floats(LoraSplitOp op, int64_t N, int64_t in, int64_t out, int64_t r) {
  const Sizes z = sizes_of(op, N, in, out, r);
  return round_up(z.p_floats) + round_up((z.u_elems + 1) / 2) + round_up((z.v_elems + 1) / 2);
}

void split_lora_down(GemmRunner& g, Tensor t, Tensor x, Tensor a, float* scratch, cudaStream_t s) {
  const int64_t N = x.rows(), in = x.cols(), r = a.rows();
  const Carve c = carve(scratch, sizes_of(LoraSplitOp::kDown, N, in, 0, r));
  const PackJob ja = job(c.u, a, false, kParts3);
  pack(ja, nullptr, s);
  Tensor P(c.p, DType::kF32, {N, 3 * r});
  g.run(P, x, Tensor(c.u, DType::kBF16, {3 * r, in}), {.trans_b = Trans::kYes}, s, nullptr, 0);
  combine(t, c.p, /*along_cols=*/true, 1.0f, /*accumulate=*/false, s);
}

void split_lora_up(GemmRunner& g, Tensor y, Tensor t, Tensor b, float scale, float* scratch, cudaStream_t s) {
  const int64_t N = y.rows(), out = y.cols(), r = t.cols();
  const Carve c = carve(scratch, sizes_of(LoraSplitOp::kUp, N, 0, out, r));
  const PackJob jt = job(c.u, t, true, kPairLeft), jb = job(c.v, b, true, kPairRight);
  pack(jt, &jb, s);
  g.run(y, Tensor(c.u, DType::kBF16, {N, 6 * r}), Tensor(c.v, DType::kBF16, {out, 6 * r}),
        {.trans_b = Trans::kYes, .alpha = scale, .accum = Accum::kAdd}, s, nullptr, 0);
}

void split_lora_grad_b(GemmRunner& g, Tensor db, Tensor dy, Tensor t, float scale, float* scratch, cudaStream_t s) {
  const int64_t N = dy.rows(), out = dy.cols(), r = t.cols();
  const Carve c = carve(scratch, sizes_of(LoraSplitOp::kGradB, N, 0, out, r));
  const PackJob jt = job(c.u, t, true, kParts3);
  pack(jt, nullptr, s);
  Tensor P(c.p, DType::kF32, {out, 3 * r});
  g.run(P, dy, Tensor(c.u, DType::kBF16, {N, 3 * r}), {.trans_a = Trans::kYes}, s, nullptr, 0);
  combine(db, c.p, /*along_cols=*/true, scale, /*accumulate=*/true, s);
}

void split_lora_dt(GemmRunner& g, Tensor dt, Tensor dy, Tensor b, float scale, float* scratch, cudaStream_t s) {
  const int64_t N = dy.rows(), out = dy.cols(), r = b.cols();
  const Carve c = carve(scratch, sizes_of(LoraSplitOp::kDt, N, 0, out, r));
  const PackJob jb = job(c.u, b, true, kParts3);
  pack(jb, nullptr, s);
  Tensor P(c.p, DType::kF32, {N, 3 * r});
  g.run(P, dy, Tensor(c.u, DType::kBF16, {out, 3 * r}), {}, s, nullptr, 0);
  combine(dt, c.p, /*along_cols=*/true, scale, /*accumulate=*/false, s);
}

void split_lora_grad_a(GemmRunner& g, Tensor da, Tensor dt, Tensor x, float* scratch, cudaStream_t s) {
  const int64_t N = x.rows(), in = x.cols(), r = dt.cols();
  const Carve c = carve(scratch, sizes_of(LoraSplitOp::kGradA, N, in, 0, r));
  const PackJob jt = job(c.u, dt, true, kParts3);
  pack(jt, nullptr, s);
  Tensor P(c.p, DType::kF32, {3 * r, in});
  g.run(P, Tensor(c.u, DType::kBF16, {N, 3 * r}), x, {.trans_a = Trans::kYes}, s, nullptr, 0);
  combine(da, c.p, /*along_cols=*/false, 1.0f, /*accumulate=*/true, s);
}

void split_lora_dx(GemmRunner& g, Tensor dx, Tensor dt, Tensor a, float* scratch, cudaStream_t s) {
  const int64_t N = dx.rows(), in = dx.cols(), r = dt.cols();
  const Carve c = carve(scratch, sizes_of(LoraSplitOp::kDx, N, in, 0, r));
  const PackJob jt = job(c.u, dt, true, kPairLeft), ja = job(c.v, a, false, kPairRight);
  pack(jt, &ja, s);
  g.run(dx, Tensor(c.u, DType::kBF16, {N, 6 * r}), Tensor(c.v, DType::kBF16, {6 * r, in}), {.accum = Accum::kAdd},
        s, nullptr, 0);
}

}  // namespace st::cuda
