// Causal, same-document GQA attention (flash-attention style: online softmax over key tiles,
// the [T,T] matrix never reaches global memory).
//
// Tiles are BQ=32 query rows x BK=32 key rows; a block of 128 threads gives each query (or key)
// row a quad of 4 adjacent lanes: lane `sub` of the quad owns score columns sub+4j (j < 8) and
// output columns sub+4k (k < kMaxD/4, kept in registers). Shared-memory tiles are f32 with an
// odd row stride (kMaxD+1) so quads on different rows hit different banks; columns D..kMaxD
// are zero so the register loops need no bounds checks.
//
// Backward (deterministic, no atomics): delta_i = sum_d dO[i,d]*O[i,d] is recomputed where
// needed; one kernel owns a query tile and walks key tiles (dQ), another owns a key tile of one
// query head and walks every later query tile (dK, dV); GQA groups are then summed in head order.
#include "backend/cuda/attention_tc.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/ops.h"
#include "core/check.h"

namespace st::cuda {
namespace {

constexpr int kB = 32;  // BQ == BK
constexpr int kThreads = 128;
constexpr int kCols = kB / 4;  // score columns per lane

struct AttnArgs {
  const void* q;
  const void* k;
  const void* v;
  DType qt, kt, vt;
  const int32_t* doc;  // [B*T] or nullptr
  int64_t B, T, NH, KVH, D;
  float scale;
  // Forward only (decode against a KV cache): keys 0..Tk-1; query row i sits at position q_off+i.
  // Training passes Tk = T, q_off = 0.
  int64_t Tk, q_off;
  int64_t window;  // sliding window (AttnShape::window, effective); 0 = none
};

// Key kj is inside query position qp's sliding window (always, without one).
__device__ __forceinline__ bool in_window(int64_t window, int64_t qp, int64_t kj) {
  return window == 0 || qp - kj < window;
}

// Loads rows [r0, r0+kB) of head `h` of x [B*T, heads, D] into s[kB][stride] (zero outside).
__device__ void load_tile(float* s, int stride, const void* x, DType xt, int64_t b, int64_t r0, int64_t h,
                          int64_t heads, int64_t T, int64_t D) {
  for (int idx = threadIdx.x; idx < kB * stride; idx += blockDim.x) {
    const int r = idx / stride, d = idx % stride;
    const int64_t t = r0 + r;
    float v = 0.0f;
    if (d < D && t < T) v = ld(x, xt, ((b * T + t) * heads + h) * D + d);
    s[idx] = v;
  }
}

__device__ __forceinline__ int doc_of(const int32_t* doc, int64_t b, int64_t T, int64_t t) {
  return (doc && t < T) ? doc[b * T + t] : 0;
}

__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

template <int kMaxD>
__global__ void __launch_bounds__(kThreads) attn_fwd_kernel(AttnArgs a, void* out, DType ot, float* lse) {
  constexpr int S = kMaxD + 1, kO = kMaxD / 4;
  extern __shared__ float smem[];
  float* Qs = smem;
  float* Ks = Qs + kB * S;
  float* Vs = Ks + kB * S;
  float* Ps = Vs + kB * S;              // [kB][kB+1]
  int* kdoc = reinterpret_cast<int*>(Ps + kB * (kB + 1));
  const int64_t q0 = blockIdx.x * kB, h = blockIdx.y, b = blockIdx.z, g = h / (a.NH / a.KVH);
  const int r = threadIdx.x >> 2, sub = threadIdx.x & 3;
  const int64_t qi = q0 + r;
  const int my_doc = doc_of(a.doc, b, a.T, qi);
  load_tile(Qs, S, a.q, a.qt, b, q0, h, a.NH, a.T, a.D);
  float o[kO];
#pragma unroll
  for (int k = 0; k < kO; ++k) o[k] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  const int64_t kend = min(a.Tk, a.q_off + q0 + kB);
  for (int64_t k0 = 0; k0 < kend; k0 += kB) {
    __syncthreads();
    load_tile(Ks, S, a.k, a.kt, b, k0, g, a.KVH, a.Tk, a.D);
    load_tile(Vs, S, a.v, a.vt, b, k0, g, a.KVH, a.Tk, a.D);
    if (threadIdx.x < kB) kdoc[threadIdx.x] = doc_of(a.doc, b, a.T, k0 + threadIdx.x);
    __syncthreads();
    float s[kCols];
#pragma unroll
    for (int j = 0; j < kCols; ++j) s[j] = 0.0f;
    for (int d = 0; d < a.D; ++d) {
      const float qv = Qs[r * S + d];
#pragma unroll
      for (int j = 0; j < kCols; ++j) s[j] += qv * Ks[(sub + 4 * j) * S + d];
    }
    float mt = -INFINITY;
#pragma unroll
    for (int j = 0; j < kCols; ++j) {
      const int c = sub + 4 * j;
      const int64_t kj = k0 + c;
      const bool valid = qi < a.T && kj <= qi + a.q_off && kj < a.Tk && kdoc[c] == my_doc &&
                         in_window(a.window, qi + a.q_off, kj);
      s[j] = valid ? s[j] * a.scale : -INFINITY;
      mt = fmaxf(mt, s[j]);
    }
    const float m_new = fmaxf(m, quad_max(mt));
    const float alpha = m_new == -INFINITY ? 1.0f : expf(m - m_new);
    float ps = 0.0f;
#pragma unroll
    for (int j = 0; j < kCols; ++j) {
      const float p = s[j] == -INFINITY ? 0.0f : expf(s[j] - m_new);
      ps += p;
      Ps[r * (kB + 1) + sub + 4 * j] = p;
    }
    l = l * alpha + quad_sum(ps);
    m = m_new;
    __syncwarp();
#pragma unroll
    for (int k = 0; k < kO; ++k) o[k] *= alpha;
    for (int c = 0; c < kB; ++c) {
      const float p = Ps[r * (kB + 1) + c];
      const float* vrow = Vs + c * S + sub;
#pragma unroll
      for (int k = 0; k < kO; ++k) o[k] += p * vrow[4 * k];
    }
  }
  if (qi >= a.T) return;
  const float inv_l = 1.0f / l;
  const int64_t base = ((b * a.T + qi) * a.NH + h) * a.D;
#pragma unroll
  for (int k = 0; k < kO; ++k) {
    const int d = sub + 4 * k;
    if (d < a.D) st_elem(out, ot, base + d, o[k] * inv_l);
  }
  if (sub == 0 && lse) lse[(b * a.NH + h) * a.T + qi] = m + logf(l);
}

struct BwdArgs {
  const void* dout;
  const void* out;
  DType dot, ot;
  const float* lse;
};

// delta for the quad's row (sum over d of dO*O), reduced across the quad.
__device__ __forceinline__ float row_delta(const AttnArgs& a, const BwdArgs& w, int64_t b, int64_t qi, int64_t h,
                                           int sub) {
  float acc = 0.0f;
  if (qi < a.T) {
    const int64_t base = ((b * a.T + qi) * a.NH + h) * a.D;
    for (int64_t d = sub; d < a.D; d += 4) acc += ld(w.dout, w.dot, base + d) * ld(w.out, w.ot, base + d);
  }
  return quad_sum(acc);
}

template <int kMaxD>
__global__ void __launch_bounds__(kThreads) attn_bwd_dq_kernel(AttnArgs a, BwdArgs w, void* dq, DType dqt) {
  constexpr int S = kMaxD + 1, kO = kMaxD / 4;
  extern __shared__ float smem[];
  float* Qs = smem;
  float* dOs = Qs + kB * S;
  float* Ks = dOs + kB * S;
  float* Vs = Ks + kB * S;
  float* dSs = Vs + kB * S;  // [kB][kB+1]
  int* kdoc = reinterpret_cast<int*>(dSs + kB * (kB + 1));
  const int64_t q0 = blockIdx.x * kB, h = blockIdx.y, b = blockIdx.z, g = h / (a.NH / a.KVH);
  const int r = threadIdx.x >> 2, sub = threadIdx.x & 3;
  const int64_t qi = q0 + r;
  const int my_doc = doc_of(a.doc, b, a.T, qi);
  load_tile(Qs, S, a.q, a.qt, b, q0, h, a.NH, a.T, a.D);
  load_tile(dOs, S, w.dout, w.dot, b, q0, h, a.NH, a.T, a.D);
  const float my_lse = qi < a.T ? w.lse[(b * a.NH + h) * a.T + qi] : 0.0f;
  const float delta = row_delta(a, w, b, qi, h, sub);
  float acc[kO];
#pragma unroll
  for (int k = 0; k < kO; ++k) acc[k] = 0.0f;
  const int64_t kend = min(a.T, q0 + kB);
  for (int64_t k0 = 0; k0 < kend; k0 += kB) {
    __syncthreads();
    load_tile(Ks, S, a.k, a.kt, b, k0, g, a.KVH, a.T, a.D);
    load_tile(Vs, S, a.v, a.vt, b, k0, g, a.KVH, a.T, a.D);
    if (threadIdx.x < kB) kdoc[threadIdx.x] = doc_of(a.doc, b, a.T, k0 + threadIdx.x);
    __syncthreads();
    float s[kCols], dp[kCols];
#pragma unroll
    for (int j = 0; j < kCols; ++j) s[j] = dp[j] = 0.0f;
    for (int d = 0; d < a.D; ++d) {
      const float qv = Qs[r * S + d], gv = dOs[r * S + d];
#pragma unroll
      for (int j = 0; j < kCols; ++j) {
        s[j] += qv * Ks[(sub + 4 * j) * S + d];
        dp[j] += gv * Vs[(sub + 4 * j) * S + d];
      }
    }
#pragma unroll
    for (int j = 0; j < kCols; ++j) {
      const int c = sub + 4 * j;
      const int64_t kj = k0 + c;
      const bool valid = qi < a.T && kj <= qi && kdoc[c] == my_doc && in_window(a.window, qi, kj);
      const float p = valid ? expf(s[j] * a.scale - my_lse) : 0.0f;
      dSs[r * (kB + 1) + c] = p * (dp[j] - delta);
    }
    __syncwarp();
    for (int c = 0; c < kB; ++c) {
      const float ds = dSs[r * (kB + 1) + c];
      const float* krow = Ks + c * S + sub;
#pragma unroll
      for (int k = 0; k < kO; ++k) acc[k] += ds * krow[4 * k];
    }
  }
  if (qi >= a.T) return;
  const int64_t base = ((b * a.T + qi) * a.NH + h) * a.D;
#pragma unroll
  for (int k = 0; k < kO; ++k) {
    const int d = sub + 4 * k;
    if (d < a.D) st_elem(dq, dqt, base + d, acc[k] * a.scale);
  }
}

// One block per (key tile, query head): with GQA (group > 1) it writes its head's share of dK/dV
// to f32 scratch laid out like q, and reduce_group_kernel sums the group in head order; with
// group == 1 it writes dk/dv directly. Either way no atomics, so the bits are reproducible.
template <int kMaxD>
__global__ void __launch_bounds__(kThreads) attn_bwd_dkv_kernel(AttnArgs a, BwdArgs w, void* dk, DType dkt,
                                                                 void* dv, DType dvt, float* part_k, float* part_v) {
  constexpr int S = kMaxD + 1, kO = kMaxD / 4;
  extern __shared__ float smem[];
  float* Ks = smem;
  float* Vs = Ks + kB * S;
  float* Qs = Vs + kB * S;
  float* dOs = Qs + kB * S;
  float* Ps = dOs + kB * S;       // [kB keys][kB+1]
  float* dSs = Ps + kB * (kB + 1);  // [kB keys][kB+1]
  float* lse_s = dSs + kB * (kB + 1);
  float* delta_s = lse_s + kB;
  int* qdoc = reinterpret_cast<int*>(delta_s + kB);
  const int64_t k0 = blockIdx.x * kB, h = blockIdx.y, b = blockIdx.z, group = a.NH / a.KVH, g = h / group;
  const int c = threadIdx.x >> 2, sub = threadIdx.x & 3;
  const int64_t kj = k0 + c;
  const int my_doc = doc_of(a.doc, b, a.T, kj);
  load_tile(Ks, S, a.k, a.kt, b, k0, g, a.KVH, a.T, a.D);
  load_tile(Vs, S, a.v, a.vt, b, k0, g, a.KVH, a.T, a.D);
  float dk_acc[kO], dv_acc[kO];
#pragma unroll
  for (int k = 0; k < kO; ++k) dk_acc[k] = dv_acc[k] = 0.0f;
  {
    for (int64_t q0 = k0; q0 < a.T; q0 += kB) {  // kB == BQ: query tiles from the key tile on
      __syncthreads();
      load_tile(Qs, S, a.q, a.qt, b, q0, h, a.NH, a.T, a.D);
      load_tile(dOs, S, w.dout, w.dot, b, q0, h, a.NH, a.T, a.D);
      {
        const int64_t qi = q0 + c;  // quad c computes delta of query row c
        const float dl = row_delta(a, w, b, qi, h, sub);
        if (sub == 0) {
          delta_s[c] = dl;
          lse_s[c] = qi < a.T ? w.lse[(b * a.NH + h) * a.T + qi] : 0.0f;
          qdoc[c] = doc_of(a.doc, b, a.T, qi);
        }
      }
      __syncthreads();
      float s[kCols], dp[kCols];
#pragma unroll
      for (int j = 0; j < kCols; ++j) s[j] = dp[j] = 0.0f;
      for (int d = 0; d < a.D; ++d) {
        const float kv = Ks[c * S + d], vv = Vs[c * S + d];
#pragma unroll
        for (int j = 0; j < kCols; ++j) {
          s[j] += kv * Qs[(sub + 4 * j) * S + d];
          dp[j] += vv * dOs[(sub + 4 * j) * S + d];
        }
      }
#pragma unroll
      for (int j = 0; j < kCols; ++j) {
        const int i = sub + 4 * j;
        const int64_t qi = q0 + i;
        const bool valid = qi < a.T && kj < a.T && kj <= qi && qdoc[i] == my_doc && in_window(a.window, qi, kj);
        const float p = valid ? expf(s[j] * a.scale - lse_s[i]) : 0.0f;
        Ps[c * (kB + 1) + i] = p;
        dSs[c * (kB + 1) + i] = p * (dp[j] - delta_s[i]);
      }
      __syncwarp();
      for (int i = 0; i < kB; ++i) {
        const float p = Ps[c * (kB + 1) + i], ds = dSs[c * (kB + 1) + i];
        const float* orow = dOs + i * S + sub;
        const float* qrow = Qs + i * S + sub;
#pragma unroll
        for (int k = 0; k < kO; ++k) {
          dv_acc[k] += p * orow[4 * k];
          dk_acc[k] += ds * qrow[4 * k];
        }
      }
    }
  }
  if (kj >= a.T) return;
  if (part_k) {
    const int64_t base = ((b * a.T + kj) * a.NH + h) * a.D;
#pragma unroll
    for (int k = 0; k < kO; ++k) {
      const int d = sub + 4 * k;
      if (d < a.D) {
        part_k[base + d] = dk_acc[k] * a.scale;
        part_v[base + d] = dv_acc[k];
      }
    }
    return;
  }
  const int64_t base = ((b * a.T + kj) * a.KVH + g) * a.D;
#pragma unroll
  for (int k = 0; k < kO; ++k) {
    const int d = sub + 4 * k;
    if (d < a.D) {
      st_elem(dk, dkt, base + d, dk_acc[k] * a.scale);
      st_elem(dv, dvt, base + d, dv_acc[k]);
    }
  }
}

// dk[tok, g, d] = sum over the group's heads (in order) of part[tok, g*group + i, d].
__global__ void reduce_group_kernel(void* dk, DType dkt, void* dv, DType dvt, const float* part_k,
                                    const float* part_v, int64_t tokens, int64_t KVH, int64_t group, int64_t D) {
  const int64_t n = tokens * KVH * D;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t d = i % D, tg = i / D;  // tg = tok*KVH + g
    const int64_t src = (tg * group) * D + d;  // (tok*NH + g*group)*D + d
    float sk = 0.0f, sv = 0.0f;
    for (int64_t j = 0; j < group; ++j) {
      sk += part_k[src + j * D];
      sv += part_v[src + j * D];
    }
    st_elem(dk, dkt, i, sk);
    st_elem(dv, dvt, i, sv);
  }
}

AttnArgs make_args(Tensor q, Tensor k, Tensor v, const SeqLayout& L, const AttnShape& s) {
  return AttnArgs{q.data, k.data, v.data, q.dtype, k.dtype, v.dtype, L.doc_ids, L.batch, L.seq,
                  s.num_heads, s.num_kv_heads, s.head_dim, s.scale, L.seq, 0, effective_window(s, L.seq)};
}

template <typename K>
void set_smem(K kernel, size_t bytes) {
  int dev = 0, max_optin = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&max_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  CHECK(bytes <= static_cast<size_t>(max_optin),
        "attention: head_dim needs " << bytes << " B of shared memory, device allows " << max_optin);
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

template <int kMaxD>
void fwd(const AttnArgs& a, Tensor out, Tensor lse, cudaStream_t st) {
  const size_t smem = (3 * kB * (kMaxD + 1) + kB * (kB + 1) + kB) * sizeof(float);
  set_smem(attn_fwd_kernel<kMaxD>, smem);
  dim3 grid(static_cast<unsigned>((a.T + kB - 1) / kB), static_cast<unsigned>(a.NH), static_cast<unsigned>(a.B));
  attn_fwd_kernel<kMaxD><<<grid, kThreads, smem, st>>>(a, out.data, out.dtype, lse.empty() ? nullptr : lse.ptr<float>());
  CUDA_CHECK_LAUNCH();
}

template <int kMaxD>
void bwd(const AttnArgs& a, const BwdArgs& w, Tensor dq, Tensor dk, Tensor dv, float* scratch, cudaStream_t st) {
  const unsigned tiles = static_cast<unsigned>((a.T + kB - 1) / kB);
  const size_t smem_q = (4 * kB * (kMaxD + 1) + kB * (kB + 1) + kB) * sizeof(float);
  set_smem(attn_bwd_dq_kernel<kMaxD>, smem_q);
  attn_bwd_dq_kernel<kMaxD><<<dim3(tiles, static_cast<unsigned>(a.NH), static_cast<unsigned>(a.B)), kThreads,
                              smem_q, st>>>(a, w, dq.data, dq.dtype);
  CUDA_CHECK_LAUNCH();
  const size_t smem_kv = (4 * kB * (kMaxD + 1) + 2 * kB * (kB + 1) + 3 * kB) * sizeof(float);
  set_smem(attn_bwd_dkv_kernel<kMaxD>, smem_kv);
  const int64_t group = a.NH / a.KVH, part = a.B * a.T * a.NH * a.D;
  float* part_k = group > 1 ? scratch : nullptr;
  float* part_v = group > 1 ? scratch + part : nullptr;
  attn_bwd_dkv_kernel<kMaxD><<<dim3(tiles, static_cast<unsigned>(a.NH), static_cast<unsigned>(a.B)), kThreads,
                               smem_kv, st>>>(a, w, dk.data, dk.dtype, dv.data, dv.dtype, part_k, part_v);
  CUDA_CHECK_LAUNCH();
  if (group > 1) {
    const int64_t n = a.B * a.T * a.KVH * a.D;
    reduce_group_kernel<<<grid_for(n, 256), 256, 0, st>>>(dk.data, dk.dtype, dv.data, dv.dtype, part_k, part_v,
                                                          a.B * a.T, a.KVH, group, a.D);
    CUDA_CHECK_LAUNCH();
  }
}

}  // namespace

static void launch_attention_fwd(Tensor out, Tensor lse, const AttnArgs& a, cudaStream_t st);

void launch_attention(Tensor out, Tensor lse, Tensor q, Tensor k, Tensor v, const SeqLayout& L, const AttnShape& s,
                      cudaStream_t st) {
  const Tensor all[] = {out, q, k, v};
  if (attention_tc_supported(all, 4, s)) return launch_attention_tc(out, lse, q, k, v, L, s, st);
  launch_attention_fwd(out, lse, make_args(q, k, v, L, s), st);
}

static void launch_attention_fwd(Tensor out, Tensor lse, const AttnArgs& a, cudaStream_t st) {
  if (a.T == 0 || a.B == 0) return;
  if (a.D <= 64) fwd<64>(a, out, lse, st);
  else if (a.D <= 128) fwd<128>(a, out, lse, st);
  else if (a.D <= 256) fwd<256>(a, out, lse, st);
  else CHECK(false, "attention: head_dim " << a.D << " > 256 is not supported by the CUDA backend");
}

void launch_attention_backward(Tensor dq, Tensor dk, Tensor dv, Tensor dout, Tensor q, Tensor k, Tensor v,
                               Tensor out, Tensor lse, const SeqLayout& L, const AttnShape& s, float* scratch,
                               cudaStream_t st) {
  const Tensor all[] = {dq, dk, dv, dout, q, k, v, out};
  if (attention_tc_supported(all, 8, s))
    return launch_attention_tc_backward(dq, dk, dv, dout, q, k, v, out, lse, L, s, scratch, st);
  const AttnArgs a = make_args(q, k, v, L, s);
  const BwdArgs w{dout.data, out.data, dout.dtype, out.dtype, lse.ptr<float>()};
  if (a.T == 0 || a.B == 0) return;
  if (a.D <= 64) bwd<64>(a, w, dq, dk, dv, scratch, st);
  else if (a.D <= 128) bwd<128>(a, w, dq, dk, dv, scratch, st);
  else if (a.D <= 256) bwd<256>(a, w, dq, dk, dv, scratch, st);
  else CHECK(false, "attention: head_dim " << a.D << " > 256 is not supported by the CUDA backend");
}

}  // namespace st::cuda
