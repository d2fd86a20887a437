// Elementwise and small ops: bias, add, scale, convert, embedding, SwiGLU, dropout, AdamW, RoPE,
// sum of squares. All are memory-bound: grid-stride loops, f32 math, one rounding on store.
#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "backend/cuda/cuda_common.cuh"
#include "backend/dropout_rng.h"
#include "backend/cuda/ops.h"
#include "backend/cuda/vec.cuh"

namespace st::cuda {
namespace {

constexpr int kThreads = 256;

#define ST_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

__global__ void add_bias_kernel(void* y, DType yt, const void* b, DType bt, int64_t n, int64_t cols) {
  ST_GRID_STRIDE(i, n) st_elem(y, yt, i, ld(y, yt, i) + ld(b, bt, i % cols));
}

__global__ void add_kernel(void* y, DType yt, const void* a, DType at, const void* b, DType bt, int64_t n) {
  ST_GRID_STRIDE(i, n) st_elem(y, yt, i, ld(a, at, i) + ld(b, bt, i));
}

__global__ void scale_kernel(void* y, DType yt, const void* x, DType xt, float f, int64_t n) {
  ST_GRID_STRIDE(i, n) st_elem(y, yt, i, ld(x, xt, i) * f);
}

__global__ void convert_kernel(void* y, DType yt, const void* x, DType xt, int64_t n) {
  ST_GRID_STRIDE(i, n) st_elem(y, yt, i, ld(x, xt, i));
}

__global__ void embedding_kernel(void* out, DType ot, const void* table, DType tt, const int32_t* ids,
                                 int64_t n, int64_t cols) {
  ST_GRID_STRIDE(i, n) {
    const int64_t t = i / cols, c = i % cols;
    st_elem(out, ot, i, ld(table, tt, static_cast<int64_t>(ids[t]) * cols + c));
  }
}

__device__ __forceinline__ float sigmoidf_acc(float g) { return 1.0f / (1.0f + expf(-g)); }

__global__ void swiglu_kernel(void* h, DType ht, const void* g, DType gt, const void* u, DType ut, int64_t n) {
  ST_GRID_STRIDE(i, n) {
    const float gv = ld(g, gt, i);
    st_elem(h, ht, i, gv * sigmoidf_acc(gv) * ld(u, ut, i));
  }
}

__global__ void swiglu_bwd_kernel(void* dg, DType dgt, void* du, DType dut, const void* dh, DType dht,
                                  const void* g, DType gt, const void* u, DType ut, int64_t n) {
  ST_GRID_STRIDE(i, n) {
    const float gv = ld(g, gt, i), uv = ld(u, ut, i), d = ld(dh, dht, i);
    const float sg = sigmoidf_acc(gv);
    st_elem(dg, dgt, i, d * uv * sg * (1.0f + gv * (1.0f - sg)));
    st_elem(du, dut, i, d * gv * sg);
  }
}

// A thread takes an element pair (2j, 2j + 1): both decisions from one hash (dropout_rng.h).
__global__ void dropout_kernel(void* y, DType yt, const void* x, DType xt, float p, DropoutSeed seed_arg, int64_t n) {
  const uint64_t seed = seed_arg.for_p(p);
  const int64_t pairs = (n + 1) / 2;
  if (!(p > 0.0f && p < 1.0f)) {  // no mask to draw: dropout_apply's identity / zero
    ST_GRID_STRIDE(i, n) st_elem(y, yt, i, dropout_apply(seed, static_cast<uint64_t>(i), p, ld(x, xt, i)));
    return;
  }
  const float scale = dropout_scale(p);
  ST_GRID_STRIDE(j, pairs) {
    const int64_t i = 2 * j;
    bool k0, k1;
    dropout_keep2(seed, static_cast<uint64_t>(i), p, &k0, &k1);
    st_elem(y, yt, i, k0 ? ld(x, xt, i) * scale : 0.0f);
    if (i + 1 < n) st_elem(y, yt, i + 1, k1 ? ld(x, xt, i + 1) * scale : 0.0f);
  }
}

// Note [NEFTune]: the product and the sum rounded one by one (no fma), as the CPU does.
__global__ void uniform_noise_kernel(void* x, DType xt, float mag, DropoutSeed seed_arg, int64_t n) {
  const uint64_t seed = seed_arg.get();
  ST_GRID_STRIDE(i, n) {
    const float noise = __fmul_rn(uniform_noise_unit(seed, static_cast<uint64_t>(i)), mag);
    st_elem(x, xt, i, __fadd_rn(ld(x, xt, i), noise));
  }
}

__global__ void adamw_kernel(float* p, const float* g, float* m, float* v, float lr, float b1, float b2,
                             float eps, float wd, float bc1, float bc2, int64_t n) {
  ST_GRID_STRIDE(i, n) {
    float pv = p[i];
    const float gv = g[i];
    pv -= lr * wd * pv;
    const float mv = b1 * m[i] + (1.0f - b1) * gv;
    const float vv = b2 * v[i] + (1.0f - b2) * gv * gv;
    m[i] = mv;
    v[i] = vv;
    pv -= lr * (mv / bc1) / (sqrtf(vv / bc2) + eps);
    p[i] = pv;
  }
}

// x [tokens, heads, D]; one thread per (token, head, i < D/2).
__global__ void rope_kernel(void* x, DType xt, const int32_t* pos, const float* inv_freq, int64_t tokens,
                            int64_t heads, int64_t half, float sign) {
  const int64_t n = tokens * heads * half;
  ST_GRID_STRIDE(idx, n) {
    const int64_t i = idx % half, th = idx / half, t = th / heads;
    const float a = static_cast<float>(pos[t]) * inv_freq[i];
    const float c = cosf(a), s = sign * sinf(a);
    const int64_t base = th * 2 * half;
    const float x0 = ld(x, xt, base + i), x1 = ld(x, xt, base + i + half);
    st_elem(x, xt, base + i, x0 * c - x1 * s);
    st_elem(x, xt, base + i + half, x1 * c + x0 * s);
  }
}

// rope_kernel 8 pairs at a time (half % 8 == 0, 16-byte aligned rows): the same per-element math,
// one 16-byte access per half-row group instead of scalar loads with a dtype switch (the scalar
// kernel ran at ~0.8 TB/s on the H200, RESULTS session 3).
template <class T>
__device__ __forceinline__ void rope8(T* x, const int32_t* pos, const float* inv_freq, int64_t heads, int64_t half,
                                      float sign, int64_t v) {
  const int64_t groups = half / 8;
  const int64_t g = v % groups, th = v / groups, t = th / heads;
  const int64_t i0 = g * 8;
  const float p = static_cast<float>(pos[t]);
  T* row = x + th * 2 * half;
  float x0[8], x1[8], y0[8], y1[8];
  load8(row + i0, x0);
  load8(row + i0 + half, x1);
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    const float a = p * inv_freq[i0 + e];
    const float c = cosf(a), s = sign * sinf(a);
    y0[e] = x0[e] * c - x1[e] * s;
    y1[e] = x1[e] * c + x0[e] * s;
  }
  store8(row + i0, y0);
  store8(row + i0 + half, y1);
}

template <class T>
__global__ void rope_vec_kernel(T* x, const int32_t* pos, const float* inv_freq, int64_t heads, int64_t half,
                                float sign, int64_t nv) {
  ST_GRID_STRIDE(v, nv) rope8(x, pos, inv_freq, heads, half, sign, v);
}

// q and k in one launch (Backend::rope_qk): the first nq groups are q's, the rest k's.
template <class T>
__global__ void rope_qk_vec_kernel(T* q, int64_t q_heads, int64_t nq, T* k, int64_t k_heads, int64_t nk,
                                   const int32_t* pos, const float* inv_freq, int64_t half, float sign) {
  ST_GRID_STRIDE(v, nq + nk) {
    if (v < nq) rope8(q, pos, inv_freq, q_heads, half, sign, v);
    else rope8(k, pos, inv_freq, k_heads, half, sign, v - nq);
  }
}

__global__ void sum_squares_partial(float* partial, const float* x, int64_t n) {
  __shared__ float red[32];
  float acc = 0.0f;
  ST_GRID_STRIDE(i, n) acc += x[i] * x[i];
  acc = block_sum(acc, red);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

__global__ void sum_squares_final(float* out, const float* partial, int nparts) {
  __shared__ float red[32];
  float acc = 0.0f;
  for (int i = threadIdx.x; i < nparts; i += blockDim.x) acc += partial[i];
  acc = block_sum(acc, red);
  if (threadIdx.x == 0) out[0] += acc;
}

// ---- 16-byte vector paths (same math and rounding as the generic kernels above) ----------
// Used when every tensor of the op is bf16 or f32 with one dtype (convert: any pair of the two)
// and every pointer is 16-byte aligned; elements past the last full group of 8 go one by one.

#define ST_VEC_LOOP(v, nv) \
  for (int64_t v = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; v < (nv); v += (int64_t)gridDim.x * blockDim.x)

struct AddOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct SwigluOp {
  __device__ float operator()(float g, float u) const { return g * sigmoidf_acc(g) * u; }
};
struct ScaleOp {
  float f;
  __device__ float operator()(float a, float) const { return a * f; }
};

template <class T, class Op>
__global__ void vmap2_kernel(T* y, const T* a, const T* b, int64_t n, Op op) {
  const int64_t nv = n / 8;
  ST_VEC_LOOP(v, nv) {
    float fa[8], fb[8], fy[8];
    load8(a + v * 8, fa);
    load8(b + v * 8, fb);
#pragma unroll
    for (int k = 0; k < 8; ++k) fy[k] = op(fa[k], fb[k]);
    store8(y + v * 8, fy);
  }
  ST_VEC_LOOP(i, n - nv * 8) {
    const int64_t j = nv * 8 + i;
    y[j] = from_f<T>(op(to_f(a[j]), to_f(b[j])));
  }
}

template <class TY, class TX>
__global__ void vconvert_kernel(TY* y, const TX* x, int64_t n) {
  const int64_t nv = n / 8;
  ST_VEC_LOOP(v, nv) {
    float f[8];
    load8(x + v * 8, f);
    store8(y + v * 8, f);
  }
  ST_VEC_LOOP(i, n - nv * 8) y[nv * 8 + i] = from_f<TY>(to_f(x[nv * 8 + i]));
}

// cols % 8 == 0 (checked by the launcher), so a group of 8 never straddles a row.
template <class T>
__global__ void vbias_kernel(T* y, const T* b, int64_t n, int64_t cols) {
  ST_VEC_LOOP(v, n / 8) {
    float fy[8], fb[8];
    load8(y + v * 8, fy);
    load8(b + (v * 8) % cols, fb);
#pragma unroll
    for (int k = 0; k < 8; ++k) fy[k] += fb[k];
    store8(y + v * 8, fy);
  }
}

template <class T>
__global__ void vswiglu_bwd_kernel(T* dg, T* du, const T* dh, const T* g, const T* u, int64_t n) {
  const int64_t nv = n / 8;
  ST_VEC_LOOP(v, nv) {
    float fg[8], fu[8], fd[8], og[8], ou[8];
    load8(g + v * 8, fg);
    load8(u + v * 8, fu);
    load8(dh + v * 8, fd);
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const float sg = sigmoidf_acc(fg[k]);
      og[k] = fd[k] * fu[k] * sg * (1.0f + fg[k] * (1.0f - sg));
      ou[k] = fd[k] * fg[k] * sg;
    }
    store8(dg + v * 8, og);
    store8(du + v * 8, ou);
  }
  ST_VEC_LOOP(i, n - nv * 8) {
    const int64_t j = nv * 8 + i;
    const float gv = to_f(g[j]), uv = to_f(u[j]), d = to_f(dh[j]);
    const float sg = sigmoidf_acc(gv);
    dg[j] = from_f<T>(d * uv * sg * (1.0f + gv * (1.0f - sg)));
    du[j] = from_f<T>(d * gv * sg);
  }
}

unsigned vgrid(int64_t n) { return grid_for(std::max<int64_t>(n / 8, 1), kThreads); }

bool same_vec_dtype(std::initializer_list<const Tensor*> ts) {
  const DType t = (*ts.begin())->dtype;
  if (!vec_dtype(t)) return false;
  for (const Tensor* x : ts)
    if (x->dtype != t || !aligned16(x->data)) return false;
  return true;
}

template <class Op>
bool try_vmap2(Tensor y, Tensor a, Tensor b, Op op, cudaStream_t s) {
  if (!same_vec_dtype({&y, &a, &b})) return false;
  const int64_t n = y.numel();
  if (y.dtype == DType::kBF16)
    vmap2_kernel<<<vgrid(n), kThreads, 0, s>>>(y.ptr<__nv_bfloat16>(), a.ptr<__nv_bfloat16>(),
                                               b.ptr<__nv_bfloat16>(), n, op);
  else
    vmap2_kernel<<<vgrid(n), kThreads, 0, s>>>(y.ptr<float>(), a.ptr<float>(), b.ptr<float>(), n, op);
  CUDA_CHECK_LAUNCH();
  return true;
}

bool try_vconvert(Tensor y, Tensor x, cudaStream_t s) {
  if (!vec_dtype(y.dtype) || !vec_dtype(x.dtype) || !aligned16(y.data, x.data)) return false;
  const int64_t n = y.numel();
  using bf = __nv_bfloat16;
  if (y.dtype == DType::kBF16 && x.dtype == DType::kF32)
    vconvert_kernel<<<vgrid(n), kThreads, 0, s>>>(y.ptr<bf>(), x.ptr<float>(), n);
  else if (y.dtype == DType::kF32 && x.dtype == DType::kBF16)
    vconvert_kernel<<<vgrid(n), kThreads, 0, s>>>(y.ptr<float>(), x.ptr<bf>(), n);
  else if (y.dtype == DType::kBF16)
    vconvert_kernel<<<vgrid(n), kThreads, 0, s>>>(y.ptr<bf>(), x.ptr<bf>(), n);
  else
    vconvert_kernel<<<vgrid(n), kThreads, 0, s>>>(y.ptr<float>(), x.ptr<float>(), n);
  CUDA_CHECK_LAUNCH();
  return true;
}

bool try_vbias(Tensor y, Tensor b, cudaStream_t s) {
  if (!same_vec_dtype({&y, &b}) || y.cols() % 8 != 0) return false;
  const int64_t n = y.numel();
  if (y.dtype == DType::kBF16)
    vbias_kernel<<<vgrid(n), kThreads, 0, s>>>(y.ptr<__nv_bfloat16>(), b.ptr<__nv_bfloat16>(), n, y.cols());
  else
    vbias_kernel<<<vgrid(n), kThreads, 0, s>>>(y.ptr<float>(), b.ptr<float>(), n, y.cols());
  CUDA_CHECK_LAUNCH();
  return true;
}

bool try_vswiglu_bwd(Tensor dg, Tensor du, Tensor dh, Tensor g, Tensor u, cudaStream_t s) {
  if (!same_vec_dtype({&dg, &du, &dh, &g, &u})) return false;
  const int64_t n = dh.numel();
  using bf = __nv_bfloat16;
  if (dh.dtype == DType::kBF16)
    vswiglu_bwd_kernel<<<vgrid(n), kThreads, 0, s>>>(dg.ptr<bf>(), du.ptr<bf>(), dh.ptr<bf>(), g.ptr<bf>(),
                                                     u.ptr<bf>(), n);
  else
    vswiglu_bwd_kernel<<<vgrid(n), kThreads, 0, s>>>(dg.ptr<float>(), du.ptr<float>(), dh.ptr<float>(),
                                                     g.ptr<float>(), u.ptr<float>(), n);
  CUDA_CHECK_LAUNCH();
  return true;
}

}  // namespace

void launch_add_bias(Tensor y, Tensor bias, cudaStream_t s) {
  const int64_t n = y.numel();
  if (n == 0 || try_vbias(y, bias, s)) return;
  add_bias_kernel<<<grid_for(n, kThreads), kThreads, 0, s>>>(y.data, y.dtype, bias.data, bias.dtype, n, y.cols());
  CUDA_CHECK_LAUNCH();
}

void launch_add(Tensor y, Tensor a, Tensor b, cudaStream_t s) {
  const int64_t n = y.numel();
  if (n == 0 || try_vmap2(y, a, b, AddOp{}, s)) return;
  add_kernel<<<grid_for(n, kThreads), kThreads, 0, s>>>(y.data, y.dtype, a.data, a.dtype, b.data, b.dtype, n);
  CUDA_CHECK_LAUNCH();
}

void launch_scale(Tensor y, Tensor x, float f, cudaStream_t s) {
  const int64_t n = y.numel();
  if (n == 0 || try_vmap2(y, x, x, ScaleOp{f}, s)) return;
  scale_kernel<<<grid_for(n, kThreads), kThreads, 0, s>>>(y.data, y.dtype, x.data, x.dtype, f, n);
  CUDA_CHECK_LAUNCH();
}

void launch_convert(Tensor dst, Tensor src, cudaStream_t s) {
  const int64_t n = dst.numel();
  if (n == 0 || try_vconvert(dst, src, s)) return;
  convert_kernel<<<grid_for(n, kThreads), kThreads, 0, s>>>(dst.data, dst.dtype, src.data, src.dtype, n);
  CUDA_CHECK_LAUNCH();
}

__global__ void document_offsets_kernel(int32_t* out, int64_t stride, const int32_t* starts, int64_t n,
                                        int32_t m0, int32_t m1, int32_t m2) {
  ST_GRID_STRIDE(i, n) {
    const int32_t t = starts[i];
    out[i] = t * m0;
    out[stride + i] = t * m1;
    out[2 * stride + i] = t * m2;
  }
}

void launch_document_offsets(int32_t* out, int64_t stride, const int32_t* starts, int64_t n, int32_t mult0,
                             int32_t mult1, int32_t mult2, cudaStream_t s) {
  if (n == 0) return;
  document_offsets_kernel<<<grid_for(n, kThreads), kThreads, 0, s>>>(out, stride, starts, n, mult0, mult1, mult2);
  CUDA_CHECK_LAUNCH();
}

void launch_embedding(Tensor out, Tensor table, const int32_t* ids, cudaStream_t s) {
  const int64_t n = out.numel();
  if (n == 0) return;
  embedding_kernel<<<grid_for(n, kThreads), kThreads, 0, s>>>(out.data, out.dtype, table.data, table.dtype, ids,
                                                               n, out.cols());
  CUDA_CHECK_LAUNCH();
}

void launch_swiglu(Tensor h, Tensor gate, Tensor up, cudaStream_t s) {
  const int64_t n = h.numel();
  if (n == 0 || try_vmap2(h, gate, up, SwigluOp{}, s)) return;
  swiglu_kernel<<<grid_for(n, kThreads), kThreads, 0, s>>>(h.data, h.dtype, gate.data, gate.dtype, up.data,
                                                            up.dtype, n);
  CUDA_CHECK_LAUNCH();
}

void launch_swiglu_backward(Tensor dgate, Tensor dup, Tensor dh, Tensor gate, Tensor up, cudaStream_t s) {
  const int64_t n = dh.numel();
  if (n == 0 || try_vswiglu_bwd(dgate, dup, dh, gate, up, s)) return;
  swiglu_bwd_kernel<<<grid_for(n, kThreads), kThreads, 0, s>>>(dgate.data, dgate.dtype, dup.data, dup.dtype,
                                                                dh.data, dh.dtype, gate.data, gate.dtype,
                                                                up.data, up.dtype, n);
  CUDA_CHECK_LAUNCH();
}

void launch_dropout(Tensor y, Tensor x, float p, DropoutSeed seed, cudaStream_t s) {
  const int64_t n = y.numel();
  if (n == 0) return;
  dropout_kernel<<<grid_for((n + 1) / 2, kThreads), kThreads, 0, s>>>(y.data, y.dtype, x.data, x.dtype, p, seed, n);
  CUDA_CHECK_LAUNCH();
}

void launch_uniform_noise(Tensor x, float magnitude, DropoutSeed seed, cudaStream_t s) {
  const int64_t n = x.numel();
  if (n == 0) return;
  uniform_noise_kernel<<<grid_for(n, kThreads), kThreads, 0, s>>>(x.data, x.dtype, magnitude, seed, n);
  CUDA_CHECK_LAUNCH();
}

void launch_adamw(Tensor param, Tensor grad, Tensor m, Tensor v, const Backend::AdamW& h, cudaStream_t s) {
  const int64_t n = param.numel();
  if (n == 0) return;
  const float bc1 = static_cast<float>(1.0 - std::pow(static_cast<double>(h.beta1), static_cast<double>(h.step)));
  const float bc2 = static_cast<float>(1.0 - std::pow(static_cast<double>(h.beta2), static_cast<double>(h.step)));
  adamw_kernel<<<grid_for(n, kThreads), kThreads, 0, s>>>(param.ptr<float>(), grad.ptr<float>(), m.ptr<float>(),
                                                           v.ptr<float>(), h.lr, h.beta1, h.beta2, h.eps,
                                                           h.weight_decay, bc1, bc2, n);
  CUDA_CHECK_LAUNCH();
}

void launch_rope(Tensor x, const int32_t* positions, Tensor inv_freq, bool inverse, cudaStream_t s) {
  const int64_t tokens = x.dim(0), heads = x.dim(1), half = x.dim(2) / 2;
  const int64_t n = tokens * heads * half;
  if (n == 0) return;
  if (half % 8 == 0 && vec_dtype(x.dtype) && aligned16(x.data)) {
    const int64_t nv = n / 8;
    const float sign = inverse ? -1.0f : 1.0f;
    if (x.dtype == DType::kBF16)
      rope_vec_kernel<<<grid_for(nv, kThreads), kThreads, 0, s>>>(x.ptr<__nv_bfloat16>(), positions,
                                                                  inv_freq.ptr<float>(), heads, half, sign, nv);
    else
      rope_vec_kernel<<<grid_for(nv, kThreads), kThreads, 0, s>>>(x.ptr<float>(), positions, inv_freq.ptr<float>(),
                                                                  heads, half, sign, nv);
    CUDA_CHECK_LAUNCH();
    return;
  }
  rope_kernel<<<grid_for(n, kThreads), kThreads, 0, s>>>(x.data, x.dtype, positions, inv_freq.ptr<float>(), tokens,
                                                          heads, half, inverse ? -1.0f : 1.0f);
  CUDA_CHECK_LAUNCH();
}

bool launch_rope_qk(Tensor q, Tensor k, const int32_t* positions, Tensor inv_freq, bool inverse, cudaStream_t s) {
  const int64_t half = q.dim(2) / 2;
  if (k.dim(2) != q.dim(2) || k.dim(0) != q.dim(0) || half % 8 != 0 || q.dtype != k.dtype || !vec_dtype(q.dtype) ||
      !aligned16(q.data) || !aligned16(k.data))
    return false;
  const int64_t nq = q.dim(0) * q.dim(1) * half / 8, nk = k.dim(0) * k.dim(1) * half / 8;
  if (nq + nk == 0) return true;
  const float sign = inverse ? -1.0f : 1.0f;
  if (q.dtype == DType::kBF16)
    rope_qk_vec_kernel<<<grid_for(nq + nk, kThreads), kThreads, 0, s>>>(
        q.ptr<__nv_bfloat16>(), q.dim(1), nq, k.ptr<__nv_bfloat16>(), k.dim(1), nk, positions, inv_freq.ptr<float>(),
        half, sign);
  else
    rope_qk_vec_kernel<<<grid_for(nq + nk, kThreads), kThreads, 0, s>>>(
        q.ptr<float>(), q.dim(1), nq, k.ptr<float>(), k.dim(1), nk, positions, inv_freq.ptr<float>(), half, sign);
  CUDA_CHECK_LAUNCH();
  return true;
}

void launch_sum_squares(Tensor out, Tensor x, float* scratch, cudaStream_t s) {
  const int64_t n = x.numel();
  // The grid depends on n only, so the reduction order (and the bits) is fixed per shape.
  const unsigned blocks = grid_for(n, kThreads, kSumSquaresBlocks);
  sum_squares_partial<<<blocks, kThreads, 0, s>>>(scratch, x.ptr<float>(), n);
  CUDA_CHECK_LAUNCH();
  sum_squares_final<<<1, 1024, 0, s>>>(out.ptr<float>(), scratch, static_cast<int>(blocks));
  CUDA_CHECK_LAUNCH();
}

}  // namespace st::cuda
