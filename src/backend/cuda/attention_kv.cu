// Decode-time attention against a KV cache (Backend::attention_kv), one sequence.
//
// One block per (query row, head). The block walks the keys 0..q_start+i in tiles of kTile: each
// thread scores one key of the tile (q row in shared memory, f32 dot in a fixed order), the tile's
// max and the sum of its probabilities come from fixed-tree block reductions, and thread d keeps
// the running output for dims d, d+kThreads, ... (online softmax, rescaled per tile). Every
// reduction has a fixed order and nothing is atomic, so the bits do not change between runs.
// Decoding is memory-bound (one q row against the whole cache), so this simple shape suffices.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/ops.h"
#include "core/check.h"

namespace st::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kTile = kThreads;        // keys scored per tile (one per thread)
constexpr int kMaxDimsPerThread = 4;   // head_dim <= kThreads * kMaxDimsPerThread = 512

struct KvArgs {
  const void* q;
  const void* k;
  const void* v;
  void* out;
  DType tq, tk, tout;
  int64_t NH, KVH, D, q_start, window;  // window: AttnShape::window (0 = none)
  float scale;
};

static __global__ void attention_kv_kernel(KvArgs a) {
  extern __shared__ float smem[];
  float* qs = smem;          // [D]
  float* ps = smem + a.D;    // [kTile]
  __shared__ float red[32];
  const int64_t row = blockIdx.x, i = row / a.NH, h = row % a.NH, g = h / (a.NH / a.KVH);
  const int64_t last = a.q_start + i;
  const int tid = threadIdx.x;
  for (int64_t d = tid; d < a.D; d += kThreads) qs[d] = ld(a.q, a.tq, row * a.D + d);
  float acc[kMaxDimsPerThread] = {0.f, 0.f, 0.f, 0.f};
  float m = -INFINITY, l = 0.f;
  // A sliding window starts the walk at the first key it lets through.
  const int64_t first = a.window > 0 ? max(static_cast<int64_t>(0), last - a.window + 1) : 0;
  for (int64_t j0 = first; j0 <= last; j0 += kTile) {
    const int64_t j = j0 + tid;
    __syncthreads();  // qs written / previous tile's ps consumed
    float sc = -INFINITY;
    if (j <= last) {
      const int64_t kb = (j * a.KVH + g) * a.D;
      float s = 0.f;
      for (int64_t d = 0; d < a.D; ++d) s = fmaf(qs[d], ld(a.k, a.tk, kb + d), s);
      sc = s * a.scale;
    }
    const float m_new = fmaxf(m, block_max(sc, red));
    const float alpha = expf(m - m_new);  // 0 on the first tile (m = -inf)
    const float p = j <= last ? expf(sc - m_new) : 0.f;
    ps[tid] = p;
    l = l * alpha + block_sum(p, red);  // block_sum syncs: ps is visible after it
    const int64_t n = min(static_cast<int64_t>(kTile), last + 1 - j0);
    for (int c = 0; c < kMaxDimsPerThread; ++c) {
      const int64_t d = tid + static_cast<int64_t>(c) * kThreads;
      if (d >= a.D) break;
      float s = acc[c] * alpha;
      for (int64_t jj = 0; jj < n; ++jj) s = fmaf(ps[jj], ld(a.v, a.tk, ((j0 + jj) * a.KVH + g) * a.D + d), s);
      acc[c] = s;
    }
    m = m_new;
  }
  for (int c = 0; c < kMaxDimsPerThread; ++c) {
    const int64_t d = tid + static_cast<int64_t>(c) * kThreads;
    if (d < a.D) st_elem(a.out, a.tout, row * a.D + d, acc[c] / l);
  }
}

}  // namespace

void launch_attention_kv(Tensor out, Tensor q, Tensor k_cache, Tensor v_cache, int64_t q_start,
                         const AttnShape& s, cudaStream_t stream) {
  CHECK(s.head_dim <= static_cast<int64_t>(kThreads) * kMaxDimsPerThread,
        "attention_kv: head_dim " << s.head_dim << " > " << kThreads * kMaxDimsPerThread);
  const int64_t rows = q.numel() / s.head_dim;  // Tq * NH
  if (rows == 0) return;
  CHECK(rows <= 0x7fffffffLL, "attention_kv: too many query rows");
  KvArgs a{q.data, k_cache.data, v_cache.data, out.data, q.dtype, k_cache.dtype, out.dtype,
           s.num_heads, s.num_kv_heads, s.head_dim, q_start, s.window, s.scale};
  const size_t shm = static_cast<size_t>(s.head_dim + kTile) * sizeof(float);
  attention_kv_kernel<<<static_cast<unsigned>(rows), kThreads, shm, stream>>>(a);
  CUDA_CHECK_LAUNCH();
}

}  // namespace st::cuda
